"""Saved pipelines side by side on an annotated corpus: linking the gold mentions, and end to end.

For each pipeline: (1) its mention finders (NER, rulers) left out, the rest of the pipeline links the
gold mentions, and the share linked to a gold id is the linking accuracy; (2) the whole pipeline on the
raw texts, (span, id) P/R/F1 with exact offsets. A pipeline that ends in spaCy's entity_linker (trained
on the sapbert_linker's candidates) is compared with the same pipeline without it by passing both; the
scoring is `evaluation.evaluate_end_to_end` (ids resolved through the sapbert_linker, "A|B" golds met
by either part).

Usage: python benchmarks/eval_entity_linker.py --corpus NCBIdevelopset_corpus.txt PIPELINE [PIPELINE ...]
       [--without entity_linker]   also score each pipeline with that component disabled
"""
from __future__ import annotations

import argparse
import platform
import time
from contextlib import nullcontext

import spacy

from spacy_sapbert.evaluation import evaluate_end_to_end
from spacy_sapbert.readers.corpora import read_pubtator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipelines", nargs="+")
    parser.add_argument("--corpus", required=True, help="PubTator file (NCBI-disease, BC5CDR)")
    parser.add_argument("--without", default=None, help="also score each pipeline with this component disabled")
    args = parser.parse_args()
    documents = list(read_pubtator(args.corpus))
    print(f"{args.corpus}: {len(documents)} documents, {sum(len(d.mentions) for d in documents)} mentions; {platform.processor() or platform.machine()}")
    print("| pipeline | gold mentions: accuracy (right / linked golds) | end to end (span, id) P / R / F1 | seconds |")
    print("|---|---|---|---|")
    for path in args.pipelines:
        nlp = spacy.load(path)
        variants = [(path, None)]
        if args.without and args.without in nlp.pipe_names:
            variants.insert(0, (f"{path} without {args.without}", args.without))
        for name, disabled in variants:
            started = time.perf_counter()
            with nlp.select_pipes(disable=[disabled]) if disabled else nullcontext():
                gold = evaluate_end_to_end(nlp, documents, gold_mentions=True)
                e2e = evaluate_end_to_end(nlp, documents)
            seconds = time.perf_counter() - started
            linked = gold["tp"] + gold["fn"]
            print(
                f"| {name} | {100 * gold['recall']:.1f} ({gold['tp']} / {linked}) | "
                f"{100 * e2e['precision']:.1f} / {100 * e2e['recall']:.1f} / {100 * e2e['f1']:.1f} | {seconds:.0f} |"
            )


if __name__ == "__main__":
    main()
