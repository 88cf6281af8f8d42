"""Encoder backends: torch in bfloat16 / float16 and ONNX Runtime (float32 and int8) against torch
float32, saved inside the pipeline, refused when they do not match what the index was built with."""
import json
import sys

import numpy
import pytest
import spacy

from spacy_sapbert.encoder import Encoder
from spacy_sapbert.errors import EncoderLoadError, IndexFormatError, SapbertError
from spacy_sapbert.extras import MissingExtraError

TEXTS = ["heart failure", "liver cancer", "renal disease of the kidney", "x", "hypovitaminosis", "Acute kidney failure"]


def cosines(a, b):
    return (a * b).sum(1) / numpy.linalg.norm(a, axis=1) / numpy.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def int8_pipeline(tiny_bert, tmp_path_factory):
    """A saved pipeline whose linker runs on onnx-int8 (one export for the module: it takes seconds)."""
    from spacy_sapbert.kb import Concept

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "backend": "onnx-int8", "pooling": "mean"})
    linker.initialize(vocabulary=[
        Concept("D1", "Heart failure", ["cardiac failure"]), Concept("D2", "Liver cancer", ["hepatoma"]),
        Concept("D3", "Kidney disease", ["renal disease"]), Concept("D4", "Vitamin deficiency", ["hypovitaminosis"]),
    ])
    path = tmp_path_factory.mktemp("int8") / "pipeline"
    nlp.to_disk(path)
    return nlp, path


@pytest.mark.parametrize("backend, min_cosine", [("onnx", 0.99999), ("onnx-int8", 0.999)])
def test_onnx_vectors_agree_with_torch(tiny_bert, backend, min_cosine, one_thread):
    torch_vectors = Encoder(tiny_bert, pooling="mean", device="cpu").encode(TEXTS)
    vectors = Encoder(tiny_bert, pooling="mean", device="cpu", backend=backend).encode(TEXTS)
    assert vectors.shape == torch_vectors.shape and vectors.dtype == numpy.float32
    assert cosines(vectors, torch_vectors).min() >= min_cosine
    if backend == "onnx-int8":  # quantized: close, but not the same vectors
        assert numpy.abs(vectors - torch_vectors).max() > 1e-5


def test_a_saved_pipeline_carries_its_onnx_model_and_loads_without_export(int8_pipeline, monkeypatch):
    import spacy_sapbert.backends as backends

    nlp, path = int8_pipeline
    encoder_dir = path / "sapbert_linker" / "encoder"
    assert (encoder_dir / "model-int8.onnx").is_file() and (encoder_dir / "onnx_export.json").is_file()
    monkeypatch.setattr(backends, "export_onnx", lambda *a, **k: pytest.fail("exported again at load"))
    loaded = spacy.load(path)
    linker = loaded.get_pipe("sapbert_linker")
    assert linker.encoder.runtime.path == encoder_dir / "model-int8.onnx"
    before, after = nlp.get_pipe("sapbert_linker").search_texts(TEXTS), linker.search_texts(TEXTS)
    assert before == after
    assert loaded.get_pipe("sapbert_linker").index.settings["backend"] == "onnx-int8"
    # the wheel `spacy package` builds requires what loading it needs (a plain pip install then ran without onnxruntime)
    import json

    assert json.loads((path / "meta.json").read_text())["requirements"] == ["onnxruntime>=1.17"]
    assert loaded.meta["requirements"] == ["onnxruntime>=1.17"]  # once, after a load and save


def test_int8_weights_have_one_scale_per_output_channel_and_the_recipe_is_recorded(int8_pipeline):
    import json

    import onnx

    _, path = int8_pipeline
    encoder_dir = path / "sapbert_linker" / "encoder"
    graph = onnx.load(str(encoder_dir / "model-int8.onnx")).graph
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    quantized = [node for node in graph.node if node.op_type == "MatMulInteger"]
    assert quantized, "no quantized matrix multiplication in the int8 graph"
    weight_scales = [shapes[node.input[1].replace("_quantized", "_scale")] for node in quantized if node.input[1] in shapes]
    assert weight_scales and all(len(dims) == 1 and dims[0] > 1 for dims in weight_scales)  # per channel, not one scalar
    record = json.loads((encoder_dir / "onnx_export.json").read_text(encoding="utf8"))
    assert record["int8_quantization"] == {"weight_type": "QInt8", "per_channel": True}


def test_bytes_round_trip_keeps_the_onnx_backend(int8_pipeline):
    nlp, _ = int8_pipeline
    linker = nlp.get_pipe("sapbert_linker")
    copy = spacy.blank("en")
    config = {key: value for key, value in nlp.config["components"]["sapbert_linker"].items() if key != "factory"}
    other = copy.add_pipe("sapbert_linker", config=config)
    other.from_bytes(linker.to_bytes())
    assert other.encoder.backend == "onnx-int8" and other.search_texts(TEXTS) == linker.search_texts(TEXTS)


