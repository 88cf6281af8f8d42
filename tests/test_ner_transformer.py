"""The Hugging Face encoder as the NER's tok2vec: one mean-of-pieces vector per token, trainable, saved with the NER."""
import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from spacy.util import fix_random_seed

from spacy_sapbert.ner_transformer import doc_windows, transformer_tok2vec

from test_ner_pipeline import TRAIN


@pytest.fixture(scope="module")
def tok2vec(tiny_bert):
    model = transformer_tok2vec(tiny_bert, window=4, max_length=32)
    model.initialize()
    return model


def test_windows_cover_every_token_once():
    nlp = spacy.blank("en")
    docs = [nlp.make_doc(""), nlp.make_doc("one two three"), nlp.make_doc("a b c d e f g h i j")]
    assert doc_windows(docs, 4) == [(0, 0, 0), (1, 0, 3), (2, 0, 4), (2, 4, 8), (2, 8, 10)]


def test_each_token_gets_the_mean_of_its_pieces_in_its_window(tok2vec, tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    nlp = spacy.blank("en")
    docs = [nlp.make_doc("Hepatoma and  nephropathy seen in the boy today"), nlp.make_doc("")]
    outputs, _ = tok2vec(docs, is_train=False)
    assert [o.shape for o in outputs] == [(len(docs[0]), 32), (0, 32)]
    tokenizer, bert = AutoTokenizer.from_pretrained(tiny_bert), AutoModel.from_pretrained(tiny_bert).eval()
    for start in (0, 4, 8):  # each window alone, by hand
        words = [t.text for t in docs[0][start : start + 4]]
        encoded = tokenizer(words, is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            hidden = bert(**encoded).last_hidden_state[0].numpy()
        ids = encoded.word_ids(0)
        for w, word in enumerate(words):
            rows = [p for p, i in enumerate(ids) if i == w]
            expected = hidden[rows].mean(axis=0) if rows else numpy.zeros(32)  # the double space has no pieces
            numpy.testing.assert_allclose(outputs[0][start + w], expected, atol=1e-5)


def test_backprop_reaches_the_encoder_weights(tok2vec):
    nlp = spacy.blank("en")
    docs = [nlp.make_doc("hepatoma and nephropathy in five words")]
    outputs, backprop = tok2vec(docs, is_train=True)
    backprop([numpy.ones_like(o) for o in outputs])
    torch_model = tok2vec.layers[0].shims[0]._model
    grads = [p.grad for p in torch_model.parameters() if p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    torch_model.zero_grad()


def test_a_ner_on_the_encoder_learns_and_survives_to_disk(tiny_bert, tmp_path):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", config={"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False,
        "hidden_width": 32, "maxout_pieces": 2, "use_upper": True, "nO": None,
        "tok2vec": {"@architectures": "spacy-sapbert.TransformerTok2Vec.v1", "model": tiny_bert, "window": 8},
    }})
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": [(s, e, "Disease") for s, e in spans]}) for t, spans in TRAIN]
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.001
    losses = [nlp.update(examples, sgd=optimizer, drop=0.0, losses={})["ner"] for _ in range(80)]
    assert losses[-1] < losses[0] / 4
    found = [[(e.start_char, e.end_char) for e in doc.ents] for doc in nlp.pipe(t for t, _ in TRAIN)]
    assert sum(f == spans for f, (_, spans) in zip(found, TRAIN)) >= 4
    nlp.to_disk(tmp_path / "ner")
    again = spacy.load(tmp_path / "ner")
    assert [[(e.start_char, e.end_char) for e in doc.ents] for doc in again.pipe(t for t, _ in TRAIN)] == found


def test_the_project_transformer_config_builds_on_any_encoder_folder(tiny_bert):
    from conftest import ROOT
    from spacy.util import load_config, load_model_from_config

    config = load_config(ROOT / "projects" / "sapbert" / "configs" / "ner-transformer.cfg", overrides={"paths.encoder": tiny_bert})
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    assert nlp.pipe_names == ["ner"]
    assert any(layer.name == "sapbert_transformer_tok2vec" for layer in nlp.get_pipe("ner").model.walk())


def test_bfloat16_autocast_gives_float32_vectors_near_float32_and_trains(tiny_bert):
    nlp = spacy.blank("en")
    docs = [nlp.make_doc("Hepatoma and nephropathy seen in the boy today")]
    full = transformer_tok2vec(tiny_bert, window=4, max_length=32)
    half = transformer_tok2vec(tiny_bert, window=4, max_length=32, precision="bfloat16")
    full.initialize(), half.initialize()
    expected, _ = full(docs, is_train=False)
    outputs, _ = half(docs, is_train=False)
    assert outputs[0].dtype == numpy.float32 and outputs[0].shape == expected[0].shape
    assert not numpy.array_equal(outputs[0], expected[0])  # the passes really ran in bfloat16
    numpy.testing.assert_allclose(outputs[0], expected[0], atol=0.1)
    outputs, backprop = half(docs, is_train=True)
    backprop([numpy.ones_like(o) for o in outputs])
    grads = [p.grad for p in half.layers[0].shims[0]._model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 for g in grads) and any(float(g.abs().sum()) > 0 for g in grads)


def test_an_unknown_precision_is_refused_by_name(tiny_bert):
    from spacy_sapbert.errors import SapbertError

    with pytest.raises(SapbertError, match="precision.*'float16'"):
        transformer_tok2vec(tiny_bert, precision="float16")


def test_inputs_go_to_the_device_of_the_encoder_weights(tok2vec):
    """The word pieces were made on the CPU whatever the model's device: `spacy train --gpu-id 0` would have fed a
    CUDA model CPU tensors (found by reading the code; no GPU in the tests, so the device is faked)."""
    from types import SimpleNamespace

    from spacy_sapbert.ner_transformer import WindowBatch, _convert_inputs

    encoder = next(node for node in tok2vec.walk() if node.shims)
    batch = WindowBatch(numpy.array([[2, 5, 3]]), numpy.array([[1, 1, 1]]), numpy.array([[-1, 0, -1]]), 1)
    wanted = torch.device("meta")  # a device no tensor lands on by default
    fake = SimpleNamespace(shims=[SimpleNamespace(device=wanted)])
    inputs, _ = _convert_inputs(fake, batch, is_train=False)
    assert {tensor.device for tensor in inputs.kwargs.values() if isinstance(tensor, torch.Tensor)} == {wanted}
    inputs, _ = _convert_inputs(encoder, batch, is_train=False)  # the real shim: where its weights are (the CPU here)
    assert inputs.kwargs["input_ids"].device == next(encoder.shims[0]._model.parameters()).device
