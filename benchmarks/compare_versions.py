"""Linking speed of whichever spacy_sapbert PYTHONPATH picks, for comparing two versions under the same conditions.

MEDIC's first 3,000 concepts and the NCBI-disease test documents with their gold mentions: index build
names/s, nlp.pipe cold mentions/s, and the naive one-mention loop (vector cache off, as before it
existed). Only config keys that every 0.2 version has. Run it once per checkout, alternating:
    for src in OLD NEW; do (cd /tmp && PYTHONPATH=$src python NEW/benchmarks/compare_versions.py); done
Data: ../shared/data beside the project (DATA=DIR to change).
"""
import os
import time
from pathlib import Path

import spacy
import torch

DATA = Path(os.environ.get("DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    import spacy_sapbert
    from spacy_sapbert.readers import read_vocabulary
    from spacy_sapbert.readers.corpora import documents_to_docs, read_pubtator

    torch.set_num_threads(2)
    medic = list(read_vocabulary(DATA / "medic" / "medic_06Jul2012.txt", "medic"))[:3000]
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": "all-MiniLM-L6-v2", "pooling": "mean", "device": "cpu"})
    linker.initialize(vocabulary=medic[:10])
    if hasattr(linker, "vector_cache"):  # versions with the cache: off, as in those without
        from spacy_sapbert.vector_cache import VectorCache

        linker.vector_cache = VectorCache(0)
    build = timed(lambda: linker.build_index(medic))
    documents = list(read_pubtator(DATA / "ncbi-disease" / "NCBItestset_corpus.txt"))
    mentions = sum(len(doc.ents) for doc in documents_to_docs(nlp, documents))
    cold = timed(lambda: list(nlp.pipe(documents_to_docs(nlp, documents), batch_size=128)))

    def naive() -> None:
        for doc in documents_to_docs(nlp, documents):
            for ent in doc.ents:
                linker.search_texts([ent.text])

    names = len(linker.index.names)
    print(f"{spacy_sapbert.__file__}: names {names} build {names / build:.0f} names/s, "
          f"pipe cold {mentions / cold:.0f} mentions/s, naive {mentions / timed(naive):.1f} mentions/s")


if __name__ == "__main__":
    main()
