"""The cross-encoder re-ranker: candidate texts, the group loss, training on a linker's candidates, and the linker with it."""
import json
import math
import shutil

import numpy
import pytest
import spacy
import torch

from spacy_sapbert.errors import IndexFormatError, SapbertError
from spacy_sapbert.kb import Concept
from spacy_sapbert.context import MentionInContext
from spacy_sapbert.reranker import Reranker, candidate_text, context_around, mention_side, rerank_hits, write_meta
from spacy_sapbert.training.reranker import RerankerConfig, concept_score, epoch_mention_sides, group_loss, mine_groups, train_reranker

CONCEPTS = [
    Concept("D1", "Heart failure", ["cardiac failure", "heart decompensation", "HF"]),
    Concept("D2", "Liver cancer", ["hepatic cancer", "hepatoma", "liver carcinoma"]),
    Concept("D3", "Kidney disease", ["renal disease", "nephropathy"], alt_ids=["D3-old"]),
    Concept("D4", "Vitamin deficiency", ["hypovitaminosis"]),
]


def test_candidate_text_puts_the_synonyms_most_like_the_mention_after_the_canonical_name():
    # "carcinoma" shares 8 trigrams with "liver carcinoma", 2 with "hepatoma", 1 with "hepatic cancer"
    assert candidate_text("carcinoma", CONCEPTS[1], str.lower, max_names=3) == "liver cancer ; liver carcinoma ; hepatoma"
    # a tie keeps the vocabulary's order
    assert candidate_text("hepatic carcinoma", CONCEPTS[1], str.lower, max_names=3) == "liver cancer ; hepatic cancer ; liver carcinoma"
    assert candidate_text("x", CONCEPTS[3], str.lower, max_names=4) == "vitamin deficiency ; hypovitaminosis"
    assert candidate_text("x", CONCEPTS[0], str.lower, max_names=1) == "heart failure"


def test_group_loss_is_the_cross_entropy_of_the_first_candidate_of_each_group():
    logits = torch.tensor([2.0, 0.0, 1.0, -1.0, 3.0])  # groups of 3 and 2, gold first
    expected = ((math.log(math.exp(2) + 1 + math.e) - 2) + (math.log(math.exp(-1) + math.exp(3)) + 1)) / 2
    assert float(group_loss(logits, [3, 2])) == pytest.approx(expected, rel=1e-6)


def concept_of(concept_id):
    return {i: c for c in CONCEPTS for i in c.all_ids}.get(concept_id)


@pytest.fixture
def cross_encoder(tiny_bert):
    return Reranker(tiny_bert, device="cpu", max_length=32)


def test_rerank_hits_reorders_the_first_k_by_the_cross_encoder(cross_encoder):
    hits = [[("D1", 0.9), ("D2", 0.8), ("D3", 0.7), ("D4", 0.6)]]
    [reranked] = rerank_hits(cross_encoder, ["hepatoma"], hits, concept_of, str.lower, k=3)
    assert {cid for cid, _ in reranked} == {"D1", "D2", "D3"}  # D4 was beyond k
    texts = [candidate_text("hepatoma", concept_of(cid), str.lower, cross_encoder.max_names) for cid, _ in reranked]
    expected = 1 / (1 + torch.exp(-torch.tensor(cross_encoder.score([("hepatoma", t) for t in texts]))))
    assert [score for _, score in reranked] == pytest.approx(expected.tolist(), abs=1e-6)
    assert [score for _, score in reranked] == sorted((score for _, score in reranked), reverse=True)


