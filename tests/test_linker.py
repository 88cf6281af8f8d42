import subprocess
import sys

import pytest
import spacy
from spacy.tokens import Span

from conftest import replace_saved_encoder
from spacy_sapbert.errors import IndexFormatError, NotInitializedError, SapbertError
from spacy_sapbert.kb import Concept


def make_doc(nlp, text, mentions, label="DISEASE"):
    doc = nlp.make_doc(text)
    doc.ents = [doc.char_span(text.index(m), text.index(m) + len(m), label=label) for m in mentions]
    return doc


def link(nlp, text, mentions, label="DISEASE"):
    return nlp(make_doc(nlp, text, mentions, label))


def test_exact_name_links_to_its_concept(linker_nlp):
    doc = link(linker_nlp, "Patient with Hepatic Cancer and nephropathy.", ["Hepatic Cancer", "nephropathy"])
    first, second = doc.ents
    assert first.kb_id_ == "D002" and second.kb_id_ == "D003"
    assert first._.kb_ents[0] == ("D002", pytest.approx(1.0, abs=1e-4))
    scores = [s for _, s in first._.kb_ents]
    assert scores == sorted(scores, reverse=True)
    assert len({cid for cid, _ in first._.kb_ents}) == len(first._.kb_ents) <= 5


def test_max_entities_per_mention_and_threshold(tiny_bert, toy_concepts):
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "max_entities_per_mention": 2}).initialize(
        vocabulary=toy_concepts
    )
    doc = link(nlp, "hepatoma here", ["hepatoma"])
    assert len(doc.ents[0]._.kb_ents) == 2
    nlp.get_pipe("sapbert_linker").threshold = 1.01
    doc = link(nlp, "hepatoma here", ["hepatoma"])
    assert doc.ents[0]._.kb_ents == [] and doc.ents[0].kb_id_ == ""


def test_labels_restrict_which_entities_are_linked(tiny_bert, toy_concepts):
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "labels": ["DISEASE"]}).initialize(
        vocabulary=toy_concepts
    )
    doc = nlp.make_doc("hepatoma and aspirin")
    doc.ents = [
        Span(doc, 0, 1, label="DISEASE"),
        Span(doc, 2, 3, label="CHEMICAL", kb_id="KEEP"),
    ]
    doc = nlp(doc)
    assert doc.ents[0].kb_id_ == "D002"
    assert doc.ents[1].kb_id_ == "KEEP" and doc.ents[1]._.kb_ents is None


def test_alternative_ids_and_concept_lookup(linker_nlp):
    linker = linker_nlp.get_pipe("sapbert_linker")
    assert linker.concept("D004").id == "OMIM:100"
    assert linker.concept("D003").xrefs == ["UMLS:C0022658"]


def test_empty_docs_docs_without_ents_long_and_non_ascii_mentions(linker_nlp):
    long_mention = "chronic " * 40 + "kidney disease"
    docs = [
        linker_nlp.make_doc(""),
        linker_nlp.make_doc("No entities here."),
        make_doc(linker_nlp, f"He has {long_mention}.", [long_mention]),
        make_doc(linker_nlp, "Morbus Günther – Nierenerkrankung", ["Nierenerkrankung"]),
    ]
    out = list(linker_nlp.pipe(docs))
    assert out[0].ents == () and out[1].ents == ()
    assert out[2].ents[0]._.kb_ents and out[2].ents[0].kb_id_
    assert out[3].ents[0]._.kb_ents and out[3].ents[0].kb_id_


def test_pipe_equals_call_and_encodes_each_distinct_mention_once(linker_nlp, monkeypatch):
    texts = [("hepatoma and renal disease", ["hepatoma", "renal disease"]), ("hepatoma again", ["hepatoma"])] * 5
    one_by_one = [link(linker_nlp, t, m) for t, m in texts]
    linker = linker_nlp.get_pipe("sapbert_linker")
    encoded = []
    original = linker.encoder.encode

    def spy(strings, **kwargs):
        encoded.extend(strings)
        return original(strings, **kwargs)

    monkeypatch.setattr(linker.encoder, "encode", spy)
    linker.vector_cache.clear()  # the calls above cached both mentions
    piped = list(linker_nlp.pipe([make_doc(linker_nlp, t, m) for t, m in texts], batch_size=100))
    assert sorted(encoded) == ["hepatoma", "renal disease"]
    for a, b in zip(one_by_one, piped):
        assert [(e.kb_id_, e._.kb_ents) for e in a.ents] == [(e.kb_id_, e._.kb_ents) for e in b.ents]


