"""spaCy's InMemoryLookupKB export, the SapBERT candidate generators, and spaCy's EntityLinker trained on them."""
import random
from collections import Counter

import numpy
import pytest
import spacy
from spacy.training import Example

from spacy_sapbert.errors import SapbertError
from spacy_sapbert.kb import Concept
from spacy_sapbert.preprocess import resolve_gold_id
from spacy_sapbert.spacy_kb import concept_vectors, linker_kb, lookup_kb, with_kb_gold_ids

# "cold" names two concepts: only the sentence can tell them apart
CONCEPTS = [
    Concept("C1", "Common cold", ["cold", "head cold", "coryza"]),
    Concept("C2", "Cold temperature", ["cold", "low temperature", "chill"]),
    Concept("C3", "Fever", ["pyrexia"], alt_ids=["C3-old"]),
]


def unit(rows):
    rows = numpy.asarray(rows, dtype="float32")
    return rows / numpy.linalg.norm(rows, axis=-1, keepdims=True)


@pytest.fixture
def cold_nlp(tiny_bert):
    """sentencizer -> entity ruler ("cold", "pyrexia") -> sapbert_linker over CONCEPTS."""
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    ruler = nlp.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"})
    ruler.add_patterns([{"label": "COND", "pattern": "cold"}, {"label": "COND", "pattern": "pyrexia"}])
    # two candidates per mention: for "cold", the two colds (C3 scores below both); mean pooling, as a
    # random BERT's [CLS] vectors are all alike (cosine 0.99999) and no context could pick among them
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 5, "max_entities_per_mention": 2, "pooling": "mean"})
    linker.initialize(vocabulary=CONCEPTS)
    return nlp


@pytest.mark.parametrize("index_type", ["flat", "ivfpq"])
def test_concept_vectors_are_the_unit_mean_of_each_concepts_name_vectors(tiny_bert, index_type):
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "index_type": index_type})
    linker.initialize(vocabulary=CONCEPTS)
    index = linker.index
    names = list(index.names)
    encoded = dict(zip(names, unit(linker.encoder.encode(names))))
    expected = [unit(numpy.mean([encoded[linker.normalizer(n)] for n in concept.names], axis=0)) for concept in CONCEPTS]
    atol = 1e-5 if index_type == "flat" else 2e-3  # ivfpq gives back its float16 copies
    numpy.testing.assert_allclose(concept_vectors(index, chunk=2), numpy.stack(expected), atol=atol)


def test_lookup_kb_holds_every_concept_and_name(cold_nlp):
    linker = cold_nlp.get_pipe("sapbert_linker")
    kb = lookup_kb(linker, cold_nlp.vocab)
    assert sorted(kb.get_entity_strings()) == ["C1", "C2", "C3"] and kb.entity_vector_length == linker.index.dim
    numpy.testing.assert_allclose(kb.get_vector("C2"), concept_vectors(linker.index)[1], atol=1e-6)
    shared = {c.entity_: c.prior_prob for c in kb.get_alias_candidates("cold")}
    assert shared == {"C1": pytest.approx(0.5), "C2": pytest.approx(0.5)}
    assert [c.entity_ for c in kb.get_alias_candidates("pyrexia")] == ["C3"]


def test_candidates_are_the_linkers_kb_ents(cold_nlp):
    from spacy_sapbert.spacy_kb import candidate_batch_generator, candidate_generator

    kb = lookup_kb(cold_nlp.get_pipe("sapbert_linker"), cold_nlp.vocab)
    doc = cold_nlp("A cold with pyrexia.")
    expected = [[(cid, pytest.approx(min(max(score, 0.0), 1.0), abs=1e-6)) for cid, score in ent._.kb_ents] for ent in doc.ents]
    batch = [[(c.entity_, c.prior_prob) for c in cands] for cands in candidate_batch_generator()(kb, doc.ents)]
    single = [[(c.entity_, c.prior_prob) for c in candidate_generator()(kb, ent)] for ent in doc.ents]
    assert batch == expected and single == expected
    assert {cid for cid, _ in batch[0][:2]} == {"C1", "C2"}  # the shared name ties the two colds
    # a linker limited to other labels links none of them, and the generator gave them candidates all the same
    cold_nlp.get_pipe("sapbert_linker").labels = ("DISEASE",)
    doc = cold_nlp("A cold with pyrexia.")
    assert [ent._.kb_ents for ent in doc.ents] == [None, None]
    assert [list(candidates) for candidates in candidate_batch_generator()(kb, doc.ents)] == [[], []]


