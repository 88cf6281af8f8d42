"""Linking one long document with many entities: time per document as the document grows.

Each document is one definition ("Heart failure (HF) was seen.") followed by N copies of a sentence with one entity
and one parenthesis that defines nothing, so the abbreviation detector has N parentheses to read and the linker N
entities but one distinct mention to encode: what is left is the per-parenthesis and per-entity work (the long form of
each entity). Linear work keeps seconds per 1,000 entities flat as N grows. Run it with PYTHONPATH set to two checkouts
to compare them; nothing is downloaded (the offline all-MiniLM-L6-v2 encodes three names).

Usage: python benchmarks/bench_long_document.py [--sizes 1000 2000 4000]
"""
from __future__ import annotations

import argparse
import time

import spacy
import torch
from spacy.tokens import Span

from spacy_sapbert.encoder import offline_default_model
from spacy_sapbert.kb import Concept


def long_document(nlp, copies: int):
    text = "Heart failure (HF) was seen. " + " ".join(["Patients with heart failure (NYHA) and renal disease."] * copies)
    doc = nlp.make_doc(text)
    doc.ents = [Span(doc, i, i + 2, label="DISEASE") for i, token in enumerate(doc) if token.text == "heart"]
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    args = parser.parse_args()
    torch.set_num_threads(1)
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_abbreviations")
    linker = nlp.add_pipe("sapbert_linker", config={"model": offline_default_model(), "pooling": "mean", "device": "cpu"})
    linker.initialize(vocabulary=[Concept("D1", "heart failure"), Concept("D2", "renal disease"), Concept("D3", "fever")])
    detector = nlp.get_pipe("sapbert_abbreviations")
    linker(detector(long_document(nlp, 10)))  # warm: load and encode once
    print("| characters | entities | detector seconds | linker seconds | linker seconds per 1,000 entities |")
    print("|---|---|---|---|---|")
    for size in args.sizes:
        doc = long_document(nlp, size)
        start = time.perf_counter()
        detector(doc)
        detected = time.perf_counter()
        linker(doc)
        seconds = time.perf_counter() - detected
        print(f"| {len(doc.text):,} | {len(doc.ents):,} | {detected - start:.2f} | {seconds:.2f} | {1000 * seconds / len(doc.ents):.3f} |")


if __name__ == "__main__":
    main()