def test_a_mention_longer_than_max_length_is_scored_not_an_error(cross_encoder):
    """Pairs are cut in the candidate text only, unless a query leaves it no room (BC5CDR has chemical names of 70
    word pieces): then both sides are cut, that pair's only. One long query cut every pair of its batch on both
    sides, so a pair's score depended on the mentions scored beside it."""
    from spacy_sapbert.reranker import pair_truncations

    tokenizer, max_length = cross_encoder.tokenizer, cross_encoder.max_length
    long_mention = " ".join(["hepatoma"] * max_length)
    assert len(tokenizer(long_mention, add_special_tokens=False)["input_ids"]) > max_length
    assert pair_truncations(tokenizer, ["hepatoma", "renal disease"], max_length) == ["only_second"] * 2
    assert pair_truncations(tokenizer, ["hepatoma", long_mention], max_length) == ["only_second", "longest_first"]
    text = candidate_text("hepatoma", CONCEPTS[1], str.lower, cross_encoder.max_names)
    long_text = " ".join([text] * max_length)  # a candidate text that must be cut: where the cut falls matters
    middle = " ".join(["liver"] * (max_length // 2))  # a query that leaves it some room
    logits = cross_encoder.score([(long_mention, text), ("hepatoma", text), (middle, long_text)])
    assert len(logits) == 3 and all(math.isfinite(float(x)) for x in logits)
    alone = cross_encoder.score([("hepatoma", text), (middle, long_text)])
    assert alone.tolist() == pytest.approx(logits[1:].tolist(), rel=1e-5, abs=0)  # as without the long mention beside them


def test_with_bi_temperature_the_linkers_score_joins_the_logit(cross_encoder):
    hits = [[("D1", 0.9), ("D2", 0.8), ("D3", 0.7)]]
    texts = [candidate_text("hepatoma", concept_of(cid), str.lower, cross_encoder.max_names) for cid, _ in hits[0]]
    logits = cross_encoder.score([("hepatoma", t) for t in texts])
    cross_encoder.bi_temperature = 0.5
    [reranked] = rerank_hits(cross_encoder, ["hepatoma"], hits, concept_of, str.lower, k=3)
    expected = {cid: 1 / (1 + math.exp(-(float(logit) + bi / 0.5))) for (cid, bi), logit in zip(hits[0], logits)}
    assert dict(reranked) == pytest.approx(expected, abs=1e-6)
    cross_encoder.bi_temperature = 1e-4  # the linker's score dominates: its order stays
    assert [cid for cid, _ in rerank_hits(cross_encoder, ["hepatoma"], hits, concept_of, str.lower, k=3)[0]] == ["D1", "D2", "D3"]


def test_rerank_weight_scales_the_logit_before_the_linkers_score_joins_it(tiny_bert):
    torch.manual_seed(0)  # a head whose order differs from the linker's
    cross_encoder = Reranker(tiny_bert, device="cpu", max_length=32)
    hits = [[("D1", 0.9), ("D2", 0.8), ("D3", 0.7), ("D4", 0.6)]]
    texts = [candidate_text("hepatoma", concept_of(cid), str.lower, cross_encoder.max_names) for cid, _ in hits[0]]
    logits = cross_encoder.score([("hepatoma", t) for t in texts])
    cross_encoder.bi_temperature = 0.5
    [weighted] = rerank_hits(cross_encoder, ["hepatoma"], hits, concept_of, str.lower, k=4, weight=0.3)
    expected = {cid: 1 / (1 + math.exp(-(0.3 * float(logit) + bi / 0.5))) for (cid, bi), logit in zip(hits[0], logits)}
    assert dict(weighted) == pytest.approx(expected, abs=1e-6)
    by_logit = [hits[0][i][0] for i in numpy.argsort(-logits)]
    [alone] = rerank_hits(cross_encoder, ["hepatoma"], hits, concept_of, str.lower, k=4, weight=1e6)
    assert [cid for cid, _ in alone] == by_logit  # ordered by the logit even where every sigmoid rounds to 1.0
    assert len({score for _, score in alone}) < 4 and by_logit != ["D1", "D2", "D3", "D4"]  # two of one sign: 0.0 or 1.0
    assert [cid for cid, _ in rerank_hits(cross_encoder, ["hepatoma"], hits, concept_of, str.lower, k=4, weight=1e-6)[0]] == ["D1", "D2", "D3", "D4"]


def pubtator(tmp_path):
    corpus = tmp_path / "train.txt"
    lines = []
    for pmid, (text, gold) in enumerate([("hepatoma", "D2"), ("renal disease", "D3-old"), ("cardiac failure", "D1"),
                                         ("hypovitaminosis", "D4"), ("liver carcinoma", "D2"), ("nephropathy", "D3"),
                                         ("heart decompensation", "D1|D9"), ("hepatoma", "D2+D1"), ("fever", "D77")]):
        lines += [f"{pmid}|t|{text}", f"{pmid}|a|", f"{pmid}\t0\t{len(text)}\t{text}\tDisease\t{gold}", ""]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf8")
    return corpus


@pytest.fixture
def linker_pipeline(tmp_path, tiny_bert):
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 4}).initialize(vocabulary=CONCEPTS)
    nlp.to_disk(tmp_path / "pipe")
    return tmp_path / "pipe"


def test_mine_groups_puts_the_gold_first_and_counts_what_it_left_out(linker_pipeline, tmp_path):
    from spacy_sapbert.readers.corpora import read_pubtator

    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    mentions = [(m.text, m.gold, None, None) for d in read_pubtator(pubtator(tmp_path)) for m in d.mentions]
    groups, counts = mine_groups(linker, mentions, candidates=3, max_names=2)
    assert counts["kept"] + counts["alternative"] == 7 and counts["alternative"] == 1
    assert counts["combination"] == 1 and counts["unknown"] == 1 and counts["groups"] == 7
    by_query = {g.query: g for g in groups}
    assert by_query["renal disease"].texts[0] == "kidney disease ; renal disease"  # the alternative id's concept, first
    assert all(len(g.texts) == 3 and len(set(g.texts)) == 3 and len(g.bi_scores) == 3 for g in groups)
    for group in groups:  # the linker's own scores; the gold one's computed (best name) when the search missed it
        [hits] = linker.ranked([group.query])
        assert group.concept_ids[1:] == [cid for cid, _ in hits if cid != group.concept_ids[0]][:2]
        scores = dict(hits)
        assert group.bi_scores[1:] == [scores[cid] for cid in group.concept_ids[1:]]
        assert group.bi_scores[0] == pytest.approx(scores.get(group.concept_ids[0], group.bi_scores[0]), abs=1e-6)
        assert -1.0 <= group.bi_scores[0] <= 1.0 + 1e-6
    assert concept_score(linker, "hepatoma", "D2") == pytest.approx(1.0, abs=1e-5)  # one of its names
    assert concept_score(linker, "hepatoma", "D4") < concept_score(linker, "hepatoma", "D2")

    # the query is encoded as the pipeline encodes a mention: alone under onnx-int8 (`mentions=True`), whose vectors
    # depend on the batch; batched with the names, its score was off the search's scale
    calls = []
    encode = linker.encoder.encode

    def recorded(texts, *args, mentions=False, **kwargs):
        calls.append((list(texts), mentions))
        return encode(texts, *args, mentions=mentions, **kwargs)

    linker.encoder.encode = recorded
    concept_score(linker, "hepatoma", "D4")
    assert calls[0] == (["hepatoma"], True) and "hepatoma" not in calls[1][0] and not calls[1][1]


