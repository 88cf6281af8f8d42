"""Inputs for a CPU dry run of the device scripts here: the corpora cut to their first documents, SAP pairs from the
first concepts of MEDIC (whole, with the spell-check list), and a tiny random BERT, under OUT.

Usage: python dry_run_data.py OUT [--data ../shared/data] [--documents 12] [--concepts 400]"""
import argparse
import itertools
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPORA = {
    "ncbi-disease": ["NCBItrainset_corpus.txt", "NCBIdevelopset_corpus.txt", "NCBItestset_corpus.txt"],
    "bc5cdr": ["CDR_TrainingSet.PubTator.txt", "CDR_DevelopmentSet.PubTator.txt"],
}


def first_documents(text: str, n: int) -> str:
    """The first `n` PubTator documents (blank-line separated) of `text`."""
    return "\n\n".join(block for block in itertools.islice((b for b in text.split("\n\n") if b.strip()), n)) + "\n\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--documents", type=int, default=12)
    parser.add_argument("--concepts", type=int, default=400)
    args = parser.parse_args()
    data = args.out / "data"
    for folder, names in CORPORA.items():
        (data / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            text = (args.data / folder / name).read_text(encoding="utf8")
            (data / folder / name).write_text(first_documents(text, args.documents), encoding="utf8")
    (data / "medic").mkdir(parents=True, exist_ok=True)
    for name in ("medic_06Jul2012.txt", "ncbi-spell-check.txt"):
        shutil.copy(args.data / "medic" / name, data / "medic" / name)

    from spacy_sapbert.readers import read_vocabulary

    concepts = [c for c in read_vocabulary(data / "medic" / "medic_06Jul2012.txt", "auto") if len(c.synonyms) >= 1][: args.concepts]
    pairs = [f"{c.id}||{c.name}||{synonym}\n" for c in concepts for synonym in c.synonyms[:3]]
    (args.out / "pairs.txt").write_text("".join(pairs), encoding="utf8")
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import make_tiny_bert

    make_tiny_bert(args.out / "tiny-bert", hidden_size=32)
    print(f"{args.out}: {args.documents} documents per corpus, {len(pairs)} SAP pairs, tiny BERT")


if __name__ == "__main__":
    main()
