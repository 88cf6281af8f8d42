"""acc@1 / acc@5 of the MiniLM chain (seed 42) with the mention-only re-ranker of session 23 (../gpu-rr-2026-11-26/minilm-cpu/)
beside the one that reads 8 words on each side of the mention (run.sh, reports here), and the mentions each re-ranker
breaks and fixes against the memory alone.

    python summarize.py   (from this folder; output: scores.md)

misses.tar.gz holds the `evaluate --errors` files of both runs: mention-only/{dev,ncbi-test,bc5cdr}-misses.jsonl and
context/{...}-misses.jsonl. A mention is told apart by (document, text), counted as a multiset.
"""
import json
import sys
import tarfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gpu-mpnet-2026-11-26"))
from summarize import cell  # noqa: E402  (the same cell format as the other tables)

EVALUATIONS = ("dev", "ncbi-test", "bc5cdr")
MEMORY, WITH_RERANKER = "dhns-model + memory", "dhns-model + memory + re-ranker"


def reports(folder: Path):
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in EVALUATIONS}


def misses(tar, run: str, evaluation: str, system: str, protocol: str) -> Counter:
    records = (json.loads(line) for line in tar.extractfile(f"{run}/{evaluation}-misses.jsonl").read().decode().splitlines())
    return Counter((r["doc_id"], r["text"]) for r in records if r["system"] == system and r["protocol"] == protocol)


def main():
    runs = {"mention-only": reports(Path("../gpu-rr-2026-11-26/minilm-cpu")), "context": reports(Path("."))}
    rows = [("+ DHNS", "context", "dhns-model"),
            ("+ re-ranker, mention only, no memory", "mention-only", "dhns-model + re-ranker"),
            ("+ re-ranker, 8 context words, no memory", "context", "dhns-model + re-ranker"),
            ("+ memory", "context", MEMORY),
            ("+ memory + re-ranker, mention only", "mention-only", WITH_RERANKER),
            ("+ memory + re-ranker, 8 context words", "context", WITH_RERANKER)]
    lines = ["| MiniLM chain, seed 42 (GPU-trained, scored on the Xeon) | dev strict | dev biosyn | NCBI test strict | test biosyn | BC5CDR strict | BC5CDR biosyn |",
             "|---|---|---|---|---|---|---|"]
    for label, run, system in rows:
        cells = [cell(runs[run][name], system, p) for name in EVALUATIONS for p in ("strict", "biosyn")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Against the memory alone, per mention (broken: the memory linked it and the re-ranker does not; fixed: the reverse):", "",
              "| evaluation | protocol | re-ranker | broken | fixed | most broken texts |", "|---|---|---|---|---|---|"]
    with tarfile.open("misses.tar.gz") as tar:
        for evaluation in EVALUATIONS:
            for protocol in ("strict", "biosyn"):
                memory = misses(tar, "context", evaluation, MEMORY, protocol)
                for run in ("mention-only", "context"):
                    reranked = misses(tar, run, evaluation, WITH_RERANKER, protocol)
                    broken, fixed = reranked - memory, memory - reranked
                    top = Counter()
                    for (_, text), n in broken.items():
                        top[text.lower()] += n
                    common = ", ".join(f"{text} ({n})" for text, n in top.most_common(3))
                    lines.append(f"| {evaluation} | {protocol} | {run} | {sum(broken.values())} | {sum(fixed.values())} | {common} |")
    Path("scores.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