def test_mined_candidates_are_those_the_pipeline_hands_its_reranker(tiny_bert):
    """Mining ignored the linker's types and threshold, trained the other id of an "A|B" gold as wrong, and scored a
    missed gold by cosine beside the memory's mixed probabilities (found by an audit)."""
    from spacy_sapbert.pipeline import build_pipeline

    typed = [Concept(c.id, c.name, c.synonyms, alt_ids=c.alt_ids, types=["T191" if c.id == "D2" else "T047"]) for c in CONCEPTS]
    typed.append(Concept("D5", "Liver tumour", ["hepatic tumour"], types=["T191"]))
    nlp = build_pipeline(typed, tiny_bert, label=None, linker_config={"device": "cpu", "k": 4, "types_by_label": {"Disease": ["T047"]}})
    linker = nlp.get_pipe("sapbert_linker")
    [(_, disease), ] = [(g.query, g) for g in mine_groups(linker, [("hepatoma", "D1", None, "Disease")], 4, 2)[0]]
    assert disease.concept_ids[0] == "D1" and set(disease.concept_ids[1:]) <= {"D3", "D4"}  # no T191 concept: not offered
    [(_, either)] = [(g.query, g) for g in mine_groups(linker, [("hepatoma", "D2|D5", None, None)], 4, 2)[0]]
    assert either.concept_ids[0] == "D2" and "D5" not in either.concept_ids  # the other right id is no negative
    linker.k = 2
    linker.add_mentions([("hepatic tumour", "D5"), ("cardiac failure", "D1")])  # the memory is active
    groups, counts = mine_groups(linker, [("hypovitaminosis", "D2", None, None)], 4, 2)
    assert counts["gold_missed"] == 1
    assert 0.0 <= groups[0].bi_scores[0] <= 1.0 and sum(groups[0].bi_scores) <= 1.0 + 1e-6  # one scale: a mixture's shares


QUERIES = ["hepatoma", "renal disease", "cardiac failure", "hypovitaminosis", "liver carcinoma", "nephropathy", "heart decompensation"]
GOLDS = ["D2", "D3", "D1", "D4", "D2", "D3", "D1"]


def gold_first(linker) -> int:
    return sum(hits[0][0] == gold for hits, gold in zip(linker.search_texts(QUERIES), GOLDS))


def test_train_reranker_learns_the_training_mentions_then_joins_the_pipeline(linker_pipeline, tmp_path, tiny_bert):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    torch.manual_seed(0)
    Reranker(tiny_bert, device="cpu").save(tmp_path / "untrained")  # the same model with a new, untrained head
    linker.set_reranker(tmp_path / "untrained")
    untrained = gold_first(linker)
    config = RerankerConfig(model=tiny_bert, pipeline=str(linker_pipeline), output=str(tmp_path / "run"), corpora=[str(pubtator(tmp_path))],
                            candidates=4, max_length=32, batch_size=7, lr=2e-3, epochs=100, log_every=5, device="cpu", progress=False,
                            bi_temperature=0)  # the cross-encoder alone: what it learns shows
    model_dir = train_reranker(config)
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert log[0]["groups"] == 7 and log[0]["combination"] == 1 and log[0]["unknown"] == 1
    losses = [entry["loss"] for entry in log if "loss" in entry]
    assert sum(losses[-5:]) / 5 < 0.6 * losses[0]  # from ln(4): the gold candidate's share grew
    meta = json.loads((model_dir / "reranker.json").read_text())
    assert meta["trained_on"]["encoder_fingerprint"] == linker.encoder.fingerprint and meta["max_length"] == 32
    assert (meta["trained_on"]["pooling"], meta["trained_on"]["max_length"]) == (linker.encoder.pooling, linker.encoder.max_length)
    assert (tmp_path / "run" / "loss.png").exists() and (model_dir / "README.md").exists()

    result = CliRunner().invoke(app, ["add-reranker", str(linker_pipeline), str(model_dir), "--output", str(tmp_path / "with"), "--rerank-k", "4"])
    assert result.exit_code == 0, result.output
    reranking = spacy.load(tmp_path / "with").get_pipe("sapbert_linker")
    assert reranking.reranker is not None and reranking.rerank_k == 4
    assert gold_first(reranking) > untrained  # the trained re-ranker decides the order, and learned some of it
    assert all(0.0 <= score <= 1.0 for hits in reranking.search_texts(QUERIES) for _, score in hits)
    from_bytes = spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 4})
    from_bytes.from_bytes(reranking.to_bytes())
    assert from_bytes.search_texts(QUERIES) == reranking.search_texts(QUERIES)

    # a copy that left the re-ranker behind is refused (it linked without it)
    import shutil

    import srsly

    shutil.copytree(tmp_path / "with", tmp_path / "partial")
    shutil.rmtree(tmp_path / "partial" / "sapbert_linker" / "reranker")
    with pytest.raises(IndexFormatError, match=r"saved with a re-ranker, but .*partial.sapbert_linker.reranker is missing"):
        spacy.load(tmp_path / "partial")
    # another re-ranker's weights copied over its own are refused: they scored the candidates with no error (an audit)
    shutil.copytree(tmp_path / "with", tmp_path / "swapped")
    shutil.copy(tmp_path / "untrained" / "model.safetensors", tmp_path / "swapped" / "sapbert_linker" / "reranker" / "model.safetensors")
    with pytest.raises(IndexFormatError, match=r"reranker: the re-ranker's model files are not those its reranker.json was written with"):
        spacy.load(tmp_path / "swapped")
    msg = srsly.msgpack_loads(reranking.to_bytes())
    del msg["reranker"]
    with pytest.raises(IndexFormatError, match=r"saved with a re-ranker, but bytes/reranker is missing"):
        from_bytes.from_bytes(srsly.msgpack_dumps(msg))