def linked_after_our_detector(linker_nlp):
    """sapbert_abbreviations then the linker on a text whose second "HC" (for "Hepatic cancer") is the entity."""
    linker_nlp.add_pipe("sapbert_abbreviations", first=True)
    text = "Hepatic cancer (HC) was treated. Later HC recurred."
    doc = linker_nlp.make_doc(text)
    doc.ents = [doc.char_span(text.rindex("HC"), text.rindex("HC") + 2, label="DISEASE")]
    for _, proc in linker_nlp.pipeline:
        doc = proc(doc)
    return doc


def test_long_form_from_the_abbreviation_detector_is_searched(linker_nlp):
    doc = linked_after_our_detector(linker_nlp)
    assert doc.ents[0]._.long_form == "Hepatic cancer"
    assert doc.ents[0].kb_id_ == "D002" and doc.ents[0]._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-4)
    linker_nlp.get_pipe("sapbert_linker").use_long_form = False
    assert linker_nlp.get_pipe("sapbert_linker").query_text(doc.ents[0]) == "HC"


def test_a_docs_definitions_are_read_once_for_all_its_entities_and_again_when_they_change(monkeypatch):
    """Each entity's long form built the doc's text anew: linking a long document with thousands of entities took
    quadratic time (found by an audit; benchmarks/bench_long_document.py measures it)."""
    from spacy.tokens import Span

    from spacy_sapbert import abbreviations

    nlp = spacy.blank("en")
    detector = nlp.add_pipe("sapbert_abbreviations")
    doc = detector(nlp.make_doc("Heart failure (HF) was seen. " + " ".join(["HF and HF again."] * 30)))
    built, original = [], abbreviations.Abbreviation
    monkeypatch.setattr(abbreviations, "Abbreviation", lambda *parts: built.append(parts) or original(*parts))
    spans = [Span(doc, i, i + 1) for i, token in enumerate(doc) if token.text == "HF"]
    assert {abbreviations.long_form_of(span) for span in spans[1:]} == {"Heart failure"} and len(built) == 1
    doc._.set(abbreviations.OFFSETS_ATTR, [])  # another detector's result: no definition
    assert abbreviations.long_form_of(spans[1]) is None


def test_a_failing_batch_goes_to_the_pipelines_error_handler_in_pipe_as_in_call(linker_nlp, monkeypatch):
    """nlp.set_error_handler was used by nlp(doc) but not by nlp.pipe: the linker's pipe raised (found by an audit)."""
    linker = linker_nlp.get_pipe("sapbert_linker")

    def broken(docs):
        raise SapbertError("broken batch")

    monkeypatch.setattr(linker, "predict", broken)
    with pytest.raises(SapbertError, match="broken batch"):  # the default handler raises
        list(linker_nlp.pipe(["Hepatoma."]))
    handled = []
    linker_nlp.set_error_handler(lambda name, proc, docs, error: handled.append((name, len(docs), str(error))))
    try:
        list(linker_nlp.pipe(["Hepatoma.", "Kidney disease."]))
        linker_nlp("Hepatoma.")
    finally:
        linker_nlp.set_error_handler(spacy.util.raise_error)
    assert handled == [("sapbert_linker", 2, "broken batch"), ("sapbert_linker", 1, "broken batch")]


def test_use_before_initialize_is_a_clear_error(tiny_bert):
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert})
    with pytest.raises(NotInitializedError, match="initialize"):
        link(nlp, "hepatoma", ["hepatoma"])
    with pytest.raises(SapbertError, match=r"vocabulary.*\[initialize.components.sapbert_linker\]"):
        nlp.initialize()


def test_vocabulary_in_the_initialize_block_is_read_by_nlp_initialize(tiny_bert, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\n", encoding="utf8")
    config = spacy.util.load_config_from_str(
        f"""
[nlp]
lang = "en"
pipeline = ["sapbert_linker"]

[components]

[components.sapbert_linker]
factory = "sapbert_linker"
model = "{tiny_bert}"

[initialize]

[initialize.components]

[initialize.components.sapbert_linker]

[initialize.components.sapbert_linker.vocabulary]
@misc = "spacy-sapbert.Vocabulary.v1"
path = "{vocab}"
"""
    )
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    assert "vocabulary" not in nlp.config["components"]["sapbert_linker"]
    nlp.initialize()
    assert nlp.get_pipe("sapbert_linker").index is not None
    assert link(nlp, "cardiac failure", ["cardiac failure"]).ents[0].kb_id_ == "D1"


def test_build_pipeline_records_its_vocabulary_loader_for_nlp_initialize(tiny_bert, tmp_path):
    from spacy_sapbert.pipeline import build_pipeline

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\n", encoding="utf8")
    loader = {"@misc": "spacy-sapbert.Vocabulary.v1", "path": str(vocab)}
    nlp = build_pipeline([Concept("D1", "Heart failure")], tiny_bert, label=None, vocabulary_loader=loader)
    nlp.to_disk(tmp_path / "pipe")
    config = spacy.util.load_config(tmp_path / "pipe" / "config.cfg")
    assert config["initialize"]["components"]["sapbert_linker"]["vocabulary"] == loader
    rebuilt = spacy.util.load_model_from_config(config, auto_fill=True)
    rebuilt.initialize()  # reads the vocabulary file, which has D2 where the built pipeline had only D1
    assert link(rebuilt, "hepatoma", ["hepatoma"]).ents[0].kb_id_ == "D2"


def test_vocabulary_is_no_component_config_key(tiny_bert):
    with pytest.raises(Exception, match="vocabulary"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "vocabulary": None})


