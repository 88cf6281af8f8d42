"""Speed of trained NER pipelines side by side: docs/s and words/s of `nlp.pipe` on the same texts, interleaved.

Each model runs `--rounds` passes over the texts of a DocBin (the annotations are ignored: the pipeline
reads the raw text), in turn, after one warm-up pass each; the median pass is reported. The first model
is the baseline the others are compared with.

Usage: python benchmarks/bench_ner.py CORPUS.spacy MODEL [MODEL ...] [--rounds 3] [--threads N]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import spacy
import torch
from spacy.tokens import DocBin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("models", type=Path, nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pipelines = {model: spacy.load(model) for model in args.models}
    texts = [doc.text for doc in DocBin().from_disk(args.corpus).get_docs(spacy.blank("en").vocab)]
    words = sum(len(doc) for doc in spacy.blank("en").pipe(texts))
    for nlp in pipelines.values():
        list(nlp.pipe(texts[:20]))
    seconds = {model: [] for model in args.models}
    for _ in range(args.rounds):
        for model, nlp in pipelines.items():
            start = time.perf_counter()
            for _ in nlp.pipe(texts, batch_size=64):
                pass
            seconds[model].append(time.perf_counter() - start)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads")
    print(f"corpus: {args.corpus} ({len(texts)} docs, {words} words), {args.rounds} rounds")
    print("| model | seconds per pass (median) | docs/s | words/s | beside the first |")
    print("|---|---|---|---|---|")
    base = statistics.median(seconds[args.models[0]])
    for model in args.models:
        median = statistics.median(seconds[model])
        print(f"| {model} | {median:.2f} | {len(texts) / median:.0f} | {words / median:.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