def test_a_reranker_of_another_encoder_is_refused_and_rerank_k_above_k_is_a_config_error(linker_pipeline, tmp_path, tiny_bert):
    cross_encoder = Reranker(tiny_bert, device="cpu")
    cross_encoder.save(tmp_path / "rr", trained_on={"encoder_fingerprint": "0123456789abcdef", "normalizer": {}})
    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    with pytest.raises(SapbertError, match="trained on the candidates of encoder 0123456789abcdef"):
        linker.set_reranker(tmp_path / "rr")
    write_meta(tmp_path / "rr", 32, 4, {"encoder_fingerprint": linker.encoder.fingerprint, "normalizer": {"lowercase": False}})
    with pytest.raises(SapbertError, match="normalized otherwise"):
        linker.set_reranker(tmp_path / "rr")
    # trained on the candidates of this encoder pooled otherwise: its bi-encoder scores were other ones
    other_pooling = "cls" if linker.encoder.pooling != "cls" else "mean"
    write_meta(tmp_path / "rr", 32, 4, {"encoder_fingerprint": linker.encoder.fingerprint, "normalizer": linker.normalizer.settings(),
                                        "pooling": other_pooling, "max_length": linker.encoder.max_length})
    with pytest.raises(SapbertError, match=rf"run otherwise, \(trained, here\) {{'pooling': \('{other_pooling}', '{linker.encoder.pooling}'\)}}"):
        linker.set_reranker(tmp_path / "rr")
    write_meta(tmp_path / "rr", 32, 4, {"encoder_fingerprint": linker.encoder.fingerprint, "normalizer": linker.normalizer.settings(),
                                        "pooling": linker.encoder.pooling, "max_length": linker.encoder.max_length})
    linker.set_reranker(tmp_path / "rr")  # the same settings: taken
    with pytest.raises(SapbertError, match=r"`rerank_k` \(11\) is larger than `k` \(10\)"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "rerank_k": 11})
    with pytest.raises(SapbertError, match=r"`rerank_weight` must be a positive number, got 0"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "rerank_weight": 0.0})


# context: the mention read in its text ------------------------------------------------------------


def test_context_around_takes_whole_words_on_each_side_and_fewer_at_the_ends():
    text = "Acetaminophen-induced hepatitis, after 3 doses; no viral cause."
    where = MentionInContext(text, text.index("hepatitis"), text.index("hepatitis") + len("hepatitis"))
    assert context_around(where, 1) == ("Acetaminophen-induced", ",")  # whitespace-separated: the comma is a word
    assert context_around(where, 3) == ("Acetaminophen-induced", ", after 3")
    assert context_around(where, 0) == ("", "")
    start = text.index("viral")
    assert context_around(MentionInContext(text, start, start + 5), 2) == ("doses; no", "cause.")
    long = "x" * 500 + " left words here MENTION right words " + "y" * 500  # the window starts inside the x's
    at = long.index("MENTION")
    assert context_around(MentionInContext(long, at, at + 7), 5) == ("left words here", "right words")


def test_mention_side_brackets_the_normalized_mention_in_its_normalized_context():
    text = "Drug-Induced HEPATITIS in two patients"
    where = MentionInContext(text, 13, 22)
    assert mention_side("hepatitis", where, 2, str.lower) == "drug-induced [ hepatitis ] in two"
    assert mention_side("hepatitis", where, 0, str.lower) == "hepatitis"  # the mention alone, as before
    assert mention_side("hepatitis", None, 2, str.lower) == "[ hepatitis ]"  # a bare string: no words around it


def test_mine_groups_keeps_every_place_of_a_mention_and_an_epoch_reads_one_drawn_by_the_seed(linker_pipeline):
    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    places = [MentionInContext(f"case {i}: hepatoma again", 8, 16) for i in range(5)]
    mentions = [("hepatoma", "D2", where, None) for where in places] + [("nephropathy", "D3", None, None)]
    groups, counts = mine_groups(linker, mentions, candidates=3, max_names=2)
    assert counts["groups"] == 2  # one group per distinct (mention, gold), not per place
    by_query = {g.query: g for g in groups}
    assert by_query["hepatoma"].contexts == places and by_query["nephropathy"].contexts == []
    sides = [epoch_mention_sides(groups, linker, 1, seed=42, epoch=e) for e in range(6)]
    assert sides[0] == epoch_mention_sides(groups, linker, 1, seed=42, epoch=0)  # a resumed epoch reads the same
    assert {s[0] for s in sides} <= {f"{i}: [ hepatoma ] again" for i in range(5)} and len({s[0] for s in sides}) > 1
    assert {s[1] for s in sides} == {"[ nephropathy ]"}
    assert epoch_mention_sides(groups, linker, 0, seed=42, epoch=0) == ["hepatoma", "nephropathy"]


