"""Linking accuracy and speed with and without a type filter, over a vocabulary that mixes concept kinds.

The pipeline's sapbert_linker links the gold mentions of an annotated corpus (its mention finders left
out: `evaluate_end_to_end(gold_mentions=True)`) twice in one run: unfiltered, then with
`types_by_label` (each label's mentions may link only to concepts of the given types). Accuracy is the
share of gold mentions (with a gold id) linked to a gold id, per label; seconds are the best of
`--repeats` passes over all documents, the vector cache emptied before each pass so that every
mention is encoded each time.

Usage: python benchmarks/bench_type_filter.py PIPELINE --corpus CDR_DevelopmentSet.PubTator.txt \
           --types-by-label '{"Disease": ["C"], "Chemical": ["D"]}' [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import spacy
import torch

from spacy_sapbert.evaluation import evaluate_end_to_end
from spacy_sapbert.pipeline import the_linker
from spacy_sapbert.readers.corpora import read_pubtator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline")
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--types-by-label", required=True, help="JSON: label -> list of allowed types")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    types_by_label = {label: tuple(types) for label, types in json.loads(args.types_by_label).items()}
    nlp = spacy.load(args.pipeline)
    linker = the_linker(nlp)
    documents = list(read_pubtator(args.corpus))
    print(f"{args.corpus}: {len(documents)} documents; {len(linker.index)} concepts, {len(linker.index.names)} names; "
          f"{platform.machine()}, torch threads {torch.get_num_threads()}")
    print("| filter | " + " | ".join(f"{label} acc@1 (right / golds)" for label in types_by_label) + " | seconds (best of repeats) |")
    print("|---|" + "---|" * len(types_by_label) + "---|")
    for name, setting in (("none", {}), (f"types_by_label {args.types_by_label}", types_by_label)):
        linker.types_by_label = setting
        linker.check_types()
        scores, seconds = {}, []
        for _ in range(args.repeats):
            linker.vector_cache.clear()
            started = time.perf_counter()
            scores = {label: evaluate_end_to_end(nlp, documents, labels=[label], gold_mentions=True) for label in types_by_label}
            seconds.append(time.perf_counter() - started)
        cells = [f"{100 * s['recall']:.1f} ({s['tp']} / {s['tp'] + s['fn']})" for s in scores.values()]
        print(f"| {name} | " + " | ".join(cells) + f" | {min(seconds):.1f} |")


if __name__ == "__main__":
    main()
