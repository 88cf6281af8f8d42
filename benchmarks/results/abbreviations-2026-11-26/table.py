"""Before (session 17) / after (abbreviation fix) acc@1 table, per system row and protocol."""
import json
S17 = "/work/runs/s17/"; NEW = "/work/runs/s18/rerun/"
systems = {
    "MiniLM SAP + DHNS (NCBI)": ("minilm", ["minilm-dev", "minilm-ncbi-test", "minilm-bc5cdr"]),
    "MiniLM SAP + DHNS (NCBI + BC5CDR)": ("minilm-both", ["minilm-both-dev", "both-minilm-ncbi-test", "both-minilm-bc5cdr"]),
    "mpnet DHNS (NCBI)": ("mpnet", ["mpnet-dev", "mpnet-ncbi-test", "mpnet-bc5cdr"]),
    "mpnet DHNS (NCBI + BC5CDR)": ("mpnet-both", ["both-rr-dev", "both-rr-mpnet-ncbi-test", "both-rr-mpnet-bc5cdr"]),
}
suffixes = [("", ""), (" + memory", " + memory"), (" + re-ranker", " + re-ranker"), (" + memory + re-ranker", " + memory + re-ranker")]
print("| system | NCBI-disease dev strict | dev biosyn | NCBI-disease test strict | test biosyn | BC5CDR-disease dev strict | BC5CDR biosyn |")
print("|---|---|---|---|---|---|---|")
for label, (new, olds) in systems.items():
    new_reports = [json.load(open(NEW + f"{new}-{s}.json")) for s in ("dev", "ncbi-test", "bc5cdr")]
    old_reports = [json.load(open(S17 + f"{o}.json")) for o in olds]
    for suffix, _ in suffixes:
        cells = []
        for old, now in zip(old_reports, new_reports):
            def find(r):
                for name, by in r["results"].items():
                    bare = name.replace(" (tuned here)", "")
                    if bare.endswith(suffix or ")") or (not suffix and bare.endswith("model")):
                        if suffix == "" and ("+" in bare):
                            continue
                        if suffix and not bare.split(" + ", 1)[-1] == suffix[3:]:
                            continue
                        return by
                return None
            o, n = find(old), find(now)
            if n is None:
                cells = None; break
            for p in ("strict", "biosyn"):
                cells.append(f"{100 * o[p]['acc@1']:.1f} -> {100 * n[p]['acc@1']:.1f}" if o else f"{100 * n[p]['acc@1']:.1f}")
        if cells:
            print(f"| {label}{suffix} | " + " | ".join(cells) + " |")
