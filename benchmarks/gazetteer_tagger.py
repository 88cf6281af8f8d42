"""The gazetteer's matches alone as a NER: span P/R/F1 of the leftmost-longest name matches against a DocBin's entities.

This is what `spacy-sapbert.WithGazetteer.v1` tells the NER (the same names, stop words and matching),
scored as if every match were a mention; the NER learns how far to trust it.

Usage: python benchmarks/gazetteer_tagger.py CORPUS.spacy VOCAB [VOCAB ...] [--mesh-trees C]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import spacy
from spacy.tokens import DocBin
from spacy.training import biluo_tags_to_spans

from spacy_sapbert.gazetteer import TAGS, NameIndex, stop_words, doc_tokens, gazetteer_tags, matchable_names
from spacy_sapbert.readers import read_vocabularies, vocabulary_specs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("vocab", type=Path, nargs="+")
    parser.add_argument("--mesh-trees", action="append", default=[])
    args = parser.parse_args()
    start = time.perf_counter()
    concepts = read_vocabularies(vocabulary_specs(args.vocab, mesh_trees=args.mesh_trees))
    index = NameIndex(key for key, _ in matchable_names(concepts, stop_words("en")))
    read_seconds = time.perf_counter() - start
    docs = list(DocBin().from_disk(args.corpus).get_docs(spacy.blank("en").vocab))
    start = time.perf_counter()
    doc_tags = [gazetteer_tags(doc_tokens(doc), index) for doc in docs]
    match_seconds = time.perf_counter() - start
    tp = fp = fn = 0
    for doc, tags in zip(docs, doc_tags):
        labelled = [TAGS[t] if t == 0 else f"{TAGS[t]}-NAME" for t in tags]
        found = {(span.start, span.end) for span in biluo_tags_to_spans(doc, labelled)}
        gold = {(e.start, e.end) for e in doc.ents}
        tp, fp, fn = tp + len(found & gold), fp + len(found - gold), fn + len(gold - found)
    p, r = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    f = 2 * p * r / max(p + r, 1e-9)
    print(f"vocabularies: {', '.join(str(v) for v in args.vocab)} (mesh trees: {args.mesh_trees or 'all'}): "
          f"{len(index.names)} names, read in {read_seconds:.1f} s")
    print(f"corpus: {args.corpus}, {len(docs)} docs, {sum(len(d) for d in docs)} tokens, matched in {match_seconds:.2f} s")
    print(f"P {100 * p:.1f} R {100 * r:.1f} F1 {100 * f:.1f} (found {tp + fp}, gold {tp + fn}, right {tp})")


if __name__ == "__main__":
    main()
