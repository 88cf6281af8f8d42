"""NER span P/R/F1 of trained pipelines with the abbreviation detector after the NER, without and with
`label_short_forms` (short forms follow their long forms: labelled where the long form lies inside an
entity, dropped where it overlaps none).

With --gold, also the gold entities themselves through the detector: what it adds to or removes from a perfect
NER (its precision then counts wrong short forms added, its recall right entities removed).

Usage: python benchmarks/eval_short_forms.py CORPUS.spacy MODEL [MODEL ...] [--gold]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import spacy
from spacy.scorer import Scorer
from spacy.tokens import DocBin
from spacy.training import Example


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("models", type=Path, nargs="+")
    parser.add_argument("--gold", action="store_true", help="Also run the detector on the gold entities.")
    args = parser.parse_args()
    print(f"corpus: {args.corpus}")
    print("| model | label_short_forms | P | R | F1 |")
    print("|---|---|---|---|---|")
    for model in args.models:
        nlp = spacy.load(model)
        nlp.add_pipe("sapbert_abbreviations")
        gold = list(DocBin().from_disk(args.corpus).get_docs(nlp.vocab))
        docs = list(nlp.pipe(doc.text for doc in gold))
        detector = nlp.get_pipe("sapbert_abbreviations")
        for label_short_forms in (False, True):
            detector.label_short_forms = label_short_forms
            predicted = [detector(doc.copy()) for doc in docs]
            scores = Scorer.score_spans([Example(p, g) for p, g in zip(predicted, gold)], "ents")
            print(f"| {model} | {label_short_forms} | {100 * scores['ents_p']:.2f} | {100 * scores['ents_r']:.2f} | {100 * scores['ents_f']:.2f} |")
    if args.gold:
        nlp = spacy.blank("en")
        detector = nlp.add_pipe("sapbert_abbreviations", config={"label_short_forms": True})
        gold = list(DocBin().from_disk(args.corpus).get_docs(nlp.vocab))
        examples = [Example(detector(doc.copy()), doc) for doc in gold]
        added = sum(len({(e.start, e.end) for e in x.predicted.ents} - {(e.start, e.end) for e in x.reference.ents}) for x in examples)
        removed = sum(len({(e.start, e.end) for e in x.reference.ents} - {(e.start, e.end) for e in x.predicted.ents}) for x in examples)
        scores = Scorer.score_spans(examples, "ents")
        print(f"| gold entities ({added} added, {removed} removed) | True | {100 * scores['ents_p']:.2f} | "
              f"{100 * scores['ents_r']:.2f} | {100 * scores['ents_f']:.2f} |")


if __name__ == "__main__":
    main()
