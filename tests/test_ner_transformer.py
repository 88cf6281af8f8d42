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


def _ner_pipeline(encoder_folder: str):
    """A blank pipeline with a NER on the encoder, not initialized."""
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", config={"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False,
        "hidden_width": 32, "maxout_pieces": 2, "use_upper": True, "nO": None,
        "tok2vec": {"@architectures": "spacy-sapbert.TransformerTok2Vec.v1", "model": encoder_folder, "window": 8},
    }})
    return nlp


def _initialized(nlp):
    """(examples of TRAIN, the optimizer) after nlp.initialize on them."""
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": [(s, e, "Disease") for s, e in spans]}) for t, spans in TRAIN]
    return examples, nlp.initialize(lambda: examples)


def _transformer_ner(encoder_folder: str):
    """A blank pipeline with a NER on the encoder, initialized on TRAIN: (nlp, examples, optimizer)."""
    fix_random_seed(0)
    nlp = _ner_pipeline(encoder_folder)
    return (nlp, *_initialized(nlp))


def test_a_ner_on_the_encoder_learns_and_survives_to_disk(tiny_bert, tmp_path):
    nlp, examples, optimizer = _transformer_ner(tiny_bert)
    optimizer.learn_rate = 0.001
    losses = [nlp.update(examples, sgd=optimizer, drop=0.0, losses={})["ner"] for _ in range(80)]
    assert losses[-1] < losses[0] / 4
    found = [[(e.start_char, e.end_char) for e in doc.ents] for doc in nlp.pipe(t for t, _ in TRAIN)]
    assert sum(f == spans for f, (_, spans) in zip(found, TRAIN)) >= 4
    nlp.to_disk(tmp_path / "ner")
    again = spacy.load(tmp_path / "ner")
    assert [[(e.start_char, e.end_char) for e in doc.ents] for doc in again.pipe(t for t, _ in TRAIN)] == found


def _trained_transformer_ner(encoder_folder: str):
    nlp, examples, optimizer = _transformer_ner(encoder_folder)
    for _ in range(10):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    return nlp


def _entities_and_vectors(nlp):
    docs = list(nlp.pipe(t for t, _ in TRAIN))
    tok2vec = next(node for node in nlp.get_pipe("ner").model.walk() if node.name == "sapbert_transformer_tok2vec")
    vectors, _ = tok2vec([nlp.make_doc(TRAIN[0][0])], is_train=False)
    return [[(e.start_char, e.end_char) for e in doc.ents] for doc in docs], vectors[0]


def test_a_saved_transformer_ner_loads_without_its_base_model_folder(tiny_bert, tmp_path):
    """The NER's model file keeps the encoder's config and tokenizer: a packaged pipeline moved to a machine without
    the folder `model` named (the workflow's base model, a hub name) loads and tags as it did (it raised before)."""
    import shutil

    base = tmp_path / "base"
    shutil.copytree(tiny_bert, base)
    nlp = _trained_transformer_ner(str(base))
    entities, vectors = _entities_and_vectors(nlp)
    nlp.to_disk(tmp_path / "ner")
    shutil.rmtree(base)
    again = spacy.load(tmp_path / "ner")
    entities_again, vectors_again = _entities_and_vectors(again)
    assert entities_again == entities
    numpy.testing.assert_allclose(vectors_again, vectors, rtol=0, atol=1e-6)
    assert again.get_pipe("ner").model.to_bytes() == nlp.get_pipe("ner").model.to_bytes()


def test_a_ner_saved_in_the_earlier_format_reads_its_encoder_from_the_model_folder(tiny_bert, tmp_path):
    """Bare torch.save weights (a NER saved before the config and tokenizer were kept) still load, reading the
    tokenizer and architecture from `model` as before; without that folder the error names it."""
    import shutil

    from thinc.shims.pytorch import default_serialize_torch_model

    from spacy_sapbert.errors import EncoderLoadError

    base = tmp_path / "base"
    shutil.copytree(tiny_bert, base)
    nlp = _trained_transformer_ner(str(base))
    entities, vectors = _entities_and_vectors(nlp)
    shim = next(node for node in nlp.get_pipe("ner").model.walk() if node.shims).shims[0]
    shim._serialize_model = default_serialize_torch_model
    nlp.to_disk(tmp_path / "ner")
    entities_again, vectors_again = _entities_and_vectors(spacy.load(tmp_path / "ner"))
    assert entities_again == entities
    numpy.testing.assert_allclose(vectors_again, vectors, rtol=0, atol=1e-6)
    shutil.rmtree(base)
    with pytest.raises(EncoderLoadError, match="base"):
        spacy.load(tmp_path / "ner")


def test_an_encoder_with_adapters_round_trips_through_the_ner_model_file(tiny_bert):
    from spacy_sapbert.adapters import adapter_settings, add_adapters
    from spacy_sapbert.encoder import encoder_fingerprint
    from spacy_sapbert.ner_transformer import WordPooler, deserialize, serialize

    model = transformer_tok2vec(tiny_bert, window=4, max_length=32)
    model.initialize()
    pooler = model.layers[0].shims[0]._model
    add_adapters(pooler.transformer, 4, encoder_fingerprint(pooler.transformer, pooler.tokenizer))
    with torch.no_grad():
        for name, parameter in pooler.named_parameters():
            if "sapbert_adapter" in name:
                parameter.add_(torch.randn_like(parameter))  # trained adapters, not the identity they start as
    rebuilt = deserialize(WordPooler("no such folder"), serialize(pooler), torch.device("cpu"))
    assert adapter_settings(rebuilt.transformer) == adapter_settings(pooler.transformer)
    inputs = {"input_ids": torch.tensor([[2, 5, 6, 3]]), "attention_mask": torch.ones(1, 4, dtype=torch.long),
              "word_index": torch.tensor([[-1, 0, 1, -1]]), "n_words": 2}
    torch.testing.assert_close(rebuilt(**inputs), pooler(**inputs))


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


def test_a_ner_saved_before_initialization_saves_and_loads_as_uninitialized(tiny_bert, tmp_path):
    """A pipeline built and saved before nlp.initialize() (the encoder is read at initialization now) failed to
    serialize with an AttributeError naming nothing (an audit); it saves, loads, and initializes from `model`."""
    _ner_pipeline(tiny_bert).to_disk(tmp_path / "blank")
    again = spacy.load(tmp_path / "blank")
    _initialized(again)
    assert len(list(again.pipe(t for t, _ in TRAIN))) == len(TRAIN)
