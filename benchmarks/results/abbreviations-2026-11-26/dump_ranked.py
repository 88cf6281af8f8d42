"""Dump every dev query's top-10 (id, score) for one model + memory under one protocol (ensemble experiment)."""
import json, sys
sys.path.insert(0, "/work/main")
from spacy_sapbert.encoder import Encoder
from spacy_sapbert.evaluation import Preprocessing, read_corpus, training_names, LinkerRetriever, build_encoder_index
from spacy_sapbert.readers import read_vocabularies, vocabulary_specs, read_spell_check
from spacy_sapbert.readers.corpora import detect_corpus_format
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.memory import MemorySettings
D = "/work/shared/data"
model, backend, cache, settings_report, protocol, corpus, out = sys.argv[1:8]
trains = sys.argv[8].split(",")
memories = sys.argv[9].split(",")
prep = Preprocessing(spell_check=read_spell_check(D + "/medic/ncbi-spell-check.txt"))
norm = prep.normalizer
kb = KnowledgeBase(read_vocabularies(vocabulary_specs([D + "/medic/medic_06Jul2012.txt"], "auto", [], None)))
concepts = list(kb)
mentions, _, _ = read_corpus(corpus, "pubtator", prep, ["Disease"] if "CDR" in corpus else None)
def names_of(paths):
    out = []
    for p in paths:
        ms, _, _ = read_corpus(p, detect_corpus_format(p), prep, ["Disease"] if "CDR" in p else None)
        out += training_names(ms, kb)
    return out
extra = [(cid, norm.query(t)) for cid, t in names_of(trains)]
memory = [(t, cid) for cid, t in names_of(memories)]
settings = MemorySettings(**json.load(open(settings_report))["memory"]["settings_by_protocol"][protocol])
enc = Encoder(model, pooling="mean", max_length=25, batch_size=128, device="cpu", backend=backend)
index = build_encoder_index(enc, concepts, cache, None, norm)
r = LinkerRetriever("x", enc, index, memory, settings)
if protocol == "biosyn":
    r.add_names(extra)
queries = sorted({q for m in mentions for q in m.queries})
ranked = r.rank(queries, 10)
json.dump({q: [[c, float(s)] for c, s in h] for q, h in zip(queries, ranked)}, open(out, "w"))
print(out, len(queries))
