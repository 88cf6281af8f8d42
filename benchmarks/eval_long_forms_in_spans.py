"""Linking through a saved pipeline with `span._.long_form` as it is now (every short form defined in the doc
written out inside a span: "primary HPT" -> "primary hyperparathyroidism") beside the rule before it (only a
span that is exactly a short form gets its long form), in one run on one pipeline.

Prints, for each rule: linking accuracy of the corpus's gold mentions placed as entities (the pipeline's mention
finders left out, as choose-pipeline scores), and the end-to-end (span, id) P/R/F1 of the whole pipeline on the
raw texts; and how many gold mentions each rule searches as another string than written.

Usage: python benchmarks/eval_long_forms_in_spans.py PIPELINE CORPUS.txt [--label Disease ...]
"""
from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Iterator, Optional

import spacy
from spacy.tokens import Span

from spacy_sapbert.abbreviations import _doc_abbreviation_list, long_forms
from spacy_sapbert.evaluation.end_to_end import evaluate_end_to_end, gold_mention_doc, mention_finders
from spacy_sapbert.ner_corpus import DEFAULT_LABEL_MAP
from spacy_sapbert.readers.corpora import read_pubtator


def whole_span_long_form(span: Span) -> Optional[str]:
    """The rule before: the long form of a span that is exactly a short form defined in its doc, else None."""
    return long_forms(_doc_abbreviation_list(span.doc)).get(span.text)


@contextlib.contextmanager
def long_form_rule(rule) -> Iterator[None]:
    """`span._.long_form` computed by `rule` (None: as the package defines it) while inside."""
    saved = Span.get_extension("long_form")
    if rule is not None:
        Span.set_extension("long_form", getter=rule, force=True)
    try:
        yield
    finally:
        Span.set_extension("long_form", getter=saved[2], force=True)  # the package's is a getter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pipeline", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--label", action="append", default=[])
    args = parser.parse_args()
    nlp = spacy.load(args.pipeline)
    documents = list(read_pubtator(args.corpus))
    labels = args.label or None
    print(f"pipeline: {args.pipeline} ({', '.join(nlp.pipe_names)}); corpus: {args.corpus}")
    print("| span._.long_form | gold mentions searched as another string | gold-mention accuracy | end-to-end (span, id) P / R / F1 |")
    print("|---|---|---|---|")
    for name, rule in (("whole span only (before)", whole_span_long_form), ("short forms inside the span (now)", None)):
        with long_form_rule(rule):
            with nlp.select_pipes(disable=mention_finders(nlp)):
                docs = list(nlp.pipe(gold_mention_doc(nlp, d, DEFAULT_LABEL_MAP, set(labels) if labels else None) for d in documents))
            changed = sum(1 for doc in docs for ent in doc.ents if ent._.long_form not in (None, ent.text))
            gold = evaluate_end_to_end(nlp, documents, labels, gold_mentions=True)
            end = evaluate_end_to_end(nlp, documents, labels)
        print(
            f"| {name} | {changed} of {gold['tp'] + gold['fn']} | {100 * gold['recall']:.2f} ({gold['tp']}) | "
            f"{100 * end['precision']:.2f} / {100 * end['recall']:.2f} / {100 * end['f1']:.2f} |"
        )


if __name__ == "__main__":
    main()
