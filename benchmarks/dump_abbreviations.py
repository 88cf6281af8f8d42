"""Every abbreviation definition and every gold mention's queries in NCBI-disease and BC5CDR, as JSON, to compare two
checkouts' abbreviation rules (run it with PYTHONPATH set to each, then `--diff BEFORE.json AFTER.json`).

Usage: python benchmarks/dump_abbreviations.py OUT.json [--data ../shared/data]
       python benchmarks/dump_abbreviations.py --diff BEFORE.json AFTER.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

FILES = ["ncbi-disease/NCBItrainset_corpus.txt", "ncbi-disease/NCBIdevelopset_corpus.txt", "ncbi-disease/NCBItestset_corpus.txt",
         "bc5cdr/CDR_TrainingSet.PubTator.txt", "bc5cdr/CDR_DevelopmentSet.PubTator.txt"]


def dump(data: Path) -> dict:
    from spacy_sapbert.abbreviations import find_abbreviations
    from spacy_sapbert.evaluation.queries import Preprocessing, mentions_from_documents
    from spacy_sapbert.readers.corpora import read_pubtator

    out: dict = {"definitions": [], "queries": []}
    for name in FILES:
        documents = list(read_pubtator(data / name))
        for document in documents:
            out["definitions"] += [[name, document.id, a.short, a.long, a.short_start] for a in find_abbreviations(document.text)]
        mentions, _ = mentions_from_documents(documents, Preprocessing())
        out["queries"] += [[name, m.doc_id, m.text, m.queries, m.where.start] for m in mentions]
    return out


def diff(before: dict, after: dict) -> None:
    for kind, value in (("definitions", 3), ("queries", 3)):
        key = (lambda row: (row[0], row[1], row[2], row[4]))
        old, new = ({key(row): row[value] for row in rows[kind]} for rows in (before, after))
        changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        print(f"{kind}: {len(old)} -> {len(new)}, {len(changed)} changed")
        for k in changed:
            print(f"  {k[0]} {k[1]} {k[2]!r} at {k[3]}: {old.get(k)!r} -> {new.get(k)!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--diff", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.diff:
        diff(*(json.loads(path.read_text(encoding="utf8")) for path in args.diff))
    else:
        args.out.write_text(json.dumps(dump(args.data)), encoding="utf8")


if __name__ == "__main__":
    main()
