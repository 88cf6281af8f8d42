"""Exact-name ties, counted without an encoder: a single-part query equal (normalized) to a name of two or more
concepts ranks them all first with the same score, whatever the encoder. Per corpus and protocol:
  tied                queries whose name several concepts share
  first=gold          the gold is first in vocabulary row order (the index's order before TIE_ORDER)
  rule-first=gold     the gold is first when the training mentions' names come first (biosyn), then canonical names
  freq-first=gold     the same with the most often given first: TIE_ORDER (commit e69f696)
  preferred-unique    exactly one of them has it as its canonical name; preferred=gold: that one is the gold
  trained-unique      exactly one of them has it from a training mention; trained=gold: that one is the gold
  gold absent         the gold is not among them
and a few queries where row order was right and TIE_ORDER is not.

    python ties.py ncbi-dev ncbi-test bc5-dev > ties.txt
"""
import sys
from collections import Counter
from pathlib import Path
from spacy_sapbert.evaluation.queries import Preprocessing, read_corpus
from spacy_sapbert.evaluation.dictionaries import training_names, with_extra_names
from spacy_sapbert.readers import read_spell_check, read_vocabulary
from spacy_sapbert.kb import KnowledgeBase

D = Path("/work/shared/data")
prep = Preprocessing(spell_check=read_spell_check(D / "medic/ncbi-spell-check.txt"))
norm = prep.normalizer
concepts = list(read_vocabulary(D / "medic/medic_06Jul2012.txt", "medic"))
kb = KnowledgeBase(concepts)
LAB = ["Disease", "SpecificDisease", "DiseaseClass", "Modifier", "CompositeMention"]
def corpus(p):
    return read_corpus(D / p, "pubtator", prep, LAB)[0]
sets = {"ncbi-dev": ("ncbi-disease/NCBIdevelopset_corpus.txt", ["ncbi-disease/NCBItrainset_corpus.txt"]),
        "ncbi-test": ("ncbi-disease/NCBItestset_corpus.txt", ["ncbi-disease/NCBItrainset_corpus.txt", "ncbi-disease/NCBIdevelopset_corpus.txt"]),
        "bc5-dev": ("bc5cdr/CDR_DevelopmentSet.PubTator.txt", ["bc5cdr/CDR_TrainingSet.PubTator.txt"])}
for name in sys.argv[1:]:
    evalp, trainp = sets[name]
    mentions = corpus(evalp)
    train = [m for p in trainp for m in corpus(p)]
    for protocol in ("strict", "biosyn"):
        cs = concepts if protocol == "strict" else with_extra_names(concepts, training_names(train, kb, new_concepts=True))
        trained_names = {(i, norm(n)) for i, n in training_names(train, kb, new_concepts=True)} if protocol == "biosyn" else set()
        given = Counter((i, norm(n)) for i, n in training_names(train, kb, new_concepts=True)) if protocol == "biosyn" else Counter()
        by_name = {}
        for c in cs:
            for j, n in enumerate(c.names):
                nn = norm(n)
                if not nn: continue
                lst = by_name.setdefault(nn, [])
                if all(x[0] != c.id for x in lst):
                    lst.append((c.id, j == 0))
        stats = Counter()
        for m in mentions:
            if len(m.queries) != 1: continue
            q = norm.query(m.queries[0])
            grp = by_name.get(q, [])
            if len(grp) < 2: continue
            gold = m.gold_set
            ids = [i for i, _ in grp]
            stats["tied"] += 1
            if not gold & set(ids): stats["gold absent"] += 1; continue
            stats["first=gold"] += ids[0] in gold
            tr0 = [i for i in ids if (i, q) in trained_names]
            rest = [x for x in grp if x[0] not in tr0]
            ruled = tr0 + [i for i, p in rest if p] + [i for i, p in rest if not p]
            stats["rule-first=gold"] += ruled[0] in gold
            g = sorted([i for i in ids if given[(i, q)]], key=lambda i: -given[(i, q)])
            rest2 = [x for x in grp if x[0] not in g]
            freq = g + [i for i, p in rest2 if p] + [i for i, p in rest2 if not p]
            stats["freq-first=gold"] += freq[0] in gold
            if ids[0] in gold and ruled[0] not in gold and stats["shown"] < 12:
                stats["shown"] += 1; print("   ", q, m.gold, grp)
            pref = [i for i, p in grp if p]
            stats["preferred-unique"] += len(pref) == 1
            stats["preferred=gold"] += len(pref) == 1 and pref[0] in gold
            tr = [i for i in ids if (i, q) in trained_names]
            stats["trained-unique"] += len(tr) == 1
            stats["trained=gold"] += len(tr) == 1 and tr[0] in gold
        print(name, protocol, len(mentions), dict(stats))