def links(doc):
    return [(e.text, e.kb_id_, [(c, round(s, 5)) for c, s in e._.kb_ents]) for e in doc.ents]


def test_disk_round_trip_gives_identical_links_without_rebuilding(linker_nlp, tmp_path, monkeypatch):
    text, mentions = "hepatoma and heart decompensation", ["hepatoma", "heart decompensation"]
    before = links(link(linker_nlp, text, mentions))
    linker_nlp.to_disk(tmp_path / "pipe")
    import spacy_sapbert.index

    monkeypatch.setattr(spacy_sapbert.index.ConceptIndex, "build", None)  # loading must not rebuild
    loaded = spacy.load(tmp_path / "pipe")
    assert links(link(loaded, text, mentions)) == before


def test_round_trips_keep_every_link_score_and_concept(linker_nlp, tiny_bert, toy_concepts, tmp_path):
    """Every name of the vocabulary and some unseen mentions link identically (ids and exact scores)
    after a disk and a bytes round trip, and every id and alternative id gives the same Concept."""
    mentions = [name for concept in toy_concepts for name in concept.names] + ["liver tumour", "ARF", "kidney"]
    text = " | ".join(mentions)

    def all_links(nlp):
        doc = nlp.make_doc(text)
        starts = [text.index(f"{m}", sum(len(x) + 3 for x in mentions[:i])) for i, m in enumerate(mentions)]
        doc.ents = [doc.char_span(start, start + len(m), label="DISEASE") for start, m in zip(starts, mentions)]
        return [(e.text, e.kb_id_, e._.kb_ents) for e in nlp(doc).ents]

    linker = linker_nlp.get_pipe("sapbert_linker")
    ids = [i for concept in toy_concepts for i in concept.all_ids] + ["nope"]
    before = all_links(linker_nlp), [linker.concept(i) for i in ids]
    assert before[1][ids.index("D004")] == toy_concepts[3]
    linker_nlp.to_disk(tmp_path / "pipe")
    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 5}).from_bytes(linker.to_bytes())
    for loaded in (spacy.load(tmp_path / "pipe"), from_bytes):
        loaded_linker = loaded.get_pipe("sapbert_linker")
        assert (all_links(loaded), [loaded_linker.concept(i) for i in ids]) == before


def test_bytes_round_trip(linker_nlp, tiny_bert):
    text, mentions = "hepatoma and kidney disorder", ["hepatoma", "kidney disorder"]
    before = links(link(linker_nlp, text, mentions))
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert})
    nlp.get_pipe("sapbert_linker").from_bytes(linker_nlp.get_pipe("sapbert_linker").to_bytes())
    assert links(link(nlp, text, mentions)) == before


def test_spacy_load_works_through_the_entry_point_without_importing_the_package(linker_nlp, tmp_path):
    linker_nlp.to_disk(tmp_path / "pipe")
    script = (
        "import sys, spacy\n"
        "assert 'spacy_sapbert' not in sys.modules\n"
        f"nlp = spacy.load({str(tmp_path / 'pipe')!r})\n"
        "doc = nlp.make_doc('hepatoma'); doc.ents = [doc.char_span(0, 8, label='X')]\n"
        "print(nlp(doc).ents[0].kb_id_)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "D002"


def test_missing_index_file_in_a_saved_pipeline_is_named(linker_nlp, tmp_path):
    linker_nlp.to_disk(tmp_path / "pipe")
    (tmp_path / "pipe" / "sapbert_linker" / "index" / "vectors.faiss").unlink()
    with pytest.raises(IndexFormatError, match="vectors.faiss"):
        spacy.load(tmp_path / "pipe")


def test_index_and_encoder_of_different_dimension_are_refused(linker_nlp, tmp_path, tiny_bert_48):
    linker_nlp.to_disk(tmp_path / "pipe")
    replace_saved_encoder(tmp_path / "pipe", tiny_bert_48)
    with pytest.raises(IndexFormatError, match="dimension 32.*produces 48"):
        spacy.load(tmp_path / "pipe")


def test_bad_config_values_name_the_key(tiny_bert):
    nlp = spacy.blank("en")
    with pytest.raises(SapbertError, match="max_entities_per_mention"):
        nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "max_entities_per_mention": 0})


