"""The part definitions that compound short forms give (spacy_sapbert.abbreviations.compound_parts), on
real corpora, with the annotated mentions that hold a part as a whole word and so are now expanded.

    python parts.py [DATA]        (DATA: ../shared/data by default)
"""
import re
import sys
from pathlib import Path

from spacy_sapbert.abbreviations import compound_parts, find_abbreviations
from spacy_sapbert.readers.corpora import read_pubtator

DATA = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[4] / "shared" / "data")
FILES = ["ncbi-disease/NCBItrainset_corpus.txt", "ncbi-disease/NCBIdevelopset_corpus.txt", "ncbi-disease/NCBItestset_corpus.txt",
         "bc5cdr/CDR_TrainingSet.PubTator.txt", "bc5cdr/CDR_DevelopmentSet.PubTator.txt"]

for name in FILES:
    definitions = compounds = parts = mentions = 0
    for document in read_pubtator(DATA / name):
        for abbreviation in find_abbreviations(document.text):
            definitions += 1
            defined = compound_parts(abbreviation)
            if not defined:
                continue
            compounds += 1
            parts += len(defined)
            words = {a.short for a in defined}
            hit = [m for m in document.mentions if any(re.search(r"(?<!\w)" + re.escape(w) + r"(?!\w)", m.text) for w in words)
                   and m.text != abbreviation.short]
            mentions += len(hit)
            print(f"{name.split('/')[-1]:<32} {document.id:>9}  {abbreviation.short!r}: "
                  + ", ".join(f"{a.short} = {a.long!r}" for a in defined) + f"  | mentions: {[m.text for m in hit]}")
    print(f"== {name}: {definitions} definitions, {compounds} compound short forms with parts, {parts} parts, "
          f"{mentions} annotated mentions holding a part")
