"""Mention memory (kNN-BioEL): the score mixture, the memory itself, and the linker that consults it."""
import math
import warnings

import numpy
import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.errors import IndexFormatError, SapbertError
from spacy_sapbert.memory import MIXTURES, MemorySettings, MentionMemory, mix_scores, softmax
from spacy_sapbert.readers.corpora import CorpusWarning


def test_softmax_is_stable_and_sharpened_by_a_low_temperature():
    assert softmax([], 1.0) == []
    assert sum(softmax([1000.0, 999.0], 1.0)) == pytest.approx(1.0)
    assert softmax([0.9, 0.8], 0.01)[0] > 0.9999
    assert softmax([0.9, 0.8], 1.0)[0] == pytest.approx(1 / (1 + math.exp(-0.1)))


# One example, computed by hand: concepts A, B, D from the index; the memory's neighbours B, C, B, D.
CONCEPTS = [("A", 0.90), ("B", 0.88), ("D", 0.70)]
NEIGHBOURS = [("B", 0.80), ("C", 0.75), ("B", 0.70), ("D", 0.60)]
MIX = {"weight": 0.3, "concept_temperature": 0.05, "memory_temperature": 0.1}
# p_model: exp((0.90, 0.88, 0.70) / 0.05) = e^18 * (1, e^-0.4, e^-4), normalized
P_MODEL = {cid: e / (1 + math.exp(-0.4) + math.exp(-4)) for cid, e in zip("ABD", (1, math.exp(-0.4), math.exp(-4)))}


def test_published_mixture_by_hand():
    """kNN-BioEL's code: each candidate's best neighbour similarity (B 0.80, D 0.60), softmax over the
    candidates at memory_temperature; A got no vote (0); C, retrieved only by the memory, is left out."""
    mixed = mix_scores(CONCEPTS, NEIGHBOURS, **MIX, mixture="published")
    p_knn_b = 1 / (1 + math.exp(-2))  # exp(8) / (exp(8) + exp(6))
    expected = {
        "A": 0.7 * P_MODEL["A"],
        "B": 0.3 * p_knn_b + 0.7 * P_MODEL["B"],
        "D": 0.3 * (1 - p_knn_b) + 0.7 * P_MODEL["D"],
    }
    assert [cid for cid, _ in mixed] == ["B", "A", "D"]
    assert dict(mixed) == pytest.approx(expected)
    assert dict(mixed) == pytest.approx({"A": 0.414536, "B": 0.542110, "D": 0.043353}, abs=1e-6)
    assert sum(p for _, p in mixed) == pytest.approx(1.0)  # a distribution over the candidates
    assert mix_scores(CONCEPTS, NEIGHBOURS, **MIX) == mixed  # the default


def test_union_mixture_by_hand():
    """The earlier mixture: softmax over the four neighbours, the larger share per id, C added."""
    mixed = mix_scores(CONCEPTS, NEIGHBOURS, **MIX, mixture="union")
    z = 1 + math.exp(-0.5) + math.exp(-1) + math.exp(-2)  # exp((0.80, 0.75, 0.70, 0.60) / 0.1) / e^8
    expected = {
        "A": 0.7 * P_MODEL["A"],
        "B": 0.3 * (1 / z) + 0.7 * P_MODEL["B"],  # B's two neighbours: the larger share, not the sum
        "C": 0.3 * (math.exp(-0.5) / z),
        "D": 0.3 * (math.exp(-2) / z) + 0.7 * P_MODEL["D"],
    }
    assert [cid for cid, _ in mixed] == ["B", "A", "C", "D"]
    assert dict(mixed) == pytest.approx(expected)
    assert dict(mixed) == pytest.approx({"A": 0.414536, "B": 0.420068, "C": 0.086247, "D": 0.026837}, abs=1e-6)


def test_published_mixture_without_a_vote_for_any_candidate_keeps_the_ranking():
    mixed = mix_scores([("A", 0.9), ("B", 0.8)], [("Z", 0.99)], weight=0.5, concept_temperature=0.1, memory_temperature=1.0)
    p_a = 1 / (1 + math.exp(-1))
    assert mixed == [("A", pytest.approx(0.25 + 0.5 * p_a)), ("B", pytest.approx(0.25 + 0.5 * (1 - p_a)))]


