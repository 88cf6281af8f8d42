"""One normalizer from a name to a link: saved with the index, used by the component, evaluation and trainers."""
import pytest
import spacy

from spacy_sapbert.errors import IndexFormatError
from spacy_sapbert.evaluation import LinkerRetriever, Preprocessing, build_encoder_index
from spacy_sapbert.kb import Concept
from spacy_sapbert.normalizer import Normalizer
from spacy_sapbert.training.extract import clean_name

CORRECTIONS = {"hemmorhage": "haemorrhage"}


@pytest.mark.parametrize(
    "normalizer, text, expected",
    [
        (Normalizer(), "  Brain-Hemmorhage  (Acute) ", "brain-hemmorhage (acute)"),
        (Normalizer(remove_punctuation=True), "Brain-Hemmorhage (Acute)", "brain hemmorhage acute"),
        (Normalizer(remove_punctuation=True).with_spell_check(CORRECTIONS), "Brain-HEMMORHAGE", "brain hemmorhage"),
        (Normalizer(lowercase=False), "Brain  Hemmorhage", "Brain Hemmorhage"),
    ],
)
def test_normalizer_steps(normalizer, text, expected):
    assert normalizer(text) == expected


def test_spelling_corrections_apply_to_queries_only():
    """BioSyn corrects typos in mentions; its list would damage names ("le||leg": "le marec ... syndrome")."""
    normalizer = Normalizer(remove_punctuation=True).with_spell_check({**CORRECTIONS, "le": "leg"})
    assert normalizer.query("Brain-HEMMORHAGE") == "brain haemorrhage"
    assert normalizer("Le Marec-Bracq-Picaud syndrome") == "le marec bracq picaud syndrome"
    assert normalizer.query("Le Marec syndrome") == "leg marec syndrome"


def test_normalizer_round_trips_and_equal_lists_give_equal_settings():
    one = Normalizer(remove_punctuation=True).with_spell_check({"b": "c", "a": "d"})
    two = Normalizer(remove_punctuation=True).with_spell_check({"a": "d", "b": "c"})
    assert one == two and one.settings() == two.settings() and one.spell_check_hash != ""
    assert Normalizer.from_dict(one.to_dict()) == one
    assert Normalizer().settings()["spell_check"] == ""


def test_the_registered_normalizer_reads_a_spell_check_file(tmp_path):
    path = tmp_path / "spell.txt"
    path.write_text("hemmorhage||haemorrhage\n", encoding="utf8")
    make = spacy.registry.misc.get("spacy-sapbert.Normalizer.v1")
    assert make(remove_punctuation=True, spell_check=str(path)).query("Hemmorhage.") == "haemorrhage"


def test_evaluation_protocol_normalizer_matches_the_preprocessing_flags():
    prep = Preprocessing(remove_punctuation=True, spell_check=CORRECTIONS)
    assert prep.normalizer == Normalizer(True, True).with_spell_check(CORRECTIONS)


def test_training_names_use_the_linker_normalization():
    assert clean_name("  Heart  Failure|NOS ") == Normalizer()("Heart Failure NOS") == "heart failure nos"


@pytest.fixture
def punctuation_pipeline(tiny_bert, tmp_path):
    """A linker built with punctuation removal and a spelling list, saved and loaded again."""
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "remove_punctuation": True})
    linker.initialize(vocabulary=[Concept("D1", "brain haemorrhage"), Concept("D2", "heart failure")], spell_check=CORRECTIONS)
    nlp.to_disk(tmp_path / "pipe")
    return tmp_path / "pipe"


def test_the_saved_pipeline_ships_the_normalizer_it_was_built_with(punctuation_pipeline):
    nlp = spacy.load(punctuation_pipeline)
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.normalizer == Normalizer(True, True).with_spell_check(CORRECTIONS)
    doc = nlp.make_doc("Brain-Hemmorhage!")
    doc.ents = [doc.char_span(0, 17, label="DISEASE")]
    [ent] = nlp(doc).ents
    # "Brain-Hemmorhage!" normalizes to a vocabulary name exactly: the score is 1
    assert ent.kb_id_ == "D1" and ent._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-5)


def test_loading_with_another_punctuation_setting_is_refused(punctuation_pipeline):
    with pytest.raises(IndexFormatError, match="remove_punctuation=True but the config says remove_punctuation=False"):
        spacy.load(punctuation_pipeline, config={"components": {"sapbert_linker": {"remove_punctuation": False}}})


def test_evaluation_scores_through_the_component_and_its_normalizer(tiny_bert, tmp_path):
    """The evaluation's encoder system is the component: same candidates as the loaded pipeline's search."""
    from spacy_sapbert.encoder import Encoder

    concepts = [Concept("D1", "brain haemorrhage"), Concept("D2", "heart failure"), Concept("D3", "heart disease")]
    normalizer = Normalizer(remove_punctuation=True).with_spell_check(CORRECTIONS)
    encoder = Encoder(tiny_bert, device="cpu")
    retriever = LinkerRetriever("tiny", encoder, build_encoder_index(encoder, concepts, normalizer=normalizer))
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "remove_punctuation": True, "k": 10, "max_entities_per_mention": 10, "threshold": -1.0})
    linker.initialize(vocabulary=concepts, spell_check=CORRECTIONS)
    queries = ["Brain-Hemmorhage", "HEART failure.", "heart (disease)"]
    assert retriever.rank(queries, 10) == linker.search_texts(queries)
    assert [hits[0][0] for hits in retriever.rank(queries, 10)] == ["D1", "D2", "D3"]


def test_the_dictionary_matcher_deduplicates_names_as_the_normalizer_writes_them():
    from spacy_sapbert.pipeline import dictionary_patterns

    concepts = [Concept("D1", "Heart  Failure", ["heart failure", "HF", "Heart failure, acute"]), Concept("D2", "heart\tfailure")]
    patterns = dictionary_patterns(concepts, "DISEASE")
    assert [p["pattern"] for p in patterns] == ["Heart Failure", "Heart failure, acute"]  # "HF" too short