def test_an_index_built_on_another_backend_is_refused(int8_pipeline):
    _, path = int8_pipeline
    with pytest.raises(IndexFormatError, match="backend='onnx-int8'.*backend='torch'"):
        spacy.load(path, config={"components": {"sapbert_linker": {"backend": "torch"}}})


def test_an_onnx_file_from_other_weights_is_refused(int8_pipeline, tmp_path):
    import shutil

    _, path = int8_pipeline
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    meta = copy / "sapbert_linker" / "encoder" / "onnx_export.json"
    meta.write_text(json.dumps({name: "0" * 16 for name in json.loads(meta.read_text())}))
    with pytest.raises(EncoderLoadError, match="model-int8.onnx was exported from the encoder of fingerprint '0000"):
        spacy.load(copy)


def test_an_onnx_file_copied_over_the_export_is_refused(int8_pipeline, tmp_path):
    """onnx_export.json records each file's signature: another graph put in its place (an audit copied another pipeline's
    model.onnx over one: every link changed, no error) is named at load."""
    import shutil

    _, path = int8_pipeline
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    encoder = copy / "sapbert_linker" / "encoder"
    assert set(json.loads((encoder / "onnx_export.json").read_text())["signatures"]) == {"model.onnx", "model-int8.onnx"}
    shutil.copy(encoder / "model.onnx", encoder / "model-int8.onnx")
    with pytest.raises(EncoderLoadError, match=r"model-int8.onnx is not the file onnx_export.json records"):
        spacy.load(copy)


def test_a_0_2_index_without_a_recorded_backend_is_a_torch_index():
    from spacy_sapbert.index import check_vector_settings

    recorded = {"encoder_fingerprint": "f", "pooling": "cls", "max_length": 25}
    check_vector_settings(recorded, dict(recorded, backend="torch"), what="index", rebuild="build-index")
    with pytest.raises(IndexFormatError, match="backend='torch'"):
        check_vector_settings(recorded, dict(recorded, backend="onnx"), what="index", rebuild="build-index")


def test_unknown_backend_and_missing_onnxruntime_are_named(tiny_bert, monkeypatch):
    with pytest.raises(SapbertError, match="`backend`"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "backend": "tensorrt"})
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingExtraError, match=r"spacy-sapbert\[onnx\]"):
        Encoder(tiny_bert, device="cpu", backend="onnx")


def test_a_linker_on_onnx_pickles_for_spawned_processes(int8_pipeline):
    import pickle

    nlp, _ = int8_pipeline
    linker = nlp.get_pipe("sapbert_linker")
    copy = pickle.loads(pickle.dumps(linker))
    assert copy.encoder._onnx_dir is None and copy.search_texts(TEXTS) == linker.search_texts(TEXTS)


def test_int8_is_refused_when_its_vectors_drift_from_float32(tiny_bert, tmp_path, monkeypatch):
    import spacy_sapbert.backends as backends

    monkeypatch.setattr(backends, "MIN_INT8_COSINE", 1.01)  # no quantized model agrees this well
    encoder = Encoder(tiny_bert, pooling="mean", device="cpu")
    with pytest.raises(EncoderLoadError, match="onnx-int8.*mean cosine"):
        backends.export_onnx(encoder.model, encoder.tokenizer, tmp_path, "onnx-int8", encoder.fingerprint)
    assert not (tmp_path / "model-int8.onnx").exists()
    (tmp_path / "model-int8.onnx").write_bytes(b"a file that was there before")  # a refusal leaves it as it was
    with pytest.raises(EncoderLoadError):
        backends.export_onnx(encoder.model, encoder.tokenizer, tmp_path, "onnx-int8", encoder.fingerprint)
    assert (tmp_path / "model-int8.onnx").read_bytes() == b"a file that was there before"
    assert not list(tmp_path.glob("*.tmp"))
    monkeypatch.setattr(backends, "MIN_INT8_COSINE", 0.98)
    assert backends.export_onnx(encoder.model, encoder.tokenizer, tmp_path, "onnx-int8", encoder.fingerprint).is_file()