def hepatitis_corpus(tmp_path):
    """One string, two concepts: "hepatitis" after a drug is D2 here, after "viral" it is D5, as BC5CDR links
    drug-induced hepatitis to Drug-Induced Liver Injury."""
    lines = []
    for pmid in range(12):
        cause, gold = ("aspirin induced", "D2") if pmid % 2 else ("chronic viral", "D5")
        text = f"patient with {cause} hepatitis today"
        start = text.index("hepatitis")
        lines += [f"{pmid}|t|{text}", f"{pmid}|a|", f"{pmid}\t{start}\t{start + 9}\thepatitis\tDisease\t{gold}", ""]
    corpus = tmp_path / "hepatitis.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf8")
    return corpus


def hepatitis_docs(nlp):
    docs = [nlp.make_doc(f"patient with {cause} hepatitis today") for cause in ("aspirin induced", "chronic viral")]
    for doc in docs:
        doc.ents = [doc.char_span(doc.text.index("hepatitis"), doc.text.index("hepatitis") + 9, label="Disease")]
    return docs


def test_a_context_reranker_learns_what_the_words_around_a_mention_say_and_the_pipeline_reads_them(tmp_path, tiny_bert):
    concepts = CONCEPTS + [Concept("D5", "Viral hepatitis", ["hepatitis", "virus hepatitis"])]
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 4}).initialize(vocabulary=concepts)
    nlp.to_disk(tmp_path / "pipe")
    torch.manual_seed(0)
    config = RerankerConfig(model=tiny_bert, pipeline=str(tmp_path / "pipe"), output=str(tmp_path / "run"),
                            corpora=[str(hepatitis_corpus(tmp_path))], candidates=4, context_words=3, batch_size=2, lr=2e-3,
                            epochs=60, log_every=10, device="cpu", progress=False, bi_temperature=0)
    model_dir = train_reranker(config)
    meta = json.loads((model_dir / "reranker.json").read_text())
    assert meta["context_words"] == 3 and meta["max_length"] == 128  # the default pair length with context

    linker = nlp.get_pipe("sapbert_linker")
    linker.set_reranker(model_dir)
    assert linker.reranker.context_words == 3
    docs = hepatitis_docs(nlp)
    drug, viral = (doc.ents[0]._.kb_ents for doc in nlp.pipe(docs))
    assert drug[0][0] == "D2" and viral[0][0] == "D5"  # one string, two links: the context decides
    [bare] = linker.search_texts(["hepatitis"])  # no document: the mention with no words around it
    places = [MentionInContext(doc.text, doc.ents[0].start_char, doc.ents[0].end_char) for doc in docs]
    assert linker.search_texts(["hepatitis", "hepatitis"], contexts=places) == [drug, viral]
    assert [bare] == linker.search_texts(["hepatitis"], contexts=[None]) and bare not in (drug, viral)
    nlp.to_disk(tmp_path / "with")  # saved inside the pipeline, it still reads the context
    loaded = spacy.load(tmp_path / "with")
    assert [doc.ents[0]._.kb_ents for doc in loaded.pipe(hepatitis_docs(loaded))] == [drug, viral]

    resumed = RerankerConfig(**{**config.__dict__, "context_words": 0, "epochs": 61})
    with pytest.raises(SapbertError, match="trained with context_words=3, this run has context_words=0"):
        train_reranker(resumed, resume=True)


@pytest.mark.parametrize("setting, value", [("context_words", -1), ("max_length", 4), ("candidates", 1)])
def test_a_bad_reranker_setting_is_an_error_naming_it(setting, value):
    config = RerankerConfig(model="m", pipeline="p", output="o", corpora=["c"], **{setting: value})
    with pytest.raises(SapbertError, match=f"{setting}={value}"):
        config.validate()
    assert RerankerConfig(model="m", pipeline="p", output="o", corpora=["c"], context_words=8).pair_length == 128


# ensembles: several trained re-rankers whose logits are averaged ----------------------------------


def trained_heads(tiny_bert, folder, linker, seeds=(1, 2)):
    """Re-ranker folders of the tiny BERT with heads drawn by `seeds`, recorded as trained for `linker`."""
    trained_on = {"encoder_fingerprint": linker.encoder.fingerprint, "normalizer": linker.normalizer.settings()}
    folders = []
    for seed in seeds:
        torch.manual_seed(seed)
        Reranker(tiny_bert, device="cpu", max_length=32).save(folder / f"rr{seed}", trained_on=trained_on)
        folders.append(folder / f"rr{seed}")
    return folders


def test_an_ensemble_scores_the_mean_of_its_members_and_travels_inside_the_pipeline(linker_pipeline, tmp_path, tiny_bert):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    first, second = trained_heads(tiny_bert, tmp_path, linker)
    result = CliRunner().invoke(app, ["combine-rerankers", str(first), str(second), "--output", str(tmp_path / "ens")])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "ens" / "reranker.json").read_text())
    assert meta["format_version"] == 2 and meta["members"] == ["member-0", "member-1"] and meta["max_length"] == 32
    pairs = [("hepatoma", "liver cancer ; hepatoma"), ("nephropathy", "heart failure"), ("renal disease", "kidney disease")]
    one, two = Reranker(first, device="cpu").score(pairs), Reranker(second, device="cpu").score(pairs)
    assert not numpy.allclose(one, two)  # the heads differ, so the mean is not either one
    ensemble = Reranker(tmp_path / "ens", device="cpu")
    assert ensemble.score(pairs) == pytest.approx((one + two) / 2, abs=1e-5)

    result = CliRunner().invoke(app, ["add-reranker", str(linker_pipeline), str(tmp_path / "ens"), "--output", str(tmp_path / "with")])
    assert result.exit_code == 0, result.output
    loaded = spacy.load(tmp_path / "with").get_pipe("sapbert_linker")
    assert len(loaded.reranker.members) == 2
    linker.set_reranker(tmp_path / "ens")
    assert loaded.search_texts(QUERIES) == linker.search_texts(QUERIES)
    from_bytes = spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 4})
    from_bytes.from_bytes(loaded.to_bytes())
    assert len(from_bytes.reranker.members) == 2 and from_bytes.search_texts(QUERIES) == linker.search_texts(QUERIES)


