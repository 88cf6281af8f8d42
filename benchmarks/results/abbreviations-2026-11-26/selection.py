"""Which way of picking the memory settings from the dev grid generalizes? Split-half on NCBI-disease dev only:
pick on one half of the documents, score the pick on the other half, 50 random splits."""
import itertools, json, random, sys
import numpy
sys.path.insert(0, "/work/main")
from spacy_sapbert.encoder import Encoder
from spacy_sapbert.evaluation import (Preprocessing, read_corpus, training_names, LinkerRetriever, build_encoder_index,
                                      gold_rank, mention_rank)
from spacy_sapbert.evaluation.memory_tuning import MEMORY_GRID
from spacy_sapbert.readers import read_vocabularies, vocabulary_specs, read_spell_check
from spacy_sapbert.readers.corpora import detect_corpus_format
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.memory import MemorySettings
D = "/work/shared/data"; N = D + "/ncbi-disease/"
model, backend, cache = sys.argv[1:4]
prep = Preprocessing(spell_check=read_spell_check(D + "/medic/ncbi-spell-check.txt"))
norm = prep.normalizer
kb = KnowledgeBase(read_vocabularies(vocabulary_specs([D + "/medic/medic_06Jul2012.txt"], "auto", [], None)))
mentions, _, _ = read_corpus(N + "NCBIdevelopset_corpus.txt", "pubtator", prep)
train, _, _ = read_corpus(N + "NCBItrainset_corpus.txt", "pubtator", prep)
extra = [(cid, norm.query(t)) for cid, t in training_names(train, kb)]
memory = [(t, cid) for cid, t in training_names(train, kb)]
enc = Encoder(model, pooling="mean", max_length=25, batch_size=128, device="cpu", backend=backend)
r = LinkerRetriever("x", enc, build_encoder_index(enc, list(kb), cache, None, norm), memory, MemorySettings())
keys = list(MEMORY_GRID); values = list(itertools.product(*(MEMORY_GRID[k] for k in keys)))
docs = sorted({m.doc_id for m in mentions}); doc_of = numpy.array([docs.index(m.doc_id) for m in mentions])
out = {}
for protocol in ("strict", "biosyn"):
    if protocol == "biosyn":
        r.add_names(extra)
    linker = r.linker
    normalized = {q: linker.normalizer.query(q) for m in mentions for q in m.queries}
    distinct = sorted(set(normalized.values()))
    concepts, votes = linker.retrieve(distinct, max(MEMORY_GRID["memory_k"]))
    hit1 = numpy.zeros((len(values), len(mentions)), bool); rr = numpy.zeros((len(values), len(mentions)))
    for i, v in enumerate(values):
        s = MemorySettings(**dict(zip(keys, v)))
        ranked = {q: s.mix(h, near)[:10] for q, h, near in zip(distinct, concepts, votes)}
        ranks = [mention_rank([gold_rank(ranked[normalized[q]], m.gold_set, kb) for q in m.queries]) for m in mentions]
        hit1[i] = [x == 1 for x in ranks]; rr[i] = [1.0 / x if x else 0.0 for x in ranks]
    # grid neighbours: one parameter one step away
    position = [tuple(MEMORY_GRID[k].index(x) for k, x in zip(keys, v)) for v in values]
    where = {p: i for i, p in enumerate(position)}
    neighbours = []
    for p in position:
        near = [where[p]]
        for d in range(len(keys)):
            for step in (-1, 1):
                q = list(p); q[d] += step
                if tuple(q) in where: near.append(where[tuple(q)])
        neighbours.append(near)
    def pick(mask, method):
        acc = hit1[:, mask].mean(1); mrr = rr[:, mask].mean(1)
        if method == "acc@1":
            score = acc + 1e-6 * mrr
        elif method == "mrr":
            score = mrr
        else:  # acc@1 averaged over the row and its grid neighbours
            score = numpy.array([acc[n].mean() for n in neighbours]) + 1e-6 * mrr
        return int(numpy.argmax(score))  # first max: grid order, as tune_memory
    rng = random.Random(0); results = {m: [] for m in ("acc@1", "mrr", "neighbourhood")}
    for split in range(50):
        half = set(rng.sample(range(len(docs)), len(docs) // 2))
        a = numpy.array([d in half for d in doc_of]); b = ~a
        for method in results:
            for fit, held in ((a, b), (b, a)):
                results[method].append(hit1[pick(fit, method), held].mean())
    full = {m: dict(zip(keys, values[pick(numpy.ones(len(mentions), bool), m)])) for m in results}
    out[protocol] = {m: {"held_out_acc1_mean": float(numpy.mean(v)), "std": float(numpy.std(v)), "choice_on_all_dev": full[m]} for m, v in results.items()}
    out[protocol]["oracle_held_out_acc1_mean"] = float(numpy.mean([hit1[:, ~numpy.array([d in set(random.Random(0).sample(range(len(docs)), len(docs)//2)) for d in doc_of])].mean(1).max()]))
    print(protocol, {m: round(100 * x["held_out_acc1_mean"], 2) for m, x in out[protocol].items() if isinstance(x, dict)}, flush=True)
json.dump(out, open(sys.argv[4], "w"), indent=1)
