"""Which NCBI-disease test gold mentions a bfloat16 re-ranker links first to another concept than float32 does, in
the MiniLM-chain linker of bench_reranker.py (no memory, rerank_k 10, the weight as saved): the count, the distinct
strings, and each string's first two candidates and scores under both.

Usage: python diff_probe.py RERANKER_FOLDER (from the repository root; the development machine's run folders)"""
import sys

import spacy

from spacy_sapbert.readers.corpora import documents_to_docs, read_pubtator
from spacy_sapbert.reranker import Reranker

nlp = spacy.load("/work/runs/s23/minilm/linker")
linker = nlp.get_pipe("sapbert_linker")
linker.rerank_k = 10
docs = documents_to_docs(nlp, read_pubtator("/work/shared/data/ncbi-disease/NCBItestset_corpus.txt"))


def first_two(backend: str):
    linker.reranker = Reranker(sys.argv[1], device="cpu", backend=backend)
    linker.vector_cache.clear()
    return [(ent.text, ent._.kb_ents[:2]) for doc in linker.pipe([d.copy() for d in docs], batch_size=128) for ent in doc.ents]


float32, bfloat16 = first_two("torch"), first_two("torch-bf16")
moved = {}
for (text, exact), (_, rounded) in zip(float32, bfloat16):
    if exact[:1] and rounded[:1] and exact[0][0] != rounded[0][0]:
        moved.setdefault(text, [0, exact, rounded])[0] += 1
print(f"{sys.argv[1]}: {sum(count for count, _, _ in moved.values())} of {len(float32)} mentions linked first to another concept, {len(moved)} distinct strings")
for text, (count, exact, rounded) in moved.items():
    show = lambda hits: ", ".join(f"{concept} {score:.6f}" for concept, score in hits)  # noqa: E731
    print(f"  {text!r} x{count}: float32 {show(exact)} | bfloat16 {show(rounded)}")