def test_combine_rerankers_refuses_members_that_differ_and_outputs_it_did_not_write(linker_pipeline, tmp_path, tiny_bert):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    def combine(*args):
        result = CliRunner().invoke(app, ["combine-rerankers", *map(str, args)])
        assert result.exit_code == 1, result.output
        [line] = [l for l in result.output.splitlines() if l.startswith("error:")]
        return line

    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    first, second = trained_heads(tiny_bert, tmp_path, linker)
    meta = json.loads((second / "reranker.json").read_text())
    write_meta(second, 48, meta["max_names"], meta["trained_on"])  # pairs cut at another length
    assert "max_length" in combine(first, second, "--output", tmp_path / "ens") and str(second) in combine(first, second, "--output", tmp_path / "ens")
    assert "trained re-ranker" in combine(first, tiny_bert, "--output", tmp_path / "ens")  # a base model, not trained
    assert "is given twice" in combine(first, first, "--output", tmp_path / "ens")  # its logit counted twice, at twice the cost
    assert not (tmp_path / "ens").exists()
    write_meta(second, 32, meta["max_names"], meta["trained_on"])
    old_format = {key: value for key, value in meta.items() if key != "context_words"}  # written before context_words
    (second / "reranker.json").write_text(json.dumps({**old_format, "max_length": 32}))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "mine.txt").write_text("mine", encoding="utf8")
    for extra in ([], ["--overwrite"]):
        assert "is not a re-ranker ensemble; it was left untouched" in combine(first, second, "--output", notes, *extra)
    assert [p.name for p in notes.iterdir()] == ["mine.txt"]
    before = sorted(p.name for p in first.iterdir())  # a trained re-ranker, one of the members: never replaced
    assert "is not a re-ranker ensemble" in combine(first, second, "--output", first, "--overwrite")
    assert sorted(p.name for p in first.iterdir()) == before
    args = ["combine-rerankers", str(first), str(second), "--output", str(tmp_path / "ens")]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert "already holds a re-ranker ensemble; pass --overwrite" in combine(*args[1:])
    assert CliRunner().invoke(app, args + ["--overwrite"]).exit_code == 0  # an ensemble it wrote: replaced
    (tmp_path / "ens" / "mine.txt").write_text("mine", encoding="utf8")
    assert "holds files that a re-ranker ensemble does not have (mine.txt)" in combine(*args[1:], "--overwrite")
    assert "already an ensemble" in combine(tmp_path / "ens", first, "--output", tmp_path / "ens2")


# the re-ranker's weight in a pipeline, chosen on a dev corpus ------------------------------------------


