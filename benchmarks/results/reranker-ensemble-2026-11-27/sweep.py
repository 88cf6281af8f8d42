"""The re-ranker's weight (the component's rerank_weight) on top of the mention memory, scored by run_benchmark
(through the component, as `evaluate --reranker R --rerank-weight W` scores it) for several weights in one process:
each (mention, candidate) pair's logit is computed once per re-ranker folder and reused for the other weights.
Usage: sweep.py CORPUS MODEL MEMORY_SETTINGS OUT.json RERANKER WEIGHTS CACHE_DIR"""
import json, sys
from pathlib import Path
import numpy
from spacy_sapbert.reranker import Reranker
from spacy_sapbert.cli import _read_memory_settings
from spacy_sapbert.evaluation import Preprocessing, run_benchmark
from spacy_sapbert.readers import read_spell_check, vocabulary_specs

D = "/work/shared/data"
CORPORA = {
    "dev": (f"{D}/ncbi-disease/NCBIdevelopset_corpus.txt", [f"{D}/ncbi-disease/NCBItrainset_corpus.txt"], None),
    "ncbi-test": (f"{D}/ncbi-disease/NCBItestset_corpus.txt",
                  [f"{D}/ncbi-disease/NCBItrainset_corpus.txt", f"{D}/ncbi-disease/NCBIdevelopset_corpus.txt"], None),
    "bc5cdr": (f"{D}/bc5cdr/CDR_DevelopmentSet.PubTator.txt", [f"{D}/bc5cdr/CDR_TrainingSet.PubTator.txt"], ["Disease"]),
}
corpus_name, model, settings_file, out, reranker = sys.argv[1:6]
weights = [float(w) for w in sys.argv[6].split(",")]
cache_dir = sys.argv[7]

LOGITS = {}  # (re-ranker folder, mention side, candidate text) -> logit
original = Reranker._score


def cached(self, pairs):
    missing = [p for p in dict.fromkeys(pairs) if (self.name,) + p not in LOGITS]
    LOGITS.update({(self.name,) + p: v for p, v in zip(missing, original(self, missing).tolist())})
    return numpy.asarray([LOGITS[(self.name,) + p] for p in pairs], dtype="float32")


Reranker._score = cached
corpus, train, labels = CORPORA[corpus_name]
prep = Preprocessing(remove_punctuation=True, abbreviations=True, spell_check=read_spell_check(Path(f"{D}/medic/ncbi-spell-check.txt")))
vocab = vocabulary_specs([Path(f"{D}/medic/medic_06Jul2012.txt")], "auto", [], None)
rows = []
for w in weights:
    report = run_benchmark(
        Path(corpus), vocab, model=model, pooling="mean", labels=labels, train=[Path(t) for t in train],
        prep=prep, cache_dir=Path(cache_dir), memory=[Path(t) for t in train],
        memory_settings=_read_memory_settings(Path(settings_file), ["strict", "biosyn"]), reranker=reranker, rerank_weight=w,
    )
    res = report["results"]
    [with_rr] = [n for n in res if n.endswith("+ memory + re-ranker")]
    [memory] = [n for n in res if n.endswith("+ memory")]
    row = {"corpus": corpus_name, "reranker": reranker, "rerank_weight": w,
           **{f"memory + re-ranker {p}": round(100 * res[with_rr][p]["acc@1"], 1) for p in ("strict", "biosyn")},
           **{f"memory {p}": round(100 * res[memory][p]["acc@1"], 1) for p in ("strict", "biosyn")}}
    print(json.dumps(row), flush=True)
    rows.append(row)
Path(out).write_text(json.dumps(rows, indent=1) + "\n")
