"""Classify the dev misses of one system/protocol: exact name matches, train label conflicts."""
import json, sys
from collections import Counter, defaultdict
sys.path.insert(0, "/work/main")
from spacy_sapbert.evaluation import Preprocessing, read_corpus, training_names
from spacy_sapbert.readers import read_vocabularies, vocabulary_specs, read_spell_check
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.readers.corpora import detect_corpus_format
D = "/work/shared/data"
errors, system_suffix, protocol, trains = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
prep = Preprocessing(spell_check=read_spell_check(D + "/medic/ncbi-spell-check.txt"))
norm = prep.normalizer
kb = KnowledgeBase(read_vocabularies(vocabulary_specs([D + "/medic/medic_06Jul2012.txt"], "auto", [], None)))
names = defaultdict(set)  # normalized name -> primary ids
for c in kb:
    for n in c.names:
        names[norm(n)].add(c.id)
train_labels = defaultdict(Counter)
for path in trains:
    ms, _, _ = read_corpus(path, detect_corpus_format(path), prep)
    for cid, text in training_names(ms, kb):
        c = kb.get(cid)
        key = norm.query(text)
        train_labels[key][c.id if c else cid] += 1
        if protocol == "biosyn":
            names[key].add(c.id if c else cid)
rs = [json.loads(l) for l in open(errors)]
rs = [r for r in rs if r["system"].endswith(system_suffix) and r["protocol"] == protocol]
cats = Counter()
for r in rs:
    gold = {kb.get(g).id if kb.get(g) else g for g in r["gold"].replace("|", "+").split("+")}
    qs = [norm.query(q["query"]) for q in r["queries"]]
    top = [kb.get(q["candidates"][0][0]).id if q["candidates"] else None for q in r["queries"]]
    if len(qs) > 1:
        cat = "composite"
    elif r["rank"] is None:
        cat = "gold not in top 10"
    elif train_labels.get(qs[0]) and top[0] in train_labels[qs[0]]:
        cat = "train labels this text with the predicted id" + (" (and gold too)" if gold & set(train_labels[qs[0]]) else "")
    elif gold & names.get(qs[0], set()):
        cat = "query is a name of gold" + (" and of predicted" if top[0] in names[qs[0]] else " only")
    elif top[0] in names.get(qs[0], set()):
        cat = "query is a name of predicted only"
    else:
        cat = "gold ranked 2-10, no exact name"
    cats[cat] += 1
print(len(rs), "misses")
for c, n in cats.most_common():
    print(f"{n:4d}  {c}")
if len(sys.argv) > 0:
    for r in rs:
        gold = {kb.get(g).id if kb.get(g) else g for g in r["gold"].replace("|", "+").split("+")}
        qs = [norm.query(q["query"]) for q in r["queries"]]
        top = kb.get(r["queries"][0]["candidates"][0][0]).id
        if len(qs) == 1 and r["rank"] and not (train_labels.get(qs[0]) and top in train_labels[qs[0]]) and gold & names.get(qs[0], set()) and top not in names[qs[0]]:
            print("EXACT-GOLD", repr(qs[0]), r["gold"], r["rank"], [c[:3] for c in r["queries"][0]["candidates"][:3]], dict(train_labels.get(qs[0], {})))