def test_a_quoted_number_in_the_config_names_its_key(tiny_bert, tmp_path):
    """spaCy checks a config's types but passes a quoted number on as a string; the linker names the key."""
    for key, value in (("k", "3"), ("threshold", "0.5"), ("memory_weight", "0.2"), ("rerank_k", "2")):
        with pytest.raises(SapbertError, match=f"config key `{key}` must be (int|float), got '{value}' \\(str\\)"):
            spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, key: value})
    linker = spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "k": 3, "threshold": 1, "memory_weight": 0})
    assert (linker.k, linker.threshold) == (3, 1)  # an int where a float is expected is a number


def test_punctuation_only_spans_are_not_linked(linker_nlp, monkeypatch):
    encoded = []
    linker = linker_nlp.get_pipe("sapbert_linker")
    real_encode = linker.encoder.encode
    monkeypatch.setattr(linker.encoder, "encode", lambda texts, **kw: encoded.extend(texts) or real_encode(texts, **kw))
    doc = link(linker_nlp, "nephropathy ( -- ) here", ["nephropathy", "(", "--"])
    assert [(e.text, e.kb_id_, e._.kb_ents) for e in doc.ents[1:]] == [("(", "", []), ("--", "", [])]
    assert doc.ents[0].kb_id_ == "D003" and encoded == ["nephropathy"]


@spacy.Language.component("test_scispacy_style_abbreviations")
def scispacy_style_abbreviations(doc):
    """Stand-in for scispacy's abbreviation_detector: every "HC" gets `_.long_form` = the Span "Hepatic cancer"."""
    start = doc.text.index("Hepatic cancer")
    long_form = doc.char_span(start, start + len("Hepatic cancer"))
    for token in doc:
        if token.text == "HC":
            doc[token.i : token.i + 1]._.long_form = long_form
    return doc


def restore_extension(cls, name: str, saved) -> None:
    """Put back an extension as get_extension returned it (None: there was none)."""
    if cls.has_extension(name):
        cls.remove_extension(name)
    if saved is not None:
        default, method, getter, setter = saved
        kwargs = {"method": method} if method else {"getter": getter, "setter": setter} if getter else {"default": default}
        cls.set_extension(name, **kwargs)


@pytest.fixture
def span_long_form_extension():
    """`span._.long_form` as scispacy declares it (a plain attribute, default None); the previous
    `span._.long_form` and `doc._.abbreviations` (which scispacy's detector replaces) restored after."""
    from spacy.tokens import Doc

    saved = Span.get_extension("long_form"), Doc.get_extension("abbreviations")
    Span.set_extension("long_form", default=None, force=True)
    yield
    restore_extension(Span, "long_form", saved[0])
    restore_extension(Doc, "abbreviations", saved[1])


def link_abbreviation_after(linker_nlp, detector: str):
    """Run `detector` then the linker on a text whose second "HC" is the entity; the linked doc and entity."""
    linker_nlp.add_pipe(detector, first=True)
    text = "Hepatic cancer (HC) was treated. Later HC recurred."
    doc = linker_nlp.make_doc(text)
    doc.ents = [doc.char_span(text.rindex("HC"), text.rindex("HC") + 2, label="DISEASE")]
    for _, proc in linker_nlp.pipeline:
        doc = proc(doc)
    [ent] = doc.ents
    assert isinstance(ent._.long_form, Span) and ent._.long_form.text == "Hepatic cancer"
    assert ent.kb_id_ == "D002" and ent._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-4)
    return doc, ent


def test_a_span_long_form_as_scispacy_sets_it_is_searched_as_its_text(linker_nlp, span_long_form_extension):
    doc, ent = link_abbreviation_after(linker_nlp, "test_scispacy_style_abbreviations")
    linker = linker_nlp.get_pipe("sapbert_linker")
    assert linker.query_text(ent) == "Hepatic cancer"
    assert linker.add_to_memory([doc]) == 1 and linker.memory.texts == ["hepatic cancer"]