def test_memory_k_cuts_the_neighbours_before_mixing():
    """MemorySettings.mix uses only the first memory_k neighbours (tune_memory passes more)."""
    concepts, neighbours = [("B", 0.90), ("A", 0.89)], [("A", 0.99), ("B", 0.98)]
    p_b = 1 / (1 + math.exp(-1))  # p_model of B at temperature 0.01
    for mixture in MIXTURES:
        one = dict(MemorySettings(1, 0.5, 0.01, 1.0, mixture).mix(concepts, neighbours))
        assert one == pytest.approx({"A": 0.5 + 0.5 * (1 - p_b), "B": 0.5 * p_b})  # A alone voted
        two = dict(MemorySettings(2, 0.5, 0.01, 1.0, mixture).mix(concepts, neighbours))
        p_knn_a = 1 / (1 + math.exp(-0.01))  # exp(0.99) / (exp(0.99) + exp(0.98))
        assert two == pytest.approx({"A": 0.5 * p_knn_a + 0.5 * (1 - p_b), "B": 0.5 * (1 - p_knn_a) + 0.5 * p_b})
        assert max(one, key=one.get) == "A" and max(two, key=two.get) == "B"


def test_an_unknown_mixture_names_the_key():
    with pytest.raises(SapbertError, match="`memory_mixture`.*'published', 'union'"):
        MemorySettings(memory_mixture="sum")
    with pytest.raises(SapbertError, match="`memory_mixture`"):
        mix_scores(CONCEPTS, NEIGHBOURS, **MIX, mixture="sum")


def test_mix_scores_ranks_by_the_mixture():
    concepts = [("A", 0.90), ("B", 0.89)]
    memory = [("B", 0.95), ("B", 0.94)]
    assert [cid for cid, _ in mix_scores(concepts, memory, weight=0.0, concept_temperature=0.01, memory_temperature=1)] == ["A", "B"]
    assert [cid for cid, _ in mix_scores(concepts, memory, weight=0.5, concept_temperature=0.01, memory_temperature=1)] == ["B", "A"]
    assert mix_scores([], [], weight=0.5, concept_temperature=0.01, memory_temperature=1) == []


def fake_encode(texts):
    """Deterministic vectors: one axis per first letter, so 'apple' and 'avocado' are neighbours."""
    out = numpy.zeros((len(texts), 26), dtype="float32")
    for row, text in enumerate(texts):
        out[row, ord(text[0]) - ord("a")] = 1.0
        out[row, (ord(text[-1]) - ord("a")) % 26] += 0.5
    return out


def test_memory_adds_distinct_entries_and_finds_neighbours(tmp_path):
    memory = MentionMemory(26)
    assert memory.add([("apple", "X1"), ("banana", "X2"), ("apple", "X1")], fake_encode) == 2
    assert memory.add([("apple", "X1"), ("apple", "X3")], fake_encode) == 1  # same text, another id: new
    assert len(memory) == 3
    [hits] = memory.search(fake_encode(["apple"]), 2)
    assert {cid for cid, _ in hits} == {"X1", "X3"} and hits[0][1] == pytest.approx(1.0)
    [near] = memory.neighbours(fake_encode(["bread"]), 1)
    assert near[0][:2] == ("banana", "X2")

    memory.to_disk(tmp_path / "memory")
    loaded = MentionMemory.from_disk(tmp_path / "memory")
    assert (loaded.texts, loaded.ids) == (memory.texts, memory.ids)
    assert MentionMemory.from_bytes(memory.to_bytes()).search(fake_encode(["bread"]), 3) == memory.search(fake_encode(["bread"]), 3)
    assert loaded.add([("banana", "X2")], fake_encode) == 0


def test_an_add_whose_encoder_fails_leaves_the_memory_as_it_was_and_a_retry_adds_the_entries():
    """The entries were marked as held before they were encoded: after an encoder error (out of memory, say) the
    memory held no vector for them, and adding them again added nothing."""
    memory = MentionMemory(26)

    def failing(texts):
        raise MemoryError("out of memory")

    with pytest.raises(MemoryError):
        memory.add([("apple", "X1"), ("banana", "X2")], failing)
    assert len(memory) == 0 and memory.vectors.ntotal == 0
    assert memory.add([("apple", "X1"), ("banana", "X2")], fake_encode) == 2
    assert (memory.texts, memory.ids) == (["apple", "banana"], ["X1", "X2"])


