"""Bottleneck adapters: identity at the start, only they train, saved beside the base weights, refused
on other base weights, carried by a saved pipeline."""
from __future__ import annotations

import json
import pickle
import shutil

import numpy
import pytest
import torch

from conftest import make_tiny_bert
from spacy_sapbert.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS, add_adapters, trainable_parameters
from spacy_sapbert.encoder import Encoder, encoder_fingerprint, load_pretrained, save_pretrained
from spacy_sapbert.errors import EncoderLoadError
from spacy_sapbert.training.pairs import write_pairs
from spacy_sapbert.training.trainer import TrainConfig, train

SYNONYMS = {
    "C1": ["heart failure", "cardiac failure", "heart decompensation"],
    "C2": ["liver cancer", "hepatic cancer", "hepatoma"],
    "C3": ["kidney disease", "renal disease", "nephropathy"],
    "C4": ["vitamin deficiency", "hypovitaminosis"],
}
NAMES = ["heart failure", "hepatoma", "renal disease", "hypovitaminosis"]


def base_weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.fixture(scope="module")
def adapter_run(tmp_path_factory, tiny_bert):
    """A SAP run with reduction factor 4 (hidden 32 -> bottleneck 8) on the toy synonyms."""
    tmp = tmp_path_factory.mktemp("adapters")
    pairs = tmp / "pairs.txt"
    write_pairs(pairs, SYNONYMS.items(), seed=0)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        config = TrainConfig(model=tiny_bert, output=str(tmp / "run"), pairs=str(pairs), batch_size=8, lr=5e-3,
                             epochs=6, adapters=4, log_every=1, device="cpu", progress=False)
        model_dir = train(config)
    finally:
        torch.set_num_threads(before)
    return model_dir


def test_new_adapters_encode_exactly_as_the_base(tiny_bert):
    plain = Encoder(tiny_bert, device="cpu")
    expected = plain.encode(NAMES)
    add_adapters(plain.model, 2, plain.fingerprint)
    assert numpy.array_equal(plain.encode(NAMES), expected)
    # 2 layers x (32*16 + 16 + 16*32 + 32) adapter parameters, nothing else trainable
    assert trainable_parameters(plain.model) == 2 * (32 * 16 + 16 + 16 * 32 + 32)


def test_only_the_adapters_train_and_the_folder_keeps_the_base_weights(adapter_run, tiny_bert):
    from pathlib import Path

    assert base_weights(adapter_run).keys() == base_weights(Path(tiny_bert)).keys()
    assert all(torch.equal(base_weights(adapter_run)[k], v) for k, v in base_weights(Path(tiny_bert)).items())
    settings = json.loads((adapter_run / ADAPTER_CONFIG).read_text())
    base = Encoder(tiny_bert, device="cpu")
    assert settings == {"type": "pfeiffer", "reduction_factor": 4, "base_fingerprint": base.fingerprint}
    trained = Encoder(str(adapter_run), device="cpu")
    assert trained.fingerprint != base.fingerprint  # an index built with the adapters is not the base's
    assert not numpy.allclose(trained.encode(NAMES), base.encode(NAMES), atol=1e-4)
    log = [json.loads(line) for line in (adapter_run.parent / "train_log.jsonl").read_text().splitlines()]
    assert log[-1]["loss"] < log[0]["loss"]


def test_saving_an_adapter_model_again_round_trips(adapter_run, tmp_path):
    tokenizer, model = load_pretrained(str(adapter_run))
    save_pretrained(tmp_path / "copy", model, tokenizer)
    assert (tmp_path / "copy" / ADAPTER_WEIGHTS).exists()
    assert numpy.array_equal(Encoder(str(tmp_path / "copy"), device="cpu").encode(NAMES),
                             Encoder(str(adapter_run), device="cpu").encode(NAMES))
    encoder = Encoder(str(adapter_run), device="cpu")  # the hook pickles (nlp.pipe with n_process)
    assert numpy.array_equal(pickle.loads(pickle.dumps(encoder)).encode(NAMES), encoder.encode(NAMES))


def test_adapters_on_other_base_weights_are_refused(adapter_run, tmp_path):
    other = make_tiny_bert(tmp_path / "other", seed=1)
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        shutil.copy(adapter_run / name, other / name)
    with pytest.raises(EncoderLoadError, match=r"adapter_config.json: these adapters were trained on base weights"):
        Encoder(str(other), device="cpu")


