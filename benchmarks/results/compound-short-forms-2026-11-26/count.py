"""Definitions whose short form joins parts with '-' or '/' ("HPT-JT", "ALD/AMN"), and those whose parts
also stand alone in the document, with the annotated mentions among them. The detector defines only the
whole short form, so a later "HPT" or "ALD" in the same document is not expanded.

    python count.py [DATA]        (DATA: ../shared/data by default)
"""
import re
import sys
from pathlib import Path

from spacy_sapbert.abbreviations import find_abbreviations
from spacy_sapbert.readers.corpora import read_pubtator

DATA = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[4] / "shared" / "data")
FILES = ["ncbi-disease/NCBItrainset_corpus.txt", "ncbi-disease/NCBIdevelopset_corpus.txt", "ncbi-disease/NCBItestset_corpus.txt",
         "bc5cdr/CDR_TrainingSet.PubTator.txt", "bc5cdr/CDR_DevelopmentSet.PubTator.txt"]


def standalone(part: str, text: str) -> bool:
    return bool(re.search(r"(?<![\w-])" + re.escape(part) + r"(?![\w-])", text))


total = compound = alone = 0
for name in FILES:
    for document in read_pubtator(DATA / name):
        for abbreviation in find_abbreviations(document.text):
            total += 1
            short, long = str(abbreviation.short), str(abbreviation.long)
            parts = [p for p in re.split(r"[-/]", short) if re.search(r"[A-Za-z]", p) and len(p) >= 2]
            if not re.search(r"[-/]", short) or len(parts) < 2:
                continue
            compound += 1
            used = [p for p in parts if standalone(p, document.text)]
            if used:
                alone += 1
                mentions = [m.text for m in document.mentions if m.text in used or any(m.text.endswith(" " + p) for p in used)]
                print(f"{name.split('/')[-1]:<32} {document.id:>9}  {short!r} <- {long!r}  alone: {used}  mentions: {mentions}")
print(f"{total} definitions; {compound} short forms of two or more parts (letters, 2+ characters) joined by - or /; "
      f"{alone} with a part standing alone in its document")