def test_add_reranker_tunes_the_weight_on_dev_scoring_each_pair_once(linker_pipeline, tmp_path, tiny_bert, monkeypatch):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.evaluation import evaluate_end_to_end
    from spacy_sapbert.readers.corpora import read_pubtator

    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    torch.manual_seed(3)
    head = Reranker(tiny_bert, device="cpu", max_length=32)
    head.bi_temperature = 0.1  # trained to correct the linker's scores
    head.save(tmp_path / "rr", trained_on={"encoder_fingerprint": linker.encoder.fingerprint, "normalizer": linker.normalizer.settings()})
    dev = pubtator(tmp_path)
    documents = list(read_pubtator(dev))
    scored = []
    original = Reranker._score
    monkeypatch.setattr(Reranker, "_score", lambda self, pairs: scored.extend(pairs) or original(self, pairs))

    args = ["add-reranker", str(linker_pipeline), str(tmp_path / "rr"), "--output", str(tmp_path / "with"), "--tune-weight-on", str(dev),
            "--weight", "1000", "--weight", "0.001", "--weight", "1", "--report", str(tmp_path / "weights.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(scored) == len(set(scored))  # three weights, each pair scored once
    report = json.loads((tmp_path / "weights.json").read_text())
    rows = {row["rerank_weight"]: row["accuracy"] for row in report["weights"]}
    assert list(rows) == [0.001, 1.0, 1000.0]
    without = evaluate_end_to_end(spacy.load(linker_pipeline), documents, gold_mentions=True)["recall"]
    assert rows[0.001] == pytest.approx(without)  # a tiny weight leaves the linker's order
    best = max(rows.values())
    assert report["chosen"] == min(w for w, accuracy in rows.items() if accuracy == best)  # the smaller on a tie
    saved = spacy.load(tmp_path / "with")
    assert saved.get_pipe("sapbert_linker").rerank_weight == report["chosen"]
    assert saved.config["components"]["sapbert_linker"]["rerank_weight"] == report["chosen"]
    assert evaluate_end_to_end(saved, documents, gold_mentions=True)["recall"] == pytest.approx(best)

    result = CliRunner().invoke(app, args[:5] + ["--output", str(tmp_path / "bad"), "--tune-weight-on", str(dev), "--weight", "-1"])
    assert result.exit_code == 1 and "--weight must be a positive number, got -1" in result.output
    assert not (tmp_path / "bad").exists()

    # the pipeline fails to save: the report of its choice is not written either (the old one stays)
    import spacy_sapbert.pipeline

    def fail(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(spacy_sapbert.pipeline, "save_pipeline", fail)
    before = (tmp_path / "weights.json").read_text()
    args[args.index("--output") + 1] = str(tmp_path / "failed")
    assert CliRunner().invoke(app, args).exit_code != 0
    assert (tmp_path / "weights.json").read_text() == before and not (tmp_path / "failed").exists()


# reduced precision: the re-ranker in bfloat16 ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*no native.*:RuntimeWarning")  # a CPU without bfloat16 units runs it emulated
def test_a_bfloat16_reranker_scores_near_float32_keeps_float32_weights_and_is_a_config_key(linker_pipeline, tmp_path, tiny_bert, monkeypatch):
    from typer.testing import CliRunner

    import spacy_sapbert.reranker as reranker_module
    from spacy_sapbert.cli import app

    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    first, second = trained_heads(tiny_bert, tmp_path, linker)
    assert CliRunner().invoke(app, ["combine-rerankers", str(first), str(second), "--output", str(tmp_path / "ens")]).exit_code == 0
    pairs = [("hepatoma", "liver cancer ; hepatoma"), ("nephropathy", "heart failure"), ("renal disease", "kidney disease")]
    exact = Reranker(tmp_path / "ens", device="cpu")
    rounded = Reranker(tmp_path / "ens", device="cpu", backend="torch-bf16")
    assert all(next(model.parameters()).dtype == torch.bfloat16 for _, model in rounded.runtime)
    assert all(next(model.parameters()).dtype == torch.float32 for _, model in rounded.members)
    assert not numpy.array_equal(rounded.score(pairs), exact.score(pairs))  # rounded, and only just
    assert rounded.score(pairs) == pytest.approx(exact.score(pairs), abs=0.05 * (float(numpy.abs(exact.score(pairs)).mean()) + 1))

    args = ["add-reranker", str(linker_pipeline), str(tmp_path / "ens"), "--output", str(tmp_path / "with")]
    result = CliRunner().invoke(app, args + ["--rerank-backend", "torch-bf16"])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "with")  # the config key add-reranker wrote
    assert nlp.get_pipe("sapbert_linker").reranker.backend == "torch-bf16"
    assert nlp.get_pipe("sapbert_linker").search_texts(QUERIES)  # links through the rounded copies
    resaved = Reranker(tmp_path / "with" / "sapbert_linker" / "reranker", device="cpu")  # saved: float32, not the copies
    assert numpy.array_equal(resaved.score(pairs), exact.score(pairs))
    as_float32 = spacy.load(tmp_path / "with", config={"components": {"sapbert_linker": {"rerank_backend": "torch"}}})
    assert as_float32.get_pipe("sapbert_linker").reranker.runtime is as_float32.get_pipe("sapbert_linker").reranker.members
    result = CliRunner().invoke(app, args[:-1] + [str(tmp_path / "other"), "--rerank-backend", "torch-int8"])
    assert result.exit_code == 1 and "--rerank-backend is 'torch-int8'; choose one of" in result.output
    # a --report over the re-ranker it reads, and --weight without --tune-weight-on (saved with 1.0), are refused
    meta = (tmp_path / "ens" / "reranker.json").read_bytes()
    result = CliRunner().invoke(app, args[:-1] + [str(tmp_path / "o2"), "--tune-weight-on", str(tmp_path / "ens" / "x.txt"),
                                                  "--report", str(tmp_path / "ens" / "reranker.json")])
    assert result.exit_code == 1 and "is also an input of this command, or inside one" in result.output
    assert (tmp_path / "ens" / "reranker.json").read_bytes() == meta
    result = CliRunner().invoke(app, args[:-1] + [str(tmp_path / "o3"), "--weight", "0.3"])
    assert result.exit_code == 1 and "--weight describe --tune-weight-on" in result.output

    with pytest.raises(SapbertError, match=r"config key `rerank_backend` is 'onnx'; choose one of \['torch', 'torch-bf16', 'torch-fp16'\]"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "rerank_backend": "onnx"})
    monkeypatch.setattr(reranker_module, "MAX_HALF_LOGIT_ERROR", 0.0)  # any rounding now counts as a model that drifts
    with pytest.raises(SapbertError, match=r"re-ranker backend 'torch-bf16': this model's logits move by .* which would change links; use 'torch'"):
        Reranker(tmp_path / "ens", device="cpu", backend="torch-bf16")


def test_a_reranker_never_outlives_the_encoder_it_was_trained_for(linker_pipeline, tmp_path, tiny_bert, tiny_bert_48, index_builds):
    """Loading a pipeline saved without a re-ranker leaves none in use; a re-ranker kept while the encoder is replaced
    is refused; a `reranker` folder that is gone is said, naming the key, before any name is encoded."""
    nlp = spacy.load(linker_pipeline)
    linker = nlp.get_pipe("sapbert_linker")
    plain = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    (folder,) = trained_heads(tiny_bert, tmp_path, linker, seeds=(1,))
    linker.set_reranker(folder)
    assert linker.search_texts(QUERIES) != plain.search_texts(QUERIES)
    nlp.from_disk(linker_pipeline)
    assert linker.reranker is None and linker.search_texts(QUERIES) == plain.search_texts(QUERIES)
    linker.set_reranker(folder)
    linker.from_bytes(plain.to_bytes())
    assert linker.reranker is None and linker.search_texts(QUERIES) == plain.search_texts(QUERIES)
    linker.set_reranker(folder)
    nlp.to_disk(tmp_path / "saved")
    linker.set_reranker(None)
    nlp.to_disk(tmp_path / "saved")  # over the earlier save: its re-ranker does not come back
    assert spacy.load(tmp_path / "saved").get_pipe("sapbert_linker").reranker is None

    other = spacy.blank("en")
    other.add_pipe("sapbert_linker", config={"model": tiny_bert_48, "device": "cpu", "k": 4}).initialize(vocabulary=CONCEPTS)
    other.to_disk(tmp_path / "other")
    linker.set_reranker(folder)
    with pytest.raises(SapbertError, match="trained on the candidates of encoder"):
        linker.from_disk(tmp_path / "other" / "sapbert_linker", exclude=["reranker"])
    nlp = spacy.load(linker_pipeline)
    nlp.get_pipe("sapbert_linker").set_reranker(folder)
    nlp.to_disk(tmp_path / "with")
    swapped = spacy.load(tmp_path / "with", config={"components": {"sapbert_linker": {"model": tiny_bert_48}}})
    builds = len(index_builds)
    with pytest.raises(SapbertError, match="trained on the candidates of encoder"):
        swapped.get_pipe("sapbert_linker").initialize(vocabulary=CONCEPTS)
    with pytest.raises(SapbertError, match="is not a re-ranker: it was saved without a sequence-classification head"):
        linker.set_reranker(tiny_bert)  # an encoder's folder: its head would be new and random
    gone = spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "reranker": str(tmp_path / "gone")})
    with pytest.raises(SapbertError, match=r"config key `reranker`: .*re-ranker .*no such folder"):
        gone.initialize(vocabulary=CONCEPTS)
    assert len(index_builds) == builds


