import json, sys
sys.path.insert(0, "/work/main")
from spacy_sapbert.evaluation import Preprocessing, read_corpus, gold_rank, mention_rank, metrics_from_ranks
from spacy_sapbert.readers import read_vocabularies, vocabulary_specs, read_spell_check
from spacy_sapbert.kb import KnowledgeBase
D = "/work/shared/data"
a, b, corpus = sys.argv[1:4]
prep = Preprocessing(spell_check=read_spell_check(D + "/medic/ncbi-spell-check.txt"))
kb = KnowledgeBase(read_vocabularies(vocabulary_specs([D + "/medic/medic_06Jul2012.txt"], "auto", [], None)))
mentions, _, _ = read_corpus(corpus, "pubtator", prep, ["Disease"] if "CDR" in corpus else None)
A, B = json.load(open(a)), json.load(open(b))
def fused(q, w, mode):
    sa, sb = dict(map(tuple, A[q])), dict(map(tuple, B[q]))
    if mode == "rrf":
        ra = {c: i for i, (c, _) in enumerate(A[q])}; rb = {c: i for i, (c, _) in enumerate(B[q])}
        s = {c: w / (60 + ra.get(c, 10)) + (1 - w) / (60 + rb.get(c, 10)) for c in dict.fromkeys(list(sa) + list(sb))}
    else:
        s = {c: w * sa.get(c, 0.0) + (1 - w) * sb.get(c, 0.0) for c in dict.fromkeys(list(sa) + list(sb))}
    return sorted(s.items(), key=lambda x: -x[1])
for mode in ["score", "rrf"]:
    for w in [0, .2, .3, .4, .5, .6, .7, .8, 1]:
        ranks = [mention_rank([gold_rank(fused(q, w, mode), m.gold_set, kb) for q in m.queries]) for m in mentions]
        mm = metrics_from_ranks(ranks)
        print(mode, w, round(100 * mm["acc@1"], 1), round(100 * mm["acc@5"], 1))
