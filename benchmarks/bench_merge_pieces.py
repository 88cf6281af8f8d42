"""Seconds to merge one concept that arrives in many pieces (a CUI whose rows are spread through an unsorted
MRCONSO, or a merged vocabulary), side by side: `KnowledgeBase` as it merges now, and the earlier way, a new
`Concept.merged` per piece (the baseline). Both give the same concept; the script checks that.

Usage: python benchmarks/bench_merge_pieces.py --pieces 1000 10000 [--names-per-piece 3]
"""
from __future__ import annotations

import argparse
import functools
import time

from spacy_sapbert.kb import Concept, KnowledgeBase


def pieces(n: int, names_per_piece: int) -> list:
    return [
        Concept("C0000001", f"name {i} 0", [f"name {i} {j}" for j in range(1, names_per_piece)], [f"T{i % 7}"], [f"MESH:D{i}"], sources=["MSH"])
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pieces", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--names-per-piece", type=int, default=3)
    args = parser.parse_args()
    print("| pieces | names | Concept.merged per piece (before), s | KnowledgeBase (now), s |")
    print("|---|---|---|---|")
    for n in args.pieces:
        started = time.perf_counter()
        folded = functools.reduce(lambda a, b: a.merged(b), pieces(n, args.names_per_piece))
        baseline = time.perf_counter() - started
        started = time.perf_counter()
        (merged,) = list(KnowledgeBase(pieces(n, args.names_per_piece)))
        now = time.perf_counter() - started
        assert merged.to_dict() == folded.to_dict()
        print(f"| {n:,} | {len(merged.names):,} | {baseline:.2f} | {now:.3f} |")


if __name__ == "__main__":
    main()
