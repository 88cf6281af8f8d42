"""Seconds of the first exact-name look-up after loading a saved index (what a tied search or kb.alias_to_cuis
does first in every process), of adding 5,000 names to it after (`add_names`, as evaluate's biosyn protocol adds
training mentions), and of adding 100 mentions of concepts it lacks (`new_concepts=True`), at growing numbers of names.

A synthetic index (random 16-dimensional vectors, two names per concept) is built and saved once per size; each
load and look-up runs in a fresh subprocess, so nothing built in one process helps the next.

Usage: python benchmarks/bench_name_lookup.py --names 300000 1000000 [--dir /tmp/bench-name-lookup]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy


def build(folder: Path, n_names: int) -> None:
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import Concept

    rng = numpy.random.default_rng(0)
    concepts = (Concept(f"C{i}", f"name {i} a", synonyms=[f"name {i} b"]) for i in range(n_names // 2))
    ConceptIndex.build(concepts, lambda names: rng.standard_normal((len(names), 16)).astype("float32")).to_disk(folder)


def first_lookup(folder: Path) -> dict:
    from spacy_sapbert.index import ConceptIndex

    started = time.perf_counter()
    index = ConceptIndex.from_disk(folder)
    loaded = time.perf_counter()
    row = index.name_row("name 7 b")
    done = time.perf_counter()
    rng = numpy.random.default_rng(1)
    mentions = [(f"C{i}", f"mention {i}") for i in range(0, 10000, 2)]
    encode = lambda names: rng.standard_normal((len(names), 16)).astype("float32")  # noqa: E731
    index.add_names(mentions, encode)
    added = time.perf_counter()
    index.add_names([(f"NEW{i}", f"new mention {i}") for i in range(100)], encode, new_concepts=True)
    return {"load_s": loaded - started, "first_lookup_s": done - loaded, "add_names_s": added - done,
            "new_concepts_s": time.perf_counter() - added, "found": row is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, nargs="+", default=[300000, 1000000])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-name-lookup"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(first_lookup(args.child)))
        return
    print("| names | index load s | first name look-up s | add_names of 5,000 s | 100 new concepts s |")
    print("|---|---|---|---|---|")
    for n_names in args.names:
        folder = args.dir / str(n_names)
        build(folder, n_names)
        out = subprocess.run([sys.executable, __file__, "--child", str(folder)], capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["found"]
        print(f"| {n_names:,} | {result['load_s']:.2f} | {result['first_lookup_s']:.3f} | {result['add_names_s']:.2f} | {result['new_concepts_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
