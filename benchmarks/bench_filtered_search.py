"""Seconds per query of a type-filtered concept search as the index grows, and whether it finds the exact top k.

A synthetic vocabulary of random unit vectors (two names per concept) is indexed once per size; each concept
gets type "all", every 100th also "common", and five concepts, spread over the rows, "rare". The same random
queries are searched unfiltered and with each type's mask (`ConceptIndex.search(..., allowed=type_mask)`), as
the linker searches with `types`. "recall" is the share of the exact top k (a brute-force inner product over the
allowed concepts' names, each concept at its best name) that the search returned, over all queries.

Usage: python benchmarks/bench_filtered_search.py --names 100000 400000 [--dim 64] [--index-type flat]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy

from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.kb import Concept


def synthetic_concepts(n_names: int):
    """Concepts of two names each, typed "all"; every 100th also "common"; five spread ones also "rare"."""
    n_concepts = n_names // 2
    rare = set(numpy.linspace(0, n_concepts - 1, 5).astype(int).tolist())
    for i in range(n_concepts):
        types = ("all",) + (("common",) if i % 100 == 0 else ()) + (("rare",) if i in rare else ())
        yield Concept(f"C{i}", f"name {i} a", synonyms=(f"name {i} b",), types=types)


def exact_top(index: ConceptIndex, vectors: numpy.ndarray, queries: numpy.ndarray, allowed: numpy.ndarray, k: int):
    """The k best allowed concept ids per query by brute force, each concept scored by its best name."""
    name_rows, concept_rows = index.links.pairs()
    keep = allowed[concept_rows]
    name_rows, concept_rows = name_rows[keep], concept_rows[keep]
    scores = queries @ vectors[name_rows].T
    tops = []
    for row in scores:
        best = numpy.full(len(index.concepts), -numpy.inf, dtype="float32")
        numpy.maximum.at(best, concept_rows, row)
        order = numpy.argsort(-best, kind="stable")[:k]
        tops.append({index.ids[r] for r in order if best[r] > -numpy.inf})
    return tops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, nargs="+", default=[100000, 400000])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--index-type", default="flat")
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    print(f"{platform.machine()}; index_type {args.index_type}, dim {args.dim}, {args.queries} queries, k {args.k}")
    print("| names | filter | allowed concepts | seconds per query | recall of the exact top k |")
    print("|---|---|---|---|---|")
    for n_names in args.names:
        rng = numpy.random.default_rng(0)
        stored = []

        def encode(names):
            vectors = rng.standard_normal((len(names), args.dim)).astype("float32")
            vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
            stored.append(vectors)
            return vectors

        index = ConceptIndex.build(synthetic_concepts(n_names), encode, index_type=args.index_type)
        vectors = numpy.concatenate(stored)
        queries = rng.standard_normal((args.queries, args.dim)).astype("float32")
        queries /= numpy.linalg.norm(queries, axis=1, keepdims=True)
        index.search(queries[:1], args.k)  # warm
        for label, types in (("none", None), ("common (1%)", ["common"]), ("rare (5 concepts)", ["rare"])):
            allowed = None if types is None else index.type_mask(types)
            started = time.perf_counter()
            hits = index.search(queries, args.k, allowed)
            seconds = (time.perf_counter() - started) / len(queries)
            mask = numpy.ones(len(index.concepts), bool) if allowed is None else allowed
            expected = exact_top(index, vectors, queries, mask, args.k)
            found = sum(len({cid for cid, _ in row} & want) for row, want in zip(hits, expected))
            recall = found / sum(len(want) for want in expected)
            print(f"| {len(index.names):,} | {label} | {int(mask.sum()):,} | {seconds:.4f} | {100 * recall:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