@pytest.mark.parametrize("backend, dtype", [("torch-bf16", "bfloat16"), ("torch-fp16", "float16")])
def test_reduced_precision_runs_a_half_copy_and_keeps_the_float32_weights(tiny_bert, backend, dtype, one_thread, recwarn):
    import torch

    full = Encoder(tiny_bert, pooling="mean", device="cpu")
    half = Encoder(tiny_bert, pooling="mean", device="cpu", backend=backend)
    assert half.runtime.dtype == getattr(torch, dtype) and half.model.dtype == torch.float32
    assert half.fingerprint == full.fingerprint  # the same weights: the backend is recorded beside it
    vectors, reference = half.encode(TEXTS), full.encode(TEXTS)
    assert vectors.dtype == numpy.float32 and numpy.isfinite(vectors).all()
    assert cosines(vectors, reference).min() >= 0.99
    assert numpy.abs(vectors - reference).max() > 1e-4  # computed in the lower precision, not float32


def test_a_bf16_pipeline_saves_float32_weights_and_is_refused_on_float32(tiny_bert, tmp_path, toy_concepts):
    from safetensors import safe_open

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "backend": "torch-bf16", "pooling": "mean"})
    linker.initialize(vocabulary=toy_concepts)
    nlp.to_disk(tmp_path / "p")
    with safe_open(str(tmp_path / "p" / "sapbert_linker" / "encoder" / "model.safetensors"), "pt") as weights:
        assert {str(weights.get_tensor(key).dtype) for key in weights.keys()} == {"torch.float32"}
    loaded = spacy.load(tmp_path / "p")
    assert loaded.get_pipe("sapbert_linker").search_texts(TEXTS) == linker.search_texts(TEXTS)
    with pytest.raises(IndexFormatError, match="backend='torch-bf16'.*backend='torch'"):
        spacy.load(tmp_path / "p", config={"components": {"sapbert_linker": {"backend": "torch"}}})


def test_reduced_precision_that_disagrees_with_float32_is_refused(tiny_bert, monkeypatch):
    import spacy_sapbert.backends as backends

    monkeypatch.setattr(backends, "MIN_HALF_COSINE", 1.01)  # no bfloat16 copy agrees this well
    with pytest.raises(EncoderLoadError, match="backend 'torch-bf16'.*mean cosine"):
        Encoder(tiny_bert, pooling="mean", device="cpu", backend="torch-bf16")


def test_reduced_precision_that_overflows_is_refused(tiny_bert, monkeypatch):
    import torch

    import spacy_sapbert.backends as backends

    real = backends.probe_vectors
    calls = []

    def overflowing(model, tokenizer):  # the second call is the half copy's: float16 inf -> NaN vectors
        calls.append(model)
        return real(model, tokenizer) * (float("nan") if len(calls) == 2 else 1.0)

    monkeypatch.setattr(backends, "probe_vectors", overflowing)
    with pytest.raises(EncoderLoadError, match="backend 'torch-fp16'.*nan"):
        Encoder(tiny_bert, pooling="mean", device="cpu", backend="torch-fp16")
    assert calls[1].dtype == torch.float16


def test_an_onnx_model_is_fed_zero_token_types_when_the_caller_gives_none(int8_pipeline):
    import torch

    nlp, _ = int8_pipeline
    encoder = nlp.get_pipe("sapbert_linker").encoder
    batch = encoder.tokenizer(TEXTS, padding=True, return_tensors="pt")
    assert "token_type_ids" in encoder.runtime.input_names
    with_types = encoder.runtime(**batch).last_hidden_state
    without = encoder.runtime(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    assert torch.equal(with_types, without)


def test_an_int8_mention_vector_does_not_depend_on_the_texts_that_share_its_batch(int8_pipeline):
    """Dynamic quantization takes each activation scale over the whole input: a mention's vector moved with the batch's
    other texts and padding, and links changed with batch size, order and a warm cache (an audit: 46 of 1,747
    NCBI-disease mentions between batches of 1 and 64). Mentions now run alone on their own pieces; names stay batched."""
    nlp, _ = int8_pipeline
    linker = nlp.get_pipe("sapbert_linker")
    encoder = linker.encoder
    longer = "glucose-6-phosphate dehydrogenase deficiency with acute hemolytic anemia after fava beans"
    assert encoder.mention_runtime.session is encoder.runtime.session  # one int8 model in memory, run two ways
    alone = encoder.encode(["short stature"], mentions=True)
    for others in ([longer], ["x"] * 5):
        numpy.testing.assert_allclose(encoder.encode([*others, "short stature"], mentions=True)[-1], alone[0], atol=1e-6)
    assert not numpy.allclose(encoder.encode([longer, "short stature"])[-1], alone[0], atol=1e-6)  # names: batched
    linker.vector_cache.clear()
    [first] = linker.search_texts(["short stature"])
    linker.vector_cache.clear()
    *_, beside = linker.search_texts([longer, "heart failure", "short stature"])
    assert [cid for cid, _ in beside] == [cid for cid, _ in first]
    numpy.testing.assert_allclose([s for _, s in beside], [s for _, s in first], atol=1e-6)
