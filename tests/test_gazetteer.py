"""Vocabulary names as a NER feature: BILUO tags of name matches, the layer that adds a vector per tag, and a
NER that uses them for names it never saw annotated."""
import numpy
import pytest
import spacy
from spacy.training import Example
from spacy.util import fix_random_seed
from thinc.api import Model

from spacy_sapbert.errors import SapbertError
from spacy_sapbert.gazetteer import NameIndex, TAGS, doc_tokens, gazetteer_tags, matchable_names, with_gazetteer
from spacy_sapbert.kb import Concept


def tags_of(text, names):
    doc = spacy.blank("en").make_doc(text)
    return [TAGS[t] for t in gazetteer_tags(doc_tokens(doc), NameIndex(names))]


def test_tags_take_the_longest_name_from_the_leftmost_token():
    names = ["breast cancer", "breast", "cancer", "cancer of the breast", "of the"]
    assert tags_of("Breast cancer and cancer of the Breast", names) == ["B", "L", "O", "B", "I", "I", "L"]
    # "cancer of the" is a prefix of a name but not a name: the run falls back to the longest name seen
    assert tags_of("cancer of the lung", names) == ["U", "B", "L", "O"]


def test_names_match_across_tokens_not_split_by_spaces():
    # spaCy splits "Alzheimer's" into two tokens with no space between them
    assert tags_of("Early Alzheimer's disease.", ["alzheimer's disease"]) == ["O", "B", "I", "L", "O"]
    assert tags_of("Early Alzheimer 's disease.", ["alzheimer's disease"]) == ["O", "O", "O", "O", "O"]
    assert tags_of("Alzheimers disease", ["alzheimer's disease", "alzheimer"]) == ["O", "O"]


def test_any_whitespace_between_words_reads_as_one_space_and_never_starts_a_name():
    assert tags_of("heart failure", ["heart failure"]) == ["B", "L"]
    assert tags_of("heart  failure", ["heart failure"]) == ["B", "I", "L"]
    assert tags_of("heart\n failure", ["heart failure", "failure"]) == ["B", "I", "L"]
    assert tags_of("\n\nfailure", ["failure"]) == ["O", "U"]


def test_matchable_names_skip_short_names_and_stop_words_once_each():
    concepts = [Concept("D1", "Heart failure", ["HF", "heart  failure"]), Concept("D2", "Other", ["Cardiac failure", "heart failure"])]
    assert matchable_names(concepts, stop_words={"other"}) == [("heart failure", "Heart failure"), ("cardiac failure", "Cardiac failure")]


class Ones(Model):
    """A stand-in tok2vec: ones of width 4 for every token; records the gradient it is given."""

    def __init__(self):
        def forward(model, docs, is_train):
            def backprop(d):
                model.attrs["d"] = d
                return []

            return [model.ops.alloc2f(len(doc), 4) + 1 for doc in docs], backprop

        super().__init__("ones", forward, dims={"nO": 4}, attrs={"d": None})


@pytest.fixture
def vocabulary(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("D1||heart failure|hepatoma\nD2||nephropathy\n", encoding="utf8")
    return path


def test_the_layer_adds_a_scaled_learned_vector_per_tag_and_passes_gradients_through(vocabulary):
    nlp = spacy.blank("en")
    docs = [nlp.make_doc("Heart failure and hepatoma"), nlp.make_doc("none here")]
    model = with_gazetteer(Ones(), str(vocabulary), scale=2.0)
    model.initialize(X=docs)
    assert model.attrs["names"] == ["heart failure", "hepatoma", "nephropathy"]
    outputs, _ = model(docs, is_train=False)
    assert all(numpy.array_equal(o, numpy.ones_like(o)) for o in outputs)  # untrained: the wrapped layer unchanged
    table = numpy.arange(20, dtype="f").reshape(5, 4)
    model.set_param("E", table)
    outputs, backprop = model(docs, is_train=True)
    expected = [2 * table[[TAGS.index(t) for t in "BLOU"]] + 1, 2 * table[[0, 0]] + 1]
    for o, e in zip(outputs, expected):
        numpy.testing.assert_array_equal(o, e)
    d_outputs = [numpy.full_like(o, 1.0) for o in outputs]
    backprop(d_outputs)
    assert model.layers[0].attrs["d"] is d_outputs
    counts = numpy.array([3, 1, 0, 1, 1], dtype="f")  # O: "and", "none", "here"; B, L, U once each; I never
    numpy.testing.assert_array_equal(model.get_grad("E"), 2 * numpy.repeat(counts[:, None], 4, axis=1))


def test_without_a_vocabulary_initialization_names_the_config_key():
    with pytest.raises(SapbertError, match="'vocabulary'"):
        with_gazetteer(Ones(), None).initialize(X=[spacy.blank("en").make_doc("x")])


def _ner_config(vocabulary):
    return {"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False,
        "hidden_width": 32, "maxout_pieces": 2, "use_upper": True, "nO": None,
        "tok2vec": {"@architectures": "spacy.Tok2Vec.v2",
                    "embed": {"@architectures": "spacy-sapbert.WithGazetteer.v1", "vocabulary": str(vocabulary),
                              "tok2vec": {"@architectures": "spacy.MultiHashEmbed.v2", "width": 32, "attrs": ["SHAPE"],
                                          "rows": [50], "include_static_vectors": False}},
                    "encode": {"@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 32, "depth": 1,
                               "window_size": 1, "maxout_pieces": 2}},
    }}


