"""acc@1 / acc@5 of the mpnet chain's re-rankers (seed 42 chain), as the BENCHMARKS table shows them, and on NCBI-disease
dev which mentions each re-ranker breaks and fixes against the memory alone (acc@1, per protocol).

    python summarize.py   (from this folder; output: scores.md)

Reports: this folder's (`rr-ctx8-s42`: the re-ranker with --context-words 8, seed 42; `rr-ctx0-s43`: the mention-only
re-ranker, seed 43, whose BC5CDR-disease evaluation did not run), and ../gpu-rr-2026-11-26/seed42 (the mention-only
re-ranker, seed 42, on the same chain). The misses are inside the *-logs.tar.gz files.
"""
import gzip
import json
import sys
from collections import Counter
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gpu-mpnet-2026-11-26"))
from summarize import cell  # noqa: E402  (the same cell format as the chain's table)

EVALUATIONS = ("dev", "ncbi-test", "bc5cdr")
BEFORE = Path("../gpu-rr-2026-11-26/seed42")
RERANKERS = {"mention only, seed 42": None, "8 context words, seed 42": "rr-ctx8-s42", "mention only, seed 43": "rr-ctx0-s43"}


def read_report(path: Path):
    if path.with_suffix(".json.gz").exists():
        return json.loads(gzip.open(path.with_suffix(".json.gz")).read())
    return json.loads(path.read_text()) if path.exists() else None


def reports(name):
    """{evaluation: report or None} of one re-ranker."""
    if name is None:
        return {e: read_report(BEFORE / f"dhns-{e}.json") for e in EVALUATIONS}
    return {e: read_report(Path(f"{name}-{e}.json")) for e in EVALUATIONS}


def dev_misses(name):
    """{(system, protocol): Counter of (doc_id, text, gold)} missed at acc@1 on NCBI-disease dev (a mention written
    twice in a document is counted twice)."""
    tar_path, member = (BEFORE / "logs.tar.gz", "dhns-dev-misses.jsonl") if name is None else (Path(f"{name}-logs.tar.gz"), f"{name}-dev-misses.jsonl")
    missed = {}
    with tarfile.open(tar_path) as tar:
        for line in tar.extractfile(member):
            row = json.loads(line)
            if row["rank"] != 1:
                missed.setdefault((row["system"], row["protocol"]), Counter())[(row["doc_id"], row["text"], row["gold"])] += 1
    return missed


def main():
    lines = ["| mpnet chain, seed 42 | dev strict | dev biosyn | NCBI test strict | test biosyn | BC5CDR strict | BC5CDR biosyn |",
             "|---|---|---|---|---|---|---|"]
    first = reports(None)
    for label, system in (("+ DHNS", "dhns/model"), ("+ memory", "dhns/model + memory")):
        lines.append(f"| {label} | " + " | ".join(cell(first[e], system, p) for e in EVALUATIONS for p in ("strict", "biosyn")) + " |")
    for label, name in RERANKERS.items():
        by_evaluation = reports(name)
        for suffix, system in (("no memory", "dhns/model + re-ranker"), ("with the memory", "dhns/model + memory + re-ranker")):
            cells = [cell(by_evaluation[e], system, p) if by_evaluation[e] else "not run" for e in EVALUATIONS for p in ("strict", "biosyn")]
            lines.append(f"| + re-ranker ({label}), {suffix} | " + " | ".join(cells) + " |")
    lines += ["", "NCBI-disease dev, acc@1 against the memory alone: mentions the re-ranker breaks / fixes", ""]
    for label, name in RERANKERS.items():
        missed = dev_misses(name)
        counts = []
        for protocol in ("strict", "biosyn"):
            memory = next(v for (s, p), v in missed.items() if p == protocol and s.startswith("dhns/model + memory (tuned"))
            reranked = missed[("dhns/model + memory + re-ranker", protocol)]
            counts.append(f"{protocol} {sum((reranked - memory).values())} / {sum((memory - reranked).values())}")
        lines.append(f"- {label}: " + ", ".join(counts))
    Path("scores.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