def test_our_long_forms_hold_when_scispacy_registers_its_long_form_attribute(linker_nlp, span_long_form_extension):
    """scispacy's detector re-registers `span._.long_form` as a plain attribute (default None) in any pipeline of the
    process: sapbert_abbreviations' long forms were then lost and the short form was searched."""
    [ent] = linked_after_our_detector(linker_nlp).ents
    assert ent._.long_form is None  # scispacy's attribute, unset
    assert linker_nlp.get_pipe("sapbert_linker").query_text(ent) == "Hepatic cancer"
    assert ent.kb_id_ == "D002" and ent._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-4)


def test_scispacy_abbreviation_detector_long_forms_are_linked(linker_nlp, span_long_form_extension):
    pytest.importorskip("scispacy.abbreviation")
    link_abbreviation_after(linker_nlp, "abbreviation_detector")


def test_is_a_spacy_pipe_that_declares_what_it_requires_and_assigns(linker_nlp):
    from spacy.pipeline import Pipe

    linker = linker_nlp.get_pipe("sapbert_linker")
    assert isinstance(linker, Pipe) and list(linker.pipe([])) == [] and linker.predict([]) == []
    analysis = linker_nlp.analyze_pipes()
    assert analysis["summary"]["sapbert_linker"]["requires"] == ["doc.ents"]
    assert analysis["summary"]["sapbert_linker"]["assigns"] == ["token.ent_kb_id", "span._.kb_ents"]
    assert analysis["problems"]["sapbert_linker"] == ["doc.ents"]  # nothing before it sets doc.ents
    linker_nlp.add_pipe("entity_ruler", first=True)
    assert linker_nlp.analyze_pipes()["problems"]["sapbert_linker"] == []


DISEASES = [Concept("D1", "Heart failure", ["cardiac failure"]), Concept("D2", "Liver cancer", ["hepatoma"])]
CHEMICALS = [Concept("C1", "Aspirin", ["acetylsalicylic acid"]), Concept("C2", "Ibuprofen", ["advil"])]


def two_linker_pipeline(tiny_bert):
    """Disease entities linked to a disease vocabulary, Chemical entities to a chemical one."""
    nlp = spacy.blank("en")
    for name, label, concepts in (("disease_linker", "Disease", DISEASES), ("chemical_linker", "Chemical", CHEMICALS)):
        config = {"model": tiny_bert, "device": "cpu", "labels": [label]}
        nlp.add_pipe("sapbert_linker", name=name, config=config).initialize(vocabulary=concepts)
    return nlp


def disease_and_chemical(nlp):
    doc = nlp.make_doc("hepatoma after advil")
    doc.ents = [Span(doc, 0, 1, label="Disease"), Span(doc, 2, 3, label="Chemical")]
    return doc


def test_two_linkers_for_disjoint_labels_share_a_pipeline(tiny_bert, tmp_path, one_thread):
    from spacy_sapbert.pipeline import find_linkers

    nlp = two_linker_pipeline(tiny_bert)
    assert [name for name, _ in find_linkers(nlp)] == ["disease_linker", "chemical_linker"]
    only_diseases = nlp.get_pipe("disease_linker")(disease_and_chemical(nlp))
    assert [(e.kb_id_, e._.kb_ents is None) for e in only_diseases.ents] == [("D2", False), ("", True)]
    only_chemicals = nlp.get_pipe("chemical_linker")(disease_and_chemical(nlp))
    assert [(e.kb_id_, e._.kb_ents is None) for e in only_chemicals.ents] == [("", True), ("C2", False)]

    doc = nlp(disease_and_chemical(nlp))
    disease, chemical = doc.ents
    assert disease.kb_id_ == "D2" and {cid for cid, _ in disease._.kb_ents} <= {"D1", "D2"}
    assert chemical.kb_id_ == "C2" and {cid for cid, _ in chemical._.kb_ents} <= {"C1", "C2"}

    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    assert [name for name, _ in find_linkers(loaded)] == ["disease_linker", "chemical_linker"]
    assert loaded.get_pipe("chemical_linker").labels == ("Chemical",)
    assert links(loaded(disease_and_chemical(loaded))) == links(doc)


def test_each_of_two_linkers_scores_its_own_labels(tiny_bert, one_thread):
    from spacy.training import Example

    nlp = two_linker_pipeline(tiny_bert)
    gold = disease_and_chemical(nlp)
    gold.ents = [Span(gold, 0, 1, label="Disease", kb_id="D2"), Span(gold, 2, 3, label="Chemical", kb_id="C1")]
    scores = nlp.evaluate([Example(disease_and_chemical(nlp), gold)], per_component=True)
    assert scores["disease_linker"]["nel_micro_f"] == 1.0 and scores["chemical_linker"]["nel_micro_f"] == 0.0
    assert set(scores["chemical_linker"]["nel_f_per_type"]) == {"Chemical"}