def test_a_ner_finds_vocabulary_names_it_never_saw_annotated_and_keeps_them_on_disk(tmp_path):
    """Annotated are names of the vocabulary only, in contexts shared with words outside it. The NER's only
    lexical feature is the word shape, the same for all these words, so only the vocabulary (saved in the
    model, the file gone) can tell it which unseen words are names."""
    seen, unseen = ["hepatoma", "nephropathy", "gastritis", "colitis", "asthma", "anemia"], ["myopathy", "uveitis"]
    others = ["aspirin", "rest", "insulin", "surgery", "placebo", "exercise", "diet", "heparin"]
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("".join(f"D{i}||{name}\n" for i, name in enumerate(seen + unseen)), encoding="utf8")
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", config=_ner_config(vocabulary))
    templates = ["Patients with {} were seen.", "We report {} today.", "The {} group improved."]
    examples = []
    for template in templates:
        for word in seen + others[:6]:
            text = template.format(word)
            start = text.index(word)
            ents = [(start, start + len(word), "Disease")] if word in seen else []
            examples.append(Example.from_dict(nlp.make_doc(text), {"entities": ents}))
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.01
    for _ in range(40):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    vocabulary.unlink()
    nlp.to_disk(tmp_path / "ner")
    again = spacy.load(tmp_path / "ner")
    for word in unseen + others[6:]:
        for template in templates:
            doc = again(template.format(word))
            assert [e.text for e in doc.ents] == ([word] if word in unseen else []), (word, template)


@pytest.mark.parametrize("config_name", ["ner-gazetteer.cfg", "ner-transformer-gazetteer.cfg"])
def test_the_project_gazetteer_configs_train_and_save_the_names(config_name, vocabulary, tiny_bert, tmp_path):
    from conftest import ROOT
    from test_ner_pipeline import runner, toy_docbin

    from spacy_sapbert.cli import app

    config = ROOT / "projects" / "sapbert" / "configs" / config_name
    data = toy_docbin(tmp_path / "toy.spacy")
    args = ["train-ner", str(config), str(tmp_path / "ner"), "--paths.train", str(data), "--paths.dev", str(data),
            "--training.max_steps", "2", "--training.eval_frequency", "1"]
    args += ["--paths.encoder", tiny_bert] if "transformer" in config_name else []
    missing = runner.invoke(app, args)
    assert missing.exit_code != 0 and "'vocabulary'" in missing.output
    assert not (tmp_path / "ner").exists()
    result = runner.invoke(app, args + ["--paths.gazetteer", str(vocabulary)])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "ner" / "model-best")
    assert nlp.pipe_names == ["ner", "sapbert_abbreviations"] and nlp.get_pipe("sapbert_abbreviations").label_short_forms
    layers = [layer for layer in nlp.get_pipe("ner").model.walk() if layer.name == "sapbert_with_gazetteer"]
    assert [layer.attrs["names"] for layer in layers] == [["heart failure", "hepatoma", "nephropathy"]]
