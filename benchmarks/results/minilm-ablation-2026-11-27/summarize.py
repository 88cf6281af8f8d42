"""The MiniLM ablation at the code of 2026-11-27, acc@1 / acc@5, every row scored through the component:
untuned and + SAP (this folder: untuned.sh, sap.sh + after_sap.sh, the SAP model trained on the Xeon), + DHNS and
+ memory (the seed-42 GPU chain, ../gpu-rr-2026-11-26/minilm-cpu), and its re-rankers: mention-only seeds 42
(../gpu-rr-2026-11-26/minilm-cpu) and 43 (rr43-*.json here), and 8 context words, seed 42 (../context-reranker-2026-11-27).

    python summarize.py   (from this folder; output: scores.md)
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gpu-mpnet-2026-11-26"))
from summarize import cell  # noqa: E402  (the same cell format as the other tables)

EVALUATIONS = ("dev", "ncbi-test", "bc5cdr")


def reports(prefix: str):
    """{evaluation: report or None} of the files `prefix`{evaluation}.json."""
    paths = {name: Path(f"{prefix}{name}.json") for name in EVALUATIONS}
    return {name: json.loads(path.read_text()) if path.exists() else None for name, path in paths.items()}


def main():
    chain, context, seed43 = reports("../gpu-rr-2026-11-26/minilm-cpu/"), reports("../context-reranker-2026-11-27/"), reports("rr43-")
    rows = [("untuned", reports("untuned-"), "sentence-transformers/all-MiniLM-L6-v2"),
            ("+ SAP (seed 42, trained on the Xeon)", reports("sap-"), "sap-minilm/model"),
            ("+ DHNS (the GPU chain, seed 42)", chain, "dhns-model"),
            ("+ memory", chain, "dhns-model + memory"),
            ("+ re-ranker, mention only, seed 42", chain, "dhns-model + memory + re-ranker"),
            ("+ re-ranker, mention only, seed 43", seed43, "dhns-model + memory + re-ranker"),
            ("+ re-ranker, 8 context words, seed 42", context, "dhns-model + memory + re-ranker")]
    lines = ["| MiniLM (all-MiniLM-L6-v2) | dev strict | dev biosyn | NCBI test strict | test biosyn | BC5CDR strict | BC5CDR biosyn |",
             "|---|---|---|---|---|---|---|"]
    for label, by_evaluation, system in rows:
        cells = [cell(by_evaluation[e], system, p) if by_evaluation[e] else "not run" for e in EVALUATIONS for p in ("strict", "biosyn")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    Path("scores.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