def test_commands_find_one_linker_by_factory_or_say_which_option_picks_one(tiny_bert, linker_nlp):
    from spacy_sapbert.pipeline import find_linkers, the_linker

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    with pytest.raises(SapbertError, match=r"no sapbert_linker component; its components: \['sentencizer'\]"):
        the_linker(nlp)
    assert the_linker(linker_nlp) is linker_nlp.get_pipe("sapbert_linker")
    renamed = spacy.blank("en")
    renamed.add_pipe("sapbert_linker", name="my_linker", config={"model": tiny_bert})
    assert [name for name, _ in find_linkers(renamed)] == ["my_linker"] and the_linker(renamed).name == "my_linker"
    two = two_linker_pipeline(tiny_bert)
    with pytest.raises(SapbertError, match=r"2 sapbert_linker components \['disease_linker', 'chemical_linker'\]; choose one with --component NAME"):
        the_linker(two)
    assert the_linker(two, "chemical_linker").labels == ("Chemical",)
    with pytest.raises(SapbertError, match="--component 'sentencizer' is not a sapbert_linker"):
        the_linker(two, "sentencizer")


def test_concept_definitions_survive_the_saved_pipeline(tmp_path, tiny_bert):
    import spacy

    from spacy_sapbert.kb import Concept, KnowledgeBase
    from spacy_sapbert.pipeline import build_pipeline, save_pipeline

    merged = KnowledgeBase([Concept("D1", "Heart failure"), Concept("D1", "", ["cardiac failure"], definition="The heart fails to pump.")])
    nlp = build_pipeline(list(merged) + [Concept("D2", "Hepatoma")], tiny_bert, label=None, linker_config={"device": "cpu"})
    save_pipeline(nlp, tmp_path / "pipe")
    linker = spacy.load(tmp_path / "pipe").get_pipe("sapbert_linker")
    assert linker.concept("D1").definition == "The heart fails to pump." and linker.concept("D2").definition == ""


def test_types_and_types_by_label_restrict_the_candidates(tiny_bert, toy_concepts, tmp_path):
    import spacy

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={
        "model": tiny_bert, "device": "cpu", "k": 5, "types": ["T047", "T191"], "types_by_label": {"Cancer": ["T191"]},
    })
    linker.initialize(vocabulary=toy_concepts)
    [hits] = linker.search_texts(["renal failure"], types=linker.allowed_types("Disease"))
    assert {cid for cid, _ in hits} == {"D001", "D002"}  # k is 5, but only two concepts have those types
    doc = nlp.make_doc("hepatoma and heart failure")
    doc.ents = [doc.char_span(0, 8, label="Cancer"), doc.char_span(13, 26, label="Disease")]
    doc = linker(doc)
    assert [cid for cid, _ in doc.ents[0]._.kb_ents] == ["D002"]
    assert {cid for cid, _ in doc.ents[1]._.kb_ents} == {"D001", "D002"}
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe").get_pipe("sapbert_linker")
    assert loaded.types == ("T047", "T191") and loaded.types_by_label == {"Cancer": ("T191",)}


def test_sources_restrict_the_candidates_together_with_types(tiny_bert, toy_concepts, tmp_path):
    import dataclasses

    import spacy

    from spacy_sapbert.errors import SapbertError

    sources = {"D001": ["MSH"], "D002": ["MSH", "NCI"], "D003": ["SNOMEDCT_US"], "OMIM:100": ["OMIM"]}
    concepts = [dataclasses.replace(c, sources=sources.get(c.id, [])) for c in toy_concepts]
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 5, "sources": ["MSH", "OMIM"]})
    linker.initialize(vocabulary=concepts)
    [hits] = linker.search_texts(["kidney failure"])
    assert {cid for cid, _ in hits} == {"D001", "D002", "OMIM:100"}  # k is 5: every concept of those sources
    [hits] = linker.search_texts(["kidney failure"], types=["T191"])
    assert [cid for cid, _ in hits] == ["D002"]  # of a source and of a type
    nlp.to_disk(tmp_path / "pipe")
    assert spacy.load(tmp_path / "pipe").get_pipe("sapbert_linker").sources == ("MSH", "OMIM")
    with pytest.raises(SapbertError, match=r"config key `sources` names the source 'SNOMEDCT'.*close matches: SNOMEDCT_US"):
        spacy.load(tmp_path / "pipe", config={"components": {"sapbert_linker": {"sources": ["SNOMEDCT"]}}})


