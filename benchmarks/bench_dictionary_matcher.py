"""The dictionary matcher beside spaCy's EntityRuler over the same names, at growing vocabulary sizes.

For each size, in a fresh subprocess per matcher (so resident memory is its own): build it over the first N
concepts of a vocabulary (the names `add_dictionary_matcher` keeps), save the pipeline, and load it again in
another fresh process; report build seconds, resident memory added by the build, the saved size, load seconds
and the resident memory after load. Then both link the same texts and the entities are compared.

Usage: python benchmarks/bench_dictionary_matcher.py VOCABULARY --sizes 60000 300000 [--texts CORPUS.PubTator]
       (VOCABULARY: any vocabulary file, e.g. an MRCONSO.RRF from benchmarks/make_synthetic_mrconso.py)
"""
from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_mb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def build(vocabulary: str, size: int, kind: str, out: str) -> dict:
    import spacy

    from spacy_sapbert.pipeline import add_dictionary_matcher, dictionary_patterns
    from spacy_sapbert.readers import read_vocabulary

    concepts = list(itertools.islice(read_vocabulary(vocabulary, "auto"), size))
    nlp = spacy.blank("en")
    before, started = rss_mb(), time.perf_counter()
    if kind == "EntityRuler":
        ruler = nlp.add_pipe("entity_ruler", name="dictionary_matcher", config={"phrase_matcher_attr": "LOWER"})
        ruler.add_patterns(dictionary_patterns(concepts, "ENTITY", stop_words=nlp.Defaults.stop_words))
        n = len(ruler.patterns)
    else:
        n = len(add_dictionary_matcher(nlp, concepts, label="ENTITY"))
    seconds = time.perf_counter() - started
    nlp.to_disk(out)
    return {"names": n, "build_s": seconds, "build_rss_mb": rss_mb() - before, "saved_mb": folder_mb(Path(out))}


def load(folder: str, texts_file: str) -> dict:
    import spacy

    before, started = rss_mb(), time.perf_counter()
    nlp = spacy.load(folder)
    seconds = time.perf_counter() - started
    texts = Path(texts_file).read_text(encoding="utf8").splitlines() if texts_file else []
    started = time.perf_counter()
    ents = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)]
    return {"load_s": seconds, "load_rss_mb": rss_mb() - before, "match_s": time.perf_counter() - started, "ents": ents}


def child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vocabulary", nargs="?")
    parser.add_argument("--sizes", type=int, nargs="+", default=[60000, 300000])
    parser.add_argument("--texts", help="a PubTator corpus whose documents both matchers run on")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        step, first, second, third = args.child
        result = build(first, int(second), *third.split("|")) if step == "build" else load(first, second)
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as tmp:
        texts = Path(tmp) / "texts.txt"
        if args.texts:
            from spacy_sapbert.readers.corpora import read_pubtator

            texts.write_text("\n".join(d.text for d in read_pubtator(args.texts)) + "\n", encoding="utf8")
        print(f"{args.vocabulary}; texts: {args.texts}")
        print("| concepts | matcher | names | build s | build RSS MB | saved MB | load s | RSS after load MB | match s | same entities |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for size in args.sizes:
            rows = {}
            for kind in ("EntityRuler", "sapbert_dictionary_matcher"):
                out = str(Path(tmp) / f"{kind}-{size}")
                rows[kind] = {**child("build", args.vocabulary, str(size), f"{kind}|{out}"), **child("load", out, str(texts) if args.texts else "", "-")}
            same = rows["EntityRuler"]["ents"] == rows["sapbert_dictionary_matcher"]["ents"]
            for kind, row in rows.items():
                print(f"| {size:,} | {kind} | {row['names']:,} | {row['build_s']:.1f} | {row['build_rss_mb']} | {row['saved_mb']:.1f} | "
                      f"{row['load_s']:.2f} | {row['load_rss_mb']} | {row['match_s']:.2f} | {'yes' if same else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
