"""Simulate 'concepts having the query as an exact name come first' on dumped ranked lists."""
import json, sys
from collections import defaultdict
sys.path.insert(0, "/work/main")
from spacy_sapbert.evaluation import Preprocessing, read_corpus, training_names, gold_rank, mention_rank, metrics_from_ranks
from spacy_sapbert.readers import read_vocabularies, vocabulary_specs, read_spell_check
from spacy_sapbert.readers.corpora import detect_corpus_format
from spacy_sapbert.kb import KnowledgeBase
D = "/work/shared/data"
ranked_path, protocol, corpus = sys.argv[1:4]; trains = sys.argv[4:]
prep = Preprocessing(spell_check=read_spell_check(D + "/medic/ncbi-spell-check.txt"))
norm = prep.normalizer
kb = KnowledgeBase(read_vocabularies(vocabulary_specs([D + "/medic/medic_06Jul2012.txt"], "auto", [], None)))
names = defaultdict(list)
for c in kb:
    for n in c.names:
        if c.id not in names[norm(n)]: names[norm(n)].append(c.id)
if protocol == "biosyn":
    for p in trains:
        ms, _, _ = read_corpus(p, detect_corpus_format(p), prep)
        for cid, t in training_names(ms, kb):
            c = kb.get(cid).id
            if c not in names[norm.query(t)]: names[norm.query(t)].append(c)
mentions, _, _ = read_corpus(corpus, "pubtator", prep)
R = json.load(open(ranked_path))
def exact_first(q, hits):
    exact = set(names.get(norm.query(q), []))
    return [h for h in hits if h[0] in exact] + [h for h in hits if h[0] not in exact]
base = [mention_rank([gold_rank(R[q], m.gold_set, kb) for q in m.queries]) for m in mentions]
rule = [mention_rank([gold_rank(exact_first(q, R[q]), m.gold_set, kb) for q in m.queries]) for m in mentions]
print(protocol, "acc@1 base", round(100 * metrics_from_ranks(base)["acc@1"], 1), "exact-first", round(100 * metrics_from_ranks(rule)["acc@1"], 1),
      "fixed", sum(1 for a, b in zip(base, rule) if a != 1 and b == 1), "broken", sum(1 for a, b in zip(base, rule) if a == 1 and b != 1))
