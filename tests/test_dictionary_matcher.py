"""The dictionary matcher finds what spaCy's EntityRuler over the same names finds, and stays small when saved."""
import itertools

import numpy
import pytest
import spacy

from conftest import shared_file
from spacy_sapbert.dictionary_matcher import name_key, prefix_hashes, windows_of
from spacy_sapbert.errors import IndexFormatError
from spacy_sapbert.kb import Concept
from spacy_sapbert.pipeline import add_dictionary_matcher, dictionary_patterns
from spacy_sapbert.readers import read_vocabulary
from spacy_sapbert.readers.corpora import read_pubtator


def entities(nlp, texts):
    return [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)]


def test_it_finds_exactly_what_an_entity_ruler_over_the_same_names_finds():
    """It replaced an EntityRuler (6 KB a name, all tokenized again at every load) in build-index and assemble."""
    documents = list(itertools.islice(read_pubtator(shared_file("ncbi-disease", "NCBIdevelopset_corpus.txt")), 40))
    golds = {m.gold for d in documents for m in d.mentions}
    medic = list(read_vocabulary(shared_file("medic", "medic_06Jul2012.txt"), "auto"))
    concepts = [c for c in medic if c.id in golds or c.id.replace("MESH:", "") in golds] + medic[:3000]
    ours = spacy.blank("en")
    add_dictionary_matcher(ours, concepts, label="Disease")
    ruler = spacy.blank("en")
    ruler.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"}).add_patterns(
        dictionary_patterns(concepts, "Disease", stop_words=ruler.Defaults.stop_words))
    texts = [d.text for d in documents]
    found = entities(ours, texts)
    assert found == entities(ruler, texts) and sum(map(len, found)) > 100


def test_longest_match_first_existing_entities_kept_and_the_pipeline_round_trips(tmp_path):
    nlp = spacy.blank("en")
    concepts = [Concept("D1", "heart failure", synonyms=["Congestive heart failure"]), Concept("D2", "failure"),
                Concept("D3", "renal failure"), Concept("D4", "the")]  # a stop word is never a name
    matcher = add_dictionary_matcher(nlp, concepts, label="Disease")
    assert len(matcher) == 4 and "congestive" not in nlp.vocab.strings  # the names' tokens are not saved with the pipeline
    doc = nlp.make_doc("Congestive HEART failure and renal failure, not the failure of the heart.")
    doc.ents = [doc.char_span(29, 34, label="Organ")]  # "renal": the matcher adds only what it leaves free
    doc = nlp(doc)
    assert [(e.text, e.label_) for e in doc.ents] == [
        ("Congestive HEART failure", "Disease"), ("renal", "Organ"), ("failure", "Disease"), ("failure", "Disease")]
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    texts = ["Congestive heart failure and renal failure.", "No failure here", ""]
    assert entities(loaded, texts) == entities(nlp, texts)
    assert isinstance(loaded.get_pipe("dictionary_matcher").names.keys, numpy.memmap)  # read as searched, not loaded
    other = spacy.blank("en")
    other.add_pipe("sapbert_dictionary_matcher", name="dictionary_matcher", config={"label": "Disease"}).from_bytes(loaded.get_pipe("dictionary_matcher").to_bytes())
    assert entities(other, texts) == entities(nlp, texts)
    (tmp_path / "pipe" / "dictionary_matcher" / "keys.npy").write_bytes(b"not an array")
    with pytest.raises(IndexFormatError, match=r"dictionary_matcher: the dictionary matcher's files cannot be read"):
        spacy.load(tmp_path / "pipe")


def test_a_tokenizer_changed_after_the_build_is_refused_at_load(tmp_path):
    """The keys are of the names as the build's tokenizer split them; a special case added to the saved tokenizer
    later ("renal" -> "ren", "al") made "acute renal failure" never found, with no error (an audit)."""
    nlp = spacy.blank("en")
    add_dictionary_matcher(nlp, [Concept("D4", "acute renal failure")], label="Disease")
    nlp.to_disk(tmp_path / "pipe")
    assert entities(spacy.load(tmp_path / "pipe"), ["acute renal failure"]) == [[(0, 3, "Disease")]]  # its own tokenizer
    nlp.tokenizer.add_special_case("renal", [{"ORTH": "ren"}, {"ORTH": "al"}])
    nlp.tokenizer.to_disk(tmp_path / "pipe" / "tokenizer")
    with pytest.raises(IndexFormatError, match=r"dictionary_matcher: the names saved in .* were tokenized by another tokenizer"):
        spacy.load(tmp_path / "pipe")


def window_keys(lower_ids, length):
    """The key of every run of `length` tokens, as the matcher computes them for a doc."""
    return windows_of(numpy.array(prefix_hashes(lower_ids), dtype=numpy.uint64), length)


def test_window_keys_are_the_keys_of_each_run_alone():
    ids = [11, 2**63 + 5, 7, 11, 2**64 - 1]
    for length in (1, 2, 3, 5):
        windows = window_keys(ids, length)
        assert [int(k) for k in windows] == [int(window_keys(ids[i:i + length], length)[0]) for i in range(len(ids) - length + 1)]
    assert len(set(int(k) for k in window_keys(ids, 1))) == 4  # equal ids, equal keys; others differ
    assert len(window_keys(ids, 6)) == 0
    assert [name_key(ids[i:i + 3]) for i in range(3)] == [int(k) for k in window_keys(ids, 3)]  # a name is found where it runs


def test_an_entity_inside_a_longer_name_is_kept_and_unmatched_tokens_are_outside_entities():
    """An existing entity inside a longer name (a NER's "heart" in "congestive heart failure") made the matcher set
    overlapping entities: spaCy's E1010 stopped the whole batch (an audit). Tokens no entity covers read "O", as after
    an EntityRuler, also in a doc with no match."""
    nlp = spacy.blank("en")
    add_dictionary_matcher(nlp, [Concept("D1", "congestive heart failure"), Concept("D2", "heart failure")], label="Disease")
    doc = nlp.make_doc("Congestive heart failure was seen.")
    doc.ents = [doc.char_span(11, 16, label="Organ")]
    assert [(e.text, e.label_) for e in nlp(doc).ents] == [("heart", "Organ")]
    plain = nlp("Nothing here.")
    assert plain.has_annotation("ENT_IOB") and {t.ent_iob_ for t in plain} == {"O"}


def test_a_tokenizer_rule_that_is_a_plain_function_still_builds():
    """A tokenizer rule set to a lambda does not serialize: copying the tokenizer for the names failed (an audit)."""
    nlp = spacy.blank("en")
    nlp.tokenizer.token_match = lambda text: text == "x-ray"
    add_dictionary_matcher(nlp, [Concept("D1", "x-ray damage")], label="Disease")
    assert [e.text for e in nlp("Some x-ray damage.").ents] == ["x-ray damage"]