def test_the_union_memory_mixture_adds_no_concept_of_a_type_left_out(tiny_bert, toy_concepts):
    import spacy

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={
        "model": tiny_bert, "device": "cpu", "k": 2, "types": ["T047"], "memory_mixture": "union", "memory_weight": 0.9,
    })
    linker.initialize(vocabulary=toy_concepts)
    doc = nlp.make_doc("liver tumour")
    doc.ents = [doc.char_span(0, 12, label="Disease", kb_id="D002")]  # a memory entry of a T191 concept
    assert linker.add_to_memory([doc]) == 1
    [hits] = linker.search_texts(["liver tumour"], types=["T047"])
    assert [cid for cid, _ in hits] == ["D001"]
    [unfiltered] = linker.search_texts(["liver tumour"])
    assert "D002" in [cid for cid, _ in unfiltered]  # the memory's vote does add it without the filter


def test_the_kb_view_answers_with_scispacys_names(linker_nlp):
    kb = linker_nlp.get_pipe("sapbert_linker").kb
    assert kb.cui_to_entity["D004"].id == "OMIM:100" and "D004" in kb.cui_to_entity and "nope" not in kb.cui_to_entity
    assert kb.cui_to_entity["D002"].synonyms == ["hepatic cancer", "hepatoma"]
    assert "MESH:D002" in kb.cui_to_entity and kb.cui_to_entity["MESH:D002"].id == "D002"  # "in" as [] finds it
    assert len(kb.cui_to_entity) == 6 and list(kb.cui_to_entity)[:2] == ["D001", "D002"]
    assert kb.alias_to_cuis["Renal Disease"] == {"D003", "D006"}  # normalized before the look-up; a shared name
    assert kb.alias_to_cuis["ARF"] == {"OMIM:100"} and "no such name" not in kb.alias_to_cuis
    with pytest.raises(KeyError):
        kb.alias_to_cuis["no such name"]
    assert "hepatoma" in set(kb.alias_to_cuis)


def test_an_unknown_type_is_an_error_with_close_matches_and_a_strict_filter_gives_no_candidates(tiny_bert, toy_concepts, tmp_path):
    import spacy

    from spacy_sapbert.encoder import Encoder
    from spacy_sapbert.errors import SapbertError

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "types": ["T04"]})
    encoded = []
    original = Encoder.encode
    with pytest.MonkeyPatch.context() as patch:  # said before the vocabulary is encoded (minutes at UMLS size), not after
        patch.setattr(Encoder, "encode", lambda self, texts, **kw: encoded.append(len(texts)) or original(self, texts, **kw))
        with pytest.raises(SapbertError, match=r"config key `types` names the type 'T04'.*close matches: T047"):
            linker.initialize(vocabulary=iter(toy_concepts))
    assert encoded == []
    linker.types = ()
    linker.initialize(vocabulary=toy_concepts)
    nlp.to_disk(tmp_path / "pipe")
    with pytest.raises(SapbertError, match="`types_by_label` names the type 'T191x'"):
        spacy.load(tmp_path / "pipe", config={"components": {"sapbert_linker": {"types": [], "types_by_label": {"Cancer": ["T191x"]}}}})
    # the filter answers with concepts of the type or with nothing, never with another concept
    doc = nlp.make_doc("heart failure")
    doc.ents = [doc.char_span(0, 13, label="Disease")]
    linker.types = ("T191",)
    assert [cid for cid, _ in linker(doc).ents[0]._.kb_ents] == ["D002"]
    linker.threshold = 1.0
    doc.ents = [doc.char_span(0, 13, label="Disease")]
    assert linker(doc).ents[0]._.kb_ents == [] and doc.ents[0].kb_id_ == ""


