"""Memory of an index build's Python objects at a vocabulary's size, side by side: the concepts held as a list of
Concept objects while the names are encoded (what build-index passed before), and read into a ConceptTable first
(what build-index passes now). Vectors are left out: a stand-in encoder gives 16-dimensional random vectors, so what
is measured is the vocabulary's objects. Each mode runs in a fresh process; the figure is the process's resident
memory when the encoder is called (what is held while a real encoder runs for hours) and its peak, less its resident
memory before the vocabulary is read.

Usage: python benchmarks/bench_build_memory.py VOCABULARY [--format auto]
(a synthetic MRCONSO: python benchmarks/make_synthetic_mrconso.py DIR --rows 400000 --no-extras)
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 1e6


def run(vocabulary: str, fmt: str, mode: str) -> dict:
    import numpy

    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import ConceptTable, KnowledgeBase
    from spacy_sapbert.readers import read_vocabulary

    before = rss_mb()
    if mode == "list":
        concepts = list(read_vocabulary(vocabulary, fmt))
    else:
        concepts = ConceptTable.from_concepts(KnowledgeBase(read_vocabulary(vocabulary, fmt)))
    seen = {}

    def encode(names):
        seen["names"] = len(names)
        seen["while encoding"] = rss_mb() - before
        return numpy.random.default_rng(0).standard_normal((len(names), 16)).astype("float32")

    ConceptIndex.build(concepts, encode)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # kB on Linux
    return {**seen, "peak": peak - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vocabulary")
    parser.add_argument("--format", default="auto")
    parser.add_argument("--mode", choices=["list", "table"], help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(run(args.vocabulary, args.format, args.mode)))
        return
    print("| concepts held as | distinct names | MB while encoding | peak MB |")
    print("|---|---|---|---|")
    for mode, label in (("list", "a list of Concept objects (before)"), ("table", "a ConceptTable (now)")):
        out = subprocess.run([sys.executable, __file__, args.vocabulary, "--format", args.format, "--mode", mode],
                             check=True, capture_output=True, text=True).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        print(f"| {label} | {figures['names']:,} | {figures['while encoding']:.0f} | {figures['peak']:.0f} |")


if __name__ == "__main__":
    main()