def test_adapter_weights_that_do_not_fit_are_refused(adapter_run, tmp_path):
    folder = shutil.copytree(adapter_run, tmp_path / "model")
    settings = json.loads((folder / ADAPTER_CONFIG).read_text())
    (folder / ADAPTER_CONFIG).write_text(json.dumps(dict(settings, reduction_factor=2)))
    with pytest.raises(EncoderLoadError, match=r"adapter_model.safetensors: does not fit this model"):
        Encoder(str(folder), device="cpu")
    (folder / ADAPTER_WEIGHTS).unlink()
    with pytest.raises(EncoderLoadError, match="missing"):
        Encoder(str(folder), device="cpu")


def test_resumed_adapter_run_ends_with_the_same_adapters(tmp_path, tiny_bert, one_thread):
    pairs = tmp_path / "pairs.txt"
    write_pairs(pairs, SYNONYMS.items(), seed=0)

    def config(name, max_steps):
        return TrainConfig(model=tiny_bert, output=str(tmp_path / name), pairs=str(pairs), batch_size=4, lr=5e-3,
                           epochs=3, max_steps=max_steps, checkpoint_every=2, adapters=8, device="cpu", progress=False)

    full = train(config("full", 6))
    train(config("split", 3))
    resumed = train(config("split", 6), resume=True)
    from safetensors.torch import load_file

    a, b = load_file(str(full / ADAPTER_WEIGHTS)), load_file(str(resumed / ADAPTER_WEIGHTS))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(v.abs().sum() > 0 for k, v in a.items() if ".up." in k)  # trained away from the identity


def test_a_saved_pipeline_carries_the_adapter_model(adapter_run, tmp_path, toy_concepts):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(adapter_run), "device": "cpu", "k": 3})
    nlp.get_pipe("sapbert_linker").initialize(vocabulary=toy_concepts)
    nlp.to_disk(tmp_path / "pipeline")
    assert (tmp_path / "pipeline/sapbert_linker/encoder" / ADAPTER_WEIGHTS).exists()
    loaded = spacy.load(tmp_path / "pipeline")
    ours, theirs = nlp.get_pipe("sapbert_linker"), loaded.get_pipe("sapbert_linker")
    queries = ["cardiac failure", "hepatic cancer", "renal disorder"]
    assert numpy.array_equal(ours.encoder.encode(queries), theirs.encoder.encode(queries))
    assert ours.encoder.fingerprint == theirs.encoder.fingerprint == encoder_fingerprint(*reversed(load_pretrained(str(adapter_run))))


def test_a_plain_encoder_saved_over_an_adapter_pipeline_leaves_no_adapter_behind(tiny_bert, tmp_path):
    """nlp.to_disk over a pipeline folder kept the earlier encoder's adapter files, which the load then applied to the
    new encoder: the pipeline no longer loaded (found by an audit). A file the package does not write stays, refused."""
    import spacy

    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline

    adapted = Encoder(tiny_bert, device="cpu")
    add_adapters(adapted.model, 2, adapted.fingerprint)
    save_pretrained(tmp_path / "adapted", adapted.model, adapted.tokenizer)
    concepts = [Concept("D1", "heart failure"), Concept("D2", "liver cancer")]
    folder = tmp_path / "pipe"
    build_pipeline(concepts, str(tmp_path / "adapted"), label=None).to_disk(folder)
    encoder_dir = folder / "sapbert_linker" / "encoder"
    assert (encoder_dir / ADAPTER_CONFIG).exists()
    build_pipeline(concepts, tiny_bert, label=None).to_disk(folder)
    assert not (encoder_dir / ADAPTER_CONFIG).exists() and not (encoder_dir / ADAPTER_WEIGHTS).exists()
    linker = spacy.load(folder).get_pipe("sapbert_linker")
    assert linker.encoder.fingerprint == Encoder(tiny_bert, device="cpu").fingerprint
    (encoder_dir / "notes.txt").write_text("mine", encoding="utf8")
    with pytest.raises(SapbertError, match="notes.txt"):
        build_pipeline(concepts, tiny_bert, label=None).to_disk(folder)
    assert (encoder_dir / "notes.txt").read_text(encoding="utf8") == "mine"
