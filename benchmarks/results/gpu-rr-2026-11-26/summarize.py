"""acc@1 / acc@5 of the device's reports (seed 42), and of the MiniLM chain's re-ranker scored on the Xeon, as the
BENCHMARKS tables show them.

    python summarize.py   (from this folder; output: scores.md)

The chain's reports (seed42/dhns-*.json) carry the rows of the re-ranker trained on both corpora; the re-ranker
trained on NCBI-disease train alone was scored by call_rr_ncbi.sh, whose reports are inside seed42/rr-ncbi.tar.gz.
minilm-cpu/ holds the reports of minilm-cpu/run.sh.
"""
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gpu-mpnet-2026-11-26"))
from summarize import cell  # noqa: E402  (the same cell format as the chain's table)

FOLDER = Path("seed42")
EVALUATIONS = ("dev", "ncbi-test", "bc5cdr")


def reports():
    """{re-ranker data: {evaluation: report}} for both re-rankers."""
    both = {name: json.loads((FOLDER / f"dhns-{name}.json").read_text()) for name in EVALUATIONS}
    with tarfile.open(FOLDER / "rr-ncbi.tar.gz") as tar:
        ncbi = {name: json.load(tar.extractfile(f"rr-ncbi-{name}.json")) for name in EVALUATIONS}
    return {"both corpora": both, "NCBI-disease train": ncbi}


def main():
    by_data = reports()
    rows = [("+ DHNS", "both corpora", "dhns/model"),
            ("+ re-ranker (both corpora), no memory", "both corpora", "dhns/model + re-ranker"),
            ("+ re-ranker (NCBI-disease train), no memory", "NCBI-disease train", "dhns/model + re-ranker"),
            ("+ memory", "both corpora", "dhns/model + memory"),
            ("+ memory + re-ranker (both corpora)", "both corpora", "dhns/model + memory + re-ranker"),
            ("+ memory + re-ranker (NCBI-disease train)", "NCBI-disease train", "dhns/model + memory + re-ranker")]
    lines = ["| mpnet chain, seed 42 | dev strict | dev biosyn | NCBI test strict | test biosyn | BC5CDR strict | BC5CDR biosyn |",
             "|---|---|---|---|---|---|---|"]
    for label, data, system in rows:
        cells = [cell(by_data[data][name], system, p) for name in EVALUATIONS for p in ("strict", "biosyn")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    minilm = {name: json.loads((Path("minilm-cpu") / f"{name}.json").read_text()) for name in EVALUATIONS}
    lines += ["", "| MiniLM chain, seed 42 (GPU-trained, scored on the Xeon) | dev strict | dev biosyn | NCBI test strict | test biosyn | BC5CDR strict | BC5CDR biosyn |",
              "|---|---|---|---|---|---|---|"]
    for label, system in (("+ DHNS", "dhns-model"), ("+ re-ranker (both corpora), no memory", "dhns-model + re-ranker"),
                          ("+ memory", "dhns-model + memory"), ("+ memory + re-ranker (both corpora)", "dhns-model + memory + re-ranker")):
        cells = [cell(minilm[name], system, p) for name in EVALUATIONS for p in ("strict", "biosyn")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    Path("scores.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