def test_kb_ents_read_back_from_a_docbin_in_a_new_process_after_importing_the_package(linker_nlp, tmp_path):
    """The extension is registered by `import spacy_sapbert`, not only when a linker is made: docs saved with
    DocBin(store_user_data=True) and read in another process keep their candidates."""
    from spacy.tokens import DocBin

    doc = linker_nlp.make_doc("hepatoma and heart decompensation")
    doc.ents = [doc.char_span(0, 8, label="DISEASE")]
    linked = linker_nlp(doc).ents[0]._.kb_ents
    DocBin(docs=[doc], store_user_data=True).to_disk(tmp_path / "linked.spacy")
    script = (
        "import spacy, spacy_sapbert\n"
        "from spacy.tokens import DocBin\n"
        f"[doc] = DocBin().from_disk({str(tmp_path / 'linked.spacy')!r}).get_docs(spacy.blank('en').vocab)\n"
        "print(repr([(c, round(s, 5)) for c, s in doc.ents[0]._.kb_ents]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == repr([(c, round(s, 5)) for c, s in linked])


def test_a_config_pooling_other_than_the_model_declares_warns_naming_the_key(tiny_bert, toy_concepts, tmp_path):
    """A sentence-transformers folder (MiniLM) declares mean pooling; the component's default is cls (SapBERT): the
    user who swapped the model in without setting pooling hears of it."""
    import shutil
    import warnings

    from spacy_sapbert.encoder import write_pooling_files
    from spacy_sapbert.errors import ConfigWarning

    shutil.copytree(tiny_bert, tmp_path / "mean-model")
    write_pooling_files(tmp_path / "mean-model", "mean", 25, 32)
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(tmp_path / "mean-model"), "device": "cpu"})
    with pytest.warns(ConfigWarning, match=r"config key `pooling` is 'cls', but the model .*mean-model was trained with pooling 'mean'"):
        linker.initialize(lambda: [], nlp=nlp, vocabulary=toy_concepts)
    for model, pooling in ((str(tmp_path / "mean-model"), "mean"), (tiny_bert, "cls")):
        nlp = spacy.blank("en")
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConfigWarning)
            nlp.add_pipe("sapbert_linker", config={"model": model, "device": "cpu", "pooling": pooling}).initialize(
                lambda: [], nlp=nlp, vocabulary=toy_concepts)


def test_a_mesh_id_with_its_prefix_finds_its_concept(linker_nlp):
    """MEDIC and PubTator write "MESH:D001"; the readers name the concept D001 (as the scorer and add_mentions read it)."""
    linker = linker_nlp.get_pipe("sapbert_linker")
    assert linker.concept("MESH:D001").id == linker.concept("mesh:D001").id == "D001"
    assert linker.known_primary_id("MESH:D004") == "OMIM:100"  # an alternative id, prefixed
    assert linker.concept("MESH:D999") is None and linker.concept("OMIM:100").id == "OMIM:100"


def test_linking_keeps_the_ner_annotation_of_tokens_outside_entities(linker_nlp):
    """set_annotations reassigned doc.ents, so tokens the NER left missing or blocked became outside ("O")."""
    doc = linker_nlp.make_doc("heart failure after aspirin today")
    doc.set_ents([Span(doc, 0, 2, label="DISEASE")], blocked=[doc[4:5]], default="missing")
    before = [(token.ent_iob, token.ent_type) for token in doc]
    doc = linker_nlp.get_pipe("sapbert_linker")(doc)
    assert [(token.ent_iob, token.ent_type) for token in doc] == before  # [B, I, missing, missing, blocked]
    assert doc.ents[0].kb_id_ and doc.ents[0]._.kb_ents


@pytest.mark.parametrize("label", ["a:b", "x=y", "#Chem", ";X", "[Y]", " X", "X ", ""])
def test_a_types_by_label_label_that_a_config_cfg_cannot_hold_is_refused_at_add_pipe(tiny_bert, label):
    """Linked and saved, such a pipeline could not be loaded again (the section read "a:b = [...]" as the key "a"), or
    loaded without that label's types ("#Chem" is a comment; " X" comes back as "X"): other links, no error."""
    import re

    import spacy

    with pytest.raises(SapbertError, match=re.escape(f"`types_by_label` has the label {label!r}")):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "types_by_label": {label: ["T191"]}})


def test_labels_that_a_config_cfg_reads_back_are_kept():
    from spacy_sapbert.linker import label_survives_config

    assert all(label_survives_config(label) for label in ("Chemical", "B-PER", "x.y", "x y", "Ä", "a'b", "%x", "1"))


def test_an_exact_name_wins_its_tie_with_names_cut_alike_at_max_length(tiny_bert):
    """Names that agree in their first max_length word pieces have one vector; the faiss row order picked the concept,
    so a mention written exactly as one concept's name could link to another (MEDIC's "..., type A, 5" and "6")."""
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline

    concepts = [Concept(f"D{n}", f"heart failure of type {n}") for n in range(1, 7)] + [Concept("X", "asthma")]
    nlp = build_pipeline(concepts, tiny_bert, label=None, linker_config={"device": "cpu", "k": 3, "max_length": 4})
    linker = nlp.get_pipe("sapbert_linker")
    for n in (1, 4, 6):
        [hits] = linker.search_texts([f"heart failure of type {n}"])
        assert hits[0][0] == f"D{n}" and len(hits) == 3
        assert hits[0][1] == pytest.approx(hits[1][1], abs=1e-5)  # still a tie in score: one vector
    [other] = linker.search_texts(["heart failure of type 9"])  # no exact name: a tie among the six
    assert other[0][0] in {f"D{n}" for n in range(1, 7)}