def test_threads_adding_the_same_entries_at_once_store_them_once():
    """Threads sharing a pipeline each passed the "not held yet" check before any stored its entries: 6 threads made
    6 copies, and a query's memory neighbours were one entry several times (an audit)."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    memory = MentionMemory(26)
    entries = [(f"mention {i}", f"X{i}") for i in range(10)]
    barrier = threading.Barrier(6)

    def slow_encode(texts):
        time.sleep(0.05)  # the window another thread's check fell into
        return fake_encode(texts)

    def add(_):
        barrier.wait()
        return memory.add(entries, slow_encode)

    with ThreadPoolExecutor(6) as pool:
        added = sorted(pool.map(add, range(6)))
    assert added == [0, 0, 0, 0, 0, 10] and len(memory) == memory.vectors.ntotal == 10


def test_memory_files_that_are_missing_or_from_different_builds_are_named(tmp_path):
    memory = MentionMemory(26)
    memory.add([("apple", "X1"), ("banana", "X2")], fake_encode)
    memory.to_disk(tmp_path / "a")
    (tmp_path / "a" / "entries.msgpack").unlink()
    with pytest.raises(IndexFormatError, match="entries.msgpack is missing"):
        MentionMemory.from_disk(tmp_path / "a")

    memory.to_disk(tmp_path / "b")
    other = MentionMemory(26)
    other.add([("cherry", "X3")], fake_encode)
    other.to_disk(tmp_path / "c")
    (tmp_path / "c" / "vectors.faiss").replace(tmp_path / "b" / "vectors.faiss")
    with pytest.raises(IndexFormatError, match="1 vectors.*2 entries"):
        MentionMemory.from_disk(tmp_path / "b")
    (tmp_path / "c" / "vectors.faiss").write_bytes(b"not faiss")
    with pytest.raises(IndexFormatError, match="vectors.faiss is corrupt"):
        MentionMemory.from_disk(tmp_path / "c")
    with pytest.raises(IndexFormatError, match="dimension 3 but the mention memory has 26"):
        memory.search(numpy.ones((1, 3), dtype="float32"), 1)

    # vectors of another memory of as many entries: the signature meta.json recorded at save names the file
    same_size = MentionMemory(26)
    same_size.add([("cherry", "X1"), ("damson", "X2")], fake_encode)
    same_size.to_disk(tmp_path / "d")
    memory.to_disk(tmp_path / "e")
    (tmp_path / "d" / "vectors.faiss").replace(tmp_path / "e" / "vectors.faiss")
    with pytest.raises(IndexFormatError, match="vectors.faiss is not the file.* its meta.json was saved with"):
        MentionMemory.from_disk(tmp_path / "e")


# the linker with a memory ---------------------------------------------------------------------------


def linked(nlp, text, mention, label="DISEASE"):
    doc = nlp.make_doc(text)
    start = text.index(mention)
    doc.ents = [doc.char_span(start, start + len(mention), label=label)]
    return nlp(doc).ents[0]


def test_memory_off_or_empty_links_exactly_as_without_it(linker_nlp, tiny_bert, toy_concepts):
    linker = linker_nlp.get_pipe("sapbert_linker")
    before = [linked(linker_nlp, "a liver tumour", "liver tumour")._.kb_ents, linked(linker_nlp, "x nephropathy", "nephropathy")._.kb_ents]
    assert linker.add_mentions([]) == 0 and not linker.memory_active  # an empty memory is no memory
    assert linker.add_mentions([("liver tumour", "D005")]) == 1
    linker.use_memory = False
    after = [linked(linker_nlp, "a liver tumour", "liver tumour")._.kb_ents, linked(linker_nlp, "x nephropathy", "nephropathy")._.kb_ents]
    assert after == before


def test_an_annotated_mention_in_memory_overrides_the_encoder(linker_nlp):
    linker = linker_nlp.get_pipe("sapbert_linker")
    first = linked(linker_nlp, "a liver tumour", "liver tumour")
    assert len(first._.kb_ents) == 5  # k = 5 candidates
    wrong = first._.kb_ents[-1][0]  # the encoder's last candidate
    linker.memory_settings = MemorySettings(memory_k=1, memory_weight=0.9)
    linker.add_mentions([("Liver  Tumour", wrong)])  # normalized like the linker's queries
    ent = linked(linker_nlp, "a liver tumour", "liver tumour")
    assert ent.kb_id_ == wrong
    # p(wrong) = 0.9 * 1 (the only candidate voted for) + 0.1 * exp(s_wrong / 0.01) / sum_i exp(s_i / 0.01)
    scores = numpy.array([s for _, s in first._.kb_ents], dtype="float64")
    shares = numpy.exp((scores - scores.max()) / 0.01)
    assert ent._.kb_ents[0][1] == pytest.approx(0.9 + 0.1 * shares[-1] / shares.sum())
    assert {cid for cid, _ in ent._.kb_ents} == {cid for cid, _ in first._.kb_ents}
    assert sum(p for _, p in ent._.kb_ents) == pytest.approx(1.0)  # probabilities over the candidates
    linker.memory_settings = MemorySettings(memory_weight=0.0)
    assert linked(linker_nlp, "a liver tumour", "liver tumour").kb_id_ == first.kb_id_


def test_memory_mixture_is_saved_and_loaded_with_the_pipeline(tiny_bert, toy_concepts, tmp_path):
    """Under `union` an id only the memory retrieved joins the candidates; under `published` it does not."""
    nlp = spacy.blank("en")
    config = {"model": tiny_bert, "device": "cpu", "k": 2, "memory_k": 1, "memory_weight": 0.5, "memory_mixture": "union"}
    linker = nlp.add_pipe("sapbert_linker", config=config)
    linker.initialize(vocabulary=toy_concepts)
    candidates = {cid for cid, _ in linked(nlp, "a liver tumour", "liver tumour")._.kb_ents}
    outside = next(c.id for c in toy_concepts if c.id not in candidates)
    linker.add_mentions([("liver tumour", outside)])
    assert linked(nlp, "a liver tumour", "liver tumour").kb_id_ == outside
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("sapbert_linker").memory_settings == MemorySettings(1, 0.5, 0.01, 1.0, "union")
    assert linked(loaded, "a liver tumour", "liver tumour").kb_id_ == outside
    published = spacy.load(tmp_path / "nlp", config={"components": {"sapbert_linker": {"memory_mixture": "published"}}})
    assert published.get_pipe("sapbert_linker").memory_settings.memory_mixture == "published"
    ents = linked(published, "a liver tumour", "liver tumour")._.kb_ents
    assert {cid for cid, _ in ents} == candidates and outside not in dict(ents)

    # a copy that left the memory behind is refused: it linked without it, to the index's candidates only
    import shutil

    from spacy_sapbert.errors import IndexFormatError

    shutil.copytree(tmp_path / "nlp", tmp_path / "partial")
    shutil.rmtree(tmp_path / "partial" / "sapbert_linker" / "memory")
    with pytest.raises(IndexFormatError, match=r"saved with a mention memory, but .*partial.sapbert_linker.memory is missing"):
        spacy.load(tmp_path / "partial")


def test_add_to_memory_from_annotated_docs(linker_nlp):
    linker = linker_nlp.get_pipe("sapbert_linker")
    doc = linker_nlp.make_doc("acute renal insufficiency and shock and liver mass or bad heart and kidney failure")
    doc.ents = [
        Span(doc, 0, 3, label="DISEASE", kb_id="D004"),  # an alternative id: stored as OMIM:100
        Span(doc, 4, 5, label="DISEASE", kb_id="NOT-IN-KB"),  # cannot be linked to: left out
        Span(doc, 6, 8, label="DISEASE"),  # no gold id: left out
        Span(doc, 9, 11, label="DISEASE", kb_id="MESH:D001"),  # prefixed MeSH id: stored bare
        Span(doc, 12, 13, label="DISEASE", kb_id="D001|D003"),  # composite: no synonym of either
        Span(doc, 13, 14, label="DISEASE", kb_id="-1"),  # no concept
    ]
    with pytest.warns(CorpusWarning, match=r"1 annotated mention\(s\) left out of the memory.*NOT-IN-KB \(1\)"):
        assert linker.add_to_memory([doc]) == 2
    assert linker.memory.texts == ["acute renal insufficiency", "bad heart"] and linker.memory.ids == ["OMIM:100", "D001"]
    with pytest.warns(CorpusWarning):
        assert linker.add_to_memory([doc]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # composites, "-1" and mentions without an id are left out quietly
        assert linker.add_mentions([("a", "D001|D003"), ("b", "-1"), ("heart failure", "D001")]) == 1


def same_candidates(got, expected):
    return [cid for cid, _ in got] == [cid for cid, _ in expected] and numpy.allclose(
        [p for _, p in got], [p for _, p in expected], atol=1e-5
    )


def test_memory_travels_with_the_pipeline(linker_nlp, tmp_path):
    linker = linker_nlp.get_pipe("sapbert_linker")
    linker.add_mentions([("liver tumour", "D005"), ("kidney trouble", "D006")])
    expected = linked(linker_nlp, "a liver tumour", "liver tumour")._.kb_ents
    linker_nlp.to_disk(tmp_path / "nlp")
    assert (tmp_path / "nlp" / "sapbert_linker" / "memory" / "vectors.faiss").exists()
    loaded = spacy.load(tmp_path / "nlp")
    assert len(loaded.get_pipe("sapbert_linker").memory) == 2
    assert same_candidates(linked(loaded, "a liver tumour", "liver tumour")._.kb_ents, expected)

    copy = spacy.blank("en")
    copy.add_pipe("sapbert_linker", config={"model": "unused", "k": 5}).from_bytes(linker.to_bytes())
    assert copy.get_pipe("sapbert_linker").memory.ids == linker.memory.ids
    assert same_candidates(linked(copy, "a liver tumour", "liver tumour")._.kb_ents, expected)


def test_memory_of_another_dimension_is_refused(linker_nlp, tmp_path):
    linker = linker_nlp.get_pipe("sapbert_linker")
    linker.add_mentions([("liver tumour", "D005")])
    linker_nlp.to_disk(tmp_path / "nlp")
    wrong = MentionMemory(26)
    wrong.add([("apple", "D005")], fake_encode)
    wrong.to_disk(tmp_path / "nlp" / "sapbert_linker" / "memory")
    with pytest.raises(IndexFormatError, match="memory.*dimension 26.*produces 32"):
        spacy.load(tmp_path / "nlp")


@pytest.mark.parametrize(
    "key,value",
    [("memory_weight", 1.5), ("memory_weight", -0.1), ("concept_temperature", 0.0), ("memory_temperature", -1.0), ("memory_k", 0),
     ("memory_mixture", "sum")],
)
def test_bad_memory_settings_name_the_config_key(tiny_bert, key, value):
    nlp = spacy.blank("en")
    with pytest.raises(SapbertError, match=f"`{key}`"):
        nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, key: value})


def test_a_rebuilt_index_keeps_the_memory_of_its_concepts_only(linker_nlp, toy_concepts):
    """build_index over another vocabulary: entries of concepts it still has stay (under the new primary id), the
    others are left out with a warning, so the memory never votes for an id the index does not know."""
    linker = linker_nlp.get_pipe("sapbert_linker")
    linker.add_mentions([("cardiac arrest", "D001"), ("liver tumour", "D002"), ("acute kidney injury", "D004")])
    kept = [c for c in toy_concepts if c.id in ("D001", "OMIM:100")]
    kept[1] = type(kept[1])("D004", kept[1].name, kept[1].synonyms, alt_ids=["OMIM:100"])  # another id made primary
    with pytest.warns(CorpusWarning, match="1 annotated mention.* not in the rebuilt index"):
        linker.build_index(kept)
    assert sorted(zip(linker.memory.texts, linker.memory.ids)) == [("acute kidney injury", "D004"), ("cardiac arrest", "D001")]
    ent = linked(linker_nlp, "She had a liver tumour.", "liver tumour")
    assert ent.kb_id_ in ("D001", "D004") and {cid for cid, _ in ent._.kb_ents} <= {"D001", "D004"}


def test_a_memory_emptied_and_saved_over_its_earlier_save_stays_empty(linker_nlp, tmp_path):
    linker = linker_nlp.get_pipe("sapbert_linker")
    linker.add_mentions([("cardiac arrest", "D001")])
    linker_nlp.to_disk(tmp_path / "pipe")
    linker.memory = None
    notes = tmp_path / "pipe" / "sapbert_linker" / "memory" / "NOTES.md"
    notes.write_text("keep me", encoding="utf8")  # not the memory's: its folder is not removed
    with pytest.raises(SapbertError, match=r"memory holds files that a mention memory does not write \(NOTES.md\); nothing was removed"):
        linker_nlp.to_disk(tmp_path / "pipe")
    assert notes.read_text(encoding="utf8") == "keep me" and (notes.parent / "vectors.faiss").exists()
    notes.unlink()  # the test's own file
    linker_nlp.to_disk(tmp_path / "pipe")
    assert spacy.load(tmp_path / "pipe").get_pipe("sapbert_linker").memory is None


def test_the_threshold_is_a_similarity_also_while_the_memory_has_entries(tiny_bert):
    """The threshold was compared with the mixed probabilities once the memory held any entry: an exact match that
    two concepts share (0.5 each) fell below 0.6 and the mention went unlinked (found by an audit)."""
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline

    nlp = build_pipeline([Concept("D1", "diabetes mellitus", ["dm"]), Concept("D2", "myotonic dystrophy", ["dm"]),
                          Concept("D5", "asthma")], tiny_bert, label=None, linker_config={"threshold": 0.6, "device": "cpu"})
    linker = nlp.get_pipe("sapbert_linker")
    [without] = linker.search_texts(["DM"])
    assert {cid for cid, _ in without[:2]} == {"D1", "D2"} and without[0][1] == pytest.approx(1.0, abs=1e-5)
    linker.add_mentions([("asthma attack", "D5")])  # one unrelated entry: the memory is active
    [mixed] = linker.search_texts(["DM"])
    assert {"D1", "D2"} <= {cid for cid, _ in mixed}  # still candidates (their probabilities, below 0.6, are not cut)
    assert all(score < 0.6 for _, score in mixed)


@pytest.mark.parametrize("mixture", ["published", "union"])
def test_a_memory_neighbour_below_the_threshold_links_nothing(tiny_bert, mixture):
    """The "union" mixture added the memory's ids unchecked: with any entry in the memory every mention was linked,
    whatever the threshold (found by an audit)."""
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline

    nlp = build_pipeline([Concept("D1", "diabetes mellitus"), Concept("D5", "asthma")], tiny_bert, label=None,
                         linker_config={"device": "cpu", "k": 1, "memory_mixture": mixture})
    linker = nlp.get_pipe("sapbert_linker")
    linker.add_mentions([("wheezing attack", "D5")])
    [concepts], [neighbours] = linker.retrieve([linker.normalizer.query("banana bread")], 4)
    assert len(concepts) == 1 and neighbours
    linker.threshold = max(score for _, score in concepts + neighbours) + 1e-4  # above every similarity of the query
    assert linker.search_texts(["banana bread"]) == [[]]
    linker.threshold = min(score for _, score in concepts + neighbours) - 1e-4  # below all: the memory's ids count again
    assert linker.search_texts(["banana bread"])[0]


def test_a_memory_of_another_vocabulary_is_refused_at_load_naming_the_ids(tiny_bert, toy_concepts, tmp_path):
    """A memory copied from a pipeline whose vocabulary had D005 into one without it loaded, and its neighbours became
    links to an id the index cannot name (an audit: 12 of 12 links changed)."""
    import shutil

    from spacy_sapbert.errors import IndexFormatError

    config = {"model": tiny_bert, "device": "cpu", "memory_mixture": "union"}
    for name, concepts in (("with", toy_concepts), ("without", [c for c in toy_concepts if c.id != "D005"])):
        nlp = spacy.blank("en")
        linker = nlp.add_pipe("sapbert_linker", config=config)
        linker.initialize(vocabulary=concepts)
        linker.add_mentions([("heart", "D001")] + ([("low vitamins", "D005")] if name == "with" else []))
        nlp.to_disk(tmp_path / name)
    spacy.load(tmp_path / "without")  # its own memory: fine
    shutil.rmtree(tmp_path / "without" / "sapbert_linker" / "memory")
    shutil.copytree(tmp_path / "with" / "sapbert_linker" / "memory", tmp_path / "without" / "sapbert_linker" / "memory")
    with pytest.raises(IndexFormatError, match=r"memory in .*without.sapbert_linker.memory holds 1 concept id\(s\) the index lacks \(D005\)"):
        spacy.load(tmp_path / "without")