def test_a_reranker_that_recorded_the_fingerprint_without_its_suffix_is_used_and_combined(linker_pipeline, tmp_path, tiny_bert):
    """Re-rankers trained before the fingerprint had its config suffix record its 16 digits alone: still the same
    encoder's, so add-reranker and combine-rerankers take them, beside one trained since."""
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    linker = spacy.load(linker_pipeline).get_pipe("sapbert_linker")
    old, new = trained_heads(tiny_bert, tmp_path, linker)
    meta = json.loads((old / "reranker.json").read_text())
    meta["trained_on"]["encoder_fingerprint"] = linker.encoder.fingerprint.split("-")[0]
    (old / "reranker.json").write_text(json.dumps(meta))
    linker.set_reranker(old)  # checked against the linker's encoder: accepted
    result = CliRunner().invoke(app, ["combine-rerankers", str(old), str(new), "--output", str(tmp_path / "ens")])
    assert result.exit_code == 0, result.output
    meta["trained_on"]["encoder_fingerprint"] = "0123456789abcdef"  # another encoder's: still refused
    (old / "reranker.json").write_text(json.dumps(meta))
    result = CliRunner().invoke(app, ["combine-rerankers", str(old), str(new), "--output", str(tmp_path / "ens2")])
    assert result.exit_code == 1 and "trained_on" in result.output
    with pytest.raises(SapbertError, match="was trained on the candidates of encoder 0123456789abcdef"):
        linker.set_reranker(old)


def test_a_resume_over_a_rebuilt_pipeline_or_other_corpora_is_refused(linker_pipeline, tmp_path, tiny_bert, tiny_bert_48):
    """The checkpoint learned the candidates of the linker it was started with: a resume whose --pipeline (same path)
    now holds another encoder, or whose corpus changed, is refused; else the old weights were relabelled as trained
    for the new linker."""
    corpus = pubtator(tmp_path)
    config = RerankerConfig(model=tiny_bert, pipeline=str(linker_pipeline), output=str(tmp_path / "run"), corpora=[str(corpus)],
                            candidates=4, max_length=32, batch_size=7, epochs=1, device="cpu", progress=False)
    train_reranker(config)
    meta = (tmp_path / "run" / "model" / "reranker.json").read_text()
    longer = RerankerConfig(**{**config.__dict__, "epochs": 2})
    corpus.write_text(corpus.read_text() + "\n", encoding="utf8")
    with pytest.raises(SapbertError, match=r"cannot resume: the run's corpora changed since the checkpoint"):
        train_reranker(longer, resume=True)
    corpus.write_text(corpus.read_text()[:-1], encoding="utf8")
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert_48, "device": "cpu", "k": 4}).initialize(vocabulary=CONCEPTS)
    shutil.rmtree(linker_pipeline)
    nlp.to_disk(linker_pipeline)
    with pytest.raises(SapbertError, match=r"cannot resume: the run's linker changed since the checkpoint"):
        train_reranker(longer, resume=True)
    assert (tmp_path / "run" / "model" / "reranker.json").read_text() == meta  # the finished run is as it was
    # the same encoder over another vocabulary mines other groups (found by an audit: it resumed silently)
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 4}).initialize(vocabulary=CONCEPTS[:-1])
    shutil.rmtree(linker_pipeline)
    nlp.to_disk(linker_pipeline)
    with pytest.raises(SapbertError, match=r"cannot resume: the run's mined_from changed since the checkpoint"):
        train_reranker(longer, resume=True)