def test_pipelines_sharing_a_vocab_each_get_their_own_linkers_candidates(cold_nlp, tmp_path):
    """spacy.load(..., vocab=shared): both linkers have that vocab and name, and the newest answered for both, so the
    first pipeline's EntityLinker got the other index's candidates (found by an audit). The doc says who linked it."""
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.spacy_kb import candidate_batch_generator, candidate_generator

    cold_nlp.to_disk(tmp_path / "first")
    other = spacy.load(tmp_path / "first", vocab=cold_nlp.vocab)
    other.get_pipe("sapbert_linker").initialize(vocabulary=[Concept("X9", "common cold"), Concept("X8", "fever")])
    kb = lookup_kb(cold_nlp.get_pipe("sapbert_linker"), cold_nlp.vocab)
    doc = cold_nlp("A cold with pyrexia.")
    own = [[cid for cid, _ in ent._.kb_ents] for ent in doc.ents]
    assert [[c.entity_ for c in cands] for cands in candidate_batch_generator()(kb, doc.ents)] == own
    assert [c.entity_ for c in candidate_generator()(kb, doc.ents[0])] == own[0]
    other_doc = other("A cold with pyrexia.")
    other_kb = lookup_kb(other.get_pipe("sapbert_linker"), other.vocab)
    assert [c.entity_ for c in candidate_generator()(other_kb, other_doc.ents[0])] == [cid for cid, _ in other_doc.ents[0]._.kb_ents]
    assert {cid for cid, _ in other_doc.ents[0]._.kb_ents} <= {"X8", "X9"}  # and the other's own, for its doc


def test_a_candidate_generator_names_a_missing_linker(cold_nlp):
    from spacy_sapbert.spacy_kb import candidate_generator

    kb = lookup_kb(cold_nlp.get_pipe("sapbert_linker"), cold_nlp.vocab)
    doc = cold_nlp("cold")
    with pytest.raises(SapbertError, match=r"no sapbert_linker called 'umls_linker'.*\['sapbert_linker'\]"):
        list(candidate_generator("umls_linker")(kb, doc.ents[0]))


def test_a_linker_copied_with_source_is_named_as_the_cause(cold_nlp):
    """add_pipe(source=...) keeps the component's own vocab, so the KB functions cannot find it in the new pipeline."""
    from spacy_sapbert.spacy_kb import linker_kb

    copy = spacy.blank("en")
    copy.add_pipe("sapbert_linker", source=cold_nlp)
    with pytest.raises(SapbertError, match=r"add_pipe\(source=\.\.\.\) keeps its source pipeline's vocab"):
        linker_kb()(copy.vocab)


@pytest.mark.parametrize(
    "gold, expected",
    [
        ("C1", ("C1", "kept")),
        ("C3-old", ("C3", "alternative")),
        ("D9|C2", ("C2", "kept")),  # either is right: the first the vocabulary knows
        ("C2|C1", ("C2", "kept")),
        ("C1+C2", (None, "combination")),
        ("-1", (None, "no_concept")),
        ("D9", (None, "unknown")),
        ("UMLS:C1", ("C1", "kept")),  # MedMentions' golds; the readers name UMLS concepts bare
        ("MESH:D9|umls:C2", ("C2", "kept")),
    ],
)
def test_resolve_gold_id(gold, expected):
    known = {concept_id: concept.id for concept in CONCEPTS for concept_id in [concept.id, *concept.alt_ids]}
    assert resolve_gold_id(gold, known.get) == expected


def test_with_kb_gold_ids_rewrites_and_counts(cold_nlp):
    doc = cold_nlp.make_doc("cold and fever")
    doc.ents = [doc.char_span(0, 4, "COND", kb_id="D9|C1"), doc.char_span(9, 14, "COND", kb_id="C3-old")]
    counts = Counter()
    known = {"C1": "C1", "C3-old": "C3"}
    assert [e.kb_id_ for e in with_kb_gold_ids(doc, known.get, counts).ents] == ["C1", "C3"]
    assert counts == {"kept": 1, "alternative": 1}


CONTEXT_WORDS = {
    "C1": ["sneezing", "nose", "cough", "throat", "virus", "tissues", "fever", "congestion"],
    "C2": ["ice", "frozen", "winter", "snow", "freezer", "frost", "degrees", "wind"],
}


def sentences(concept_id: str, pairs) -> list:
    """Sentences that differ only by the two context words of `concept_id` they name."""
    words = CONTEXT_WORDS[concept_id]
    return [f"It was cold , with {words[i]} and {words[j]} ." for i, j in pairs]


# train on some word pairs, test on pairs never seen together
TRAIN_PAIRS = [(i, j) for i in range(8) for j in range(8) if i < j and (i + j) % 3 != 0]
HELD_OUT_PAIRS = [(i, j) for i in range(8) for j in range(8) if i < j and (i + j) % 3 == 0]


def example(nlp, text: str, concept_id: str) -> Example:
    start = text.index("cold")
    doc = nlp.get_pipe("sentencizer")(nlp.make_doc(text))
    return Example.from_dict(doc, {"entities": [(start, start + 4, "COND")], "links": {(start, start + 4): {concept_id: 1.0}}})


def add_entity_linker(nlp, vector_length: int):
    return nlp.add_pipe(
        "entity_linker",
        config={
            "entity_vector_length": vector_length,
            "incl_prior": False,  # both colds score 1.0 on the name: the context must decide
            "use_gold_ents": True,
            "candidates_batch_size": 8,
            "get_candidates": {"@misc": "spacy-sapbert.CandidateGenerator.v1"},
            "get_candidates_batch": {"@misc": "spacy-sapbert.CandidateBatchGenerator.v1"},
        },
    )


def test_spacys_entity_linker_learns_from_context_on_sapbert_candidates(cold_nlp, tmp_path):
    spacy.util.fix_random_seed(0)
    held_out = [(text, cid) for cid in CONTEXT_WORDS for text in sentences(cid, HELD_OUT_PAIRS)]
    linker = cold_nlp.get_pipe("sapbert_linker")
    alone = [cold_nlp(text).ents[0].kb_id_ for text, _ in held_out]
    assert len(set(alone)) == 1  # the linker alone cannot tell the colds apart: right half of the time

    entity_linker = add_entity_linker(cold_nlp, linker.index.dim)
    examples = [example(cold_nlp, text, cid) for cid in CONTEXT_WORDS for text in sentences(cid, TRAIN_PAIRS)]
    entity_linker.initialize(lambda: examples, nlp=cold_nlp, kb_loader=linker_kb())
    optimizer = entity_linker.create_optimizer()
    for _ in range(30):
        random.shuffle(examples)
        entity_linker.update(examples, sgd=optimizer)

    linked = [cold_nlp(text).ents[0].kb_id_ for text, _ in held_out]
    right = sum(kb_id == cid for kb_id, (_, cid) in zip(linked, held_out))
    assert right >= 0.9 * len(held_out), (right, len(held_out))

    cold_nlp.to_disk(tmp_path / "pipe")
    reloaded = spacy.load(tmp_path / "pipe")
    assert [reloaded(text).ents[0].kb_id_ for text, _ in held_out] == linked


def test_priors_clip_scores_or_spread_them_by_softmax():
    from spacy_sapbert.spacy_kb import candidate_generator, priors

    assert priors([1.2, 0.5, -0.1]) == [1.0, 0.5, 0.0]
    spread = priors([0.99, 0.97, 0.90], temperature=0.01)
    assert sum(spread) == pytest.approx(1.0) and spread[0] / spread[1] == pytest.approx(numpy.exp(2.0))
    assert priors([], temperature=0.01) == []
    with pytest.raises(SapbertError, match="temperature=0"):
        candidate_generator(temperature=0)
