"""Fingerprints: a saved index or memory is refused when the encoder or a vector setting changed."""
import json
import re
import shutil
from pathlib import Path

import numpy
import pytest
import spacy
import srsly

from conftest import TOY_VOCAB, make_tiny_bert, replace_saved_encoder
from spacy_sapbert.encoder import Encoder, encoder_fingerprint, same_encoder
from spacy_sapbert.errors import IndexFormatError
from spacy_sapbert.kb import Concept
from spacy_sapbert.normalizer import Normalizer

pytestmark = pytest.mark.usefixtures("one_thread")

CHANGED = {"pooling": "mean", "max_length": 16, "lowercase": False, "normalize": False}
TEXT, MENTIONS = "hepatoma and heart decompensation", ["hepatoma", "heart decompensation"]


@pytest.fixture(scope="module")
def tiny_bert_seed1(tmp_path_factory) -> str:
    """Another tiny BERT of the same width (32) and vocabulary, with other random weights."""
    return str(make_tiny_bert(tmp_path_factory.mktemp("tiny-bert-seed1"), seed=1))


def link(nlp, text=TEXT, mentions=MENTIONS):
    doc = nlp.make_doc(text)
    doc.ents = [doc.char_span(text.index(m), text.index(m) + len(m), label="DISEASE") for m in mentions]
    return [(e.text, e.kb_id_, [(c, round(s, 5)) for c, s in e._.kb_ents]) for e in nlp(doc).ents]


def one_line(err) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


# the fingerprint ------------------------------------------------------------------------------------


def test_fingerprint_is_the_same_for_the_same_model_loaded_twice_or_saved_and_reloaded(tiny_bert, tmp_path):
    first = Encoder(tiny_bert, device="cpu")
    assert re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]{8}", first.fingerprint)
    first.encode(["heart failure"])  # using the tokenizer must not change it
    assert Encoder(tiny_bert, device="cpu").fingerprint == first.fingerprint
    first.save(tmp_path / "copy")  # save_pretrained of model and tokenizer
    assert Encoder(tmp_path / "copy", device="cpu").fingerprint == first.fingerprint
    assert encoder_fingerprint(first.model, first.tokenizer) == first.fingerprint


def test_fingerprint_differs_for_other_weights_and_another_tokenizer(tiny_bert, tiny_bert_seed1):
    import torch
    from transformers import BertTokenizerFast

    encoder = Encoder(tiny_bert, device="cpu")
    assert Encoder(tiny_bert_seed1, device="cpu").fingerprint != encoder.fingerprint
    tokens = [t for t in TOY_VOCAB.read_text(encoding="utf8").split("\n") if t]
    cased = BertTokenizerFast(vocab={t: i for i, t in enumerate(tokens)}, do_lower_case=False)
    assert encoder_fingerprint(encoder.model, cased) != encoder.fingerprint
    before = encoder.fingerprint
    with torch.no_grad():
        next(encoder.model.parameters()).view(-1)[0] += 1e-3  # one weight changed
    assert encoder_fingerprint(encoder.model, encoder.tokenizer) != before


def test_weights_changed_in_place_change_the_fingerprint_and_the_vectors_served(tiny_bert, tiny_bert_seed1, toy_concepts):
    """load_state_dict into a loaded encoder (a notebook's fine-tuning): the memoized fingerprint, the linker's
    vector cache and a bfloat16 copy all follow the new weights instead of serving the old ones."""
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 5})
    linker.initialize(vocabulary=toy_concepts)
    encoder, other = linker.encoder, Encoder(tiny_bert_seed1, device="cpu")
    before = encoder.fingerprint
    linker.retrieve(["hepatoma"], 0)
    linker.retrieve(["hepatoma"], 0)
    misses = linker.vector_cache.misses  # the second search was served from the cache
    encoder.model.load_state_dict(other.model.state_dict())
    assert encoder.fingerprint == other.fingerprint != before
    linker.retrieve(["hepatoma"], 0)
    assert linker.vector_cache.misses == misses + 1  # encoded again by the new weights
    half = Encoder(tiny_bert, device="cpu", backend="torch-bf16")
    old_vector = half.encode(["hepatoma"])[0]
    half.model.load_state_dict(other.model.state_dict())
    new_vector, wanted = half.encode(["hepatoma"])[0], other.encode(["hepatoma"])[0]
    assert numpy.abs(new_vector - wanted).max() < 0.05 < numpy.abs(old_vector - wanted).max()  # bfloat16 rounding only


def edit_model_config(folder: Path, **entries) -> None:
    """Change entries of a saved model's config.json (a user's edit; the weights stay as they are)."""
    path = Path(folder) / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf8")), **entries}), encoding="utf8")  # srsly writes 1e-12 as 0.0


@pytest.mark.parametrize("entry", [{"num_attention_heads": 4}, {"is_decoder": True}])
def test_fingerprint_differs_for_a_config_entry_that_changes_the_vectors_of_the_same_weights(tiny_bert, tmp_path, entry):
    shutil.copytree(tiny_bert, tmp_path / "edited")
    edit_model_config(tmp_path / "edited", **entry)
    encoder, edited = Encoder(tiny_bert, device="cpu"), Encoder(tmp_path / "edited", device="cpu")
    text = ["heart failure of the left ventricle"]
    # other vectors (a random tiny BERT attends almost uniformly, so they move little; more than rounding does)
    assert not numpy.allclose(encoder.encode(text), edited.encode(text), rtol=0, atol=1e-6)
    assert edited.fingerprint.split("-")[0] == encoder.fingerprint.split("-")[0]  # same weights and tokenizer
    assert not same_encoder(encoder.fingerprint, edited.fingerprint)


def test_an_activation_under_another_architectures_name_enters_the_fingerprint(tiny_bert, tmp_path):
    """DistilBERT calls its activation `activation`, not `hidden_act`: relu for gelu in its config.json moved vectors
    and links with the fingerprint unchanged (an audit). BERT-like fingerprints keep their two parts."""
    import torch
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    config = DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=1, n_heads=2, hidden_dim=37, max_position_embeddings=64)
    DistilBertModel(config).save_pretrained(tmp_path / "distil")
    tokenizer.save_pretrained(tmp_path / "distil")
    shutil.copytree(tmp_path / "distil", tmp_path / "relu")
    edit_model_config(tmp_path / "relu", activation="relu")
    gelu, relu = Encoder(tmp_path / "distil", device="cpu"), Encoder(tmp_path / "relu", device="cpu")
    text = ["heart failure of the left ventricle"]
    assert not numpy.allclose(gelu.encode(text), relu.encode(text), rtol=0, atol=1e-4)
    assert not same_encoder(gelu.fingerprint, relu.fingerprint) and not same_encoder(relu.fingerprint, gelu.fingerprint)
    recorded_before = gelu.fingerprint.rsplit("-", 1)[0]  # what an index built before this part recorded
    assert same_encoder(recorded_before, gelu.fingerprint) and same_encoder(recorded_before.split("-")[0], gelu.fingerprint)
    assert Encoder(tiny_bert, device="cpu").fingerprint.count("-") == 1


def test_a_fingerprint_recorded_before_the_config_suffix_matches_on_weights_and_tokenizer(tiny_bert, tiny_bert_seed1):
    current, other = Encoder(tiny_bert, device="cpu").fingerprint, Encoder(tiny_bert_seed1, device="cpu").fingerprint
    legacy = current.split("-")[0]
    assert same_encoder(current, current) and same_encoder(legacy, current)
    assert not same_encoder(other.split("-")[0], current) and not same_encoder(other, current)
    assert not same_encoder(None, current) and not same_encoder(current[:-1] + "x", current)


# a saved pipeline -----------------------------------------------------------------------------------


def test_index_and_memory_record_the_fingerprint_and_settings(linker_nlp, tmp_path):
    linker = linker_nlp.get_pipe("sapbert_linker")
    linker.add_mentions([("liver tumour", "D005")])
    linker_nlp.to_disk(tmp_path / "pipe")
    expected = {"encoder_fingerprint": linker.encoder.fingerprint, "pooling": "cls", "max_length": 25, "normalize": True}
    normalizer = {"lowercase": True, "remove_punctuation": False}
    for folder in ("index", "memory"):
        meta = srsly.read_json(tmp_path / "pipe" / "sapbert_linker" / folder / "meta.json")
        assert {key: meta[key] for key in expected} == expected
        recorded = meta["normalizer"] if folder == "index" else meta
        assert {key: recorded[key] for key in normalizer} == normalizer
        assert meta["format_version"] == (10 if folder == "index" else 3)
    index_meta = srsly.read_json(tmp_path / "pipe" / "sapbert_linker" / "index" / "meta.json")
    assert re.fullmatch(r"[0-9a-f]{16}", index_meta["vocabulary_hash"])


def test_unchanged_pipeline_loads_without_encoding_and_links_identically(linker_nlp, tmp_path, monkeypatch):
    linker_nlp.get_pipe("sapbert_linker").add_mentions([("liver tumour", "D005")])
    before = link(linker_nlp)
    linker_nlp.to_disk(tmp_path / "pipe")

    def no_encoding(*args, **kwargs):
        raise AssertionError("loading a pipeline must not encode anything")

    with monkeypatch.context() as patch:
        patch.setattr(Encoder, "encode", no_encoding)
        loaded = spacy.load(tmp_path / "pipe")
    assert link(loaded) == before


@pytest.mark.parametrize("key", sorted(CHANGED))
def test_a_config_override_of_a_vector_setting_is_refused_naming_it(linker_nlp, tmp_path, key):
    linker_nlp.to_disk(tmp_path / "pipe")
    before = DEFAULT[key]  # the fixture's config: the defaults
    with pytest.raises(IndexFormatError) as err:
        spacy.load(tmp_path / "pipe", config={"components": {"sapbert_linker": {key: CHANGED[key]}}})
    assert one_line(err) == (
        f"sapbert_linker: the index in {tmp_path / 'pipe' / 'sapbert_linker' / 'index'} was built with "
        f"{key}={before!r} but the config says {key}={CHANGED[key]!r}; rebuild it (build-index) or set {key} back"
    )


def test_an_edited_config_cfg_is_refused(linker_nlp, tmp_path):
    linker_nlp.to_disk(tmp_path / "pipe")
    cfg = tmp_path / "pipe" / "config.cfg"
    text = cfg.read_text(encoding="utf8")
    assert 'pooling = "cls"' in text
    cfg.write_text(text.replace('pooling = "cls"', 'pooling = "mean"'), encoding="utf8")
    with pytest.raises(IndexFormatError, match="pooling='cls' but the config says pooling='mean'"):
        spacy.load(tmp_path / "pipe")


def test_a_foreign_encoder_of_the_same_width_is_refused(linker_nlp, tmp_path, tiny_bert_seed1):
    linker_nlp.to_disk(tmp_path / "pipe")
    replace_saved_encoder(tmp_path / "pipe", tiny_bert_seed1)
    fingerprint = linker_nlp.get_pipe("sapbert_linker").encoder.fingerprint
    with pytest.raises(IndexFormatError) as err:
        spacy.load(tmp_path / "pipe")
    message = one_line(err)
    assert f"the index in {tmp_path / 'pipe' / 'sapbert_linker' / 'index'} was built with the encoder of fingerprint {fingerprint!r}" in message
    assert f"the encoder in {tmp_path / 'pipe' / 'sapbert_linker' / 'encoder'} has fingerprint {Encoder(tiny_bert_seed1, device='cpu').fingerprint!r}" in message
    assert "rebuild it (build-index)" in message


def test_an_encoder_whose_attention_heads_were_edited_is_refused(linker_nlp, tmp_path):
    linker_nlp.to_disk(tmp_path / "pipe")
    edit_model_config(tmp_path / "pipe" / "sapbert_linker" / "encoder", num_attention_heads=4)
    with pytest.raises(IndexFormatError, match=r"the index in .* was built with the encoder of fingerprint .*rebuild it \(build-index\)") as err:
        spacy.load(tmp_path / "pipe")
    one_line(err)


def test_an_index_that_recorded_the_fingerprint_without_its_suffix_still_loads(linker_nlp, tmp_path):
    """Indexes and memories saved before the fingerprint had its config suffix record its 16 digits alone."""
    linker_nlp.to_disk(tmp_path / "pipe")
    meta_path = tmp_path / "pipe" / "sapbert_linker" / "index" / "meta.json"
    meta = srsly.read_json(meta_path)
    meta["encoder_fingerprint"] = meta["encoder_fingerprint"].split("-")[0]
    srsly.write_json(meta_path, meta)
    assert link(spacy.load(tmp_path / "pipe")) == link(linker_nlp)


def test_from_bytes_into_a_component_with_another_setting_is_refused(linker_nlp, tiny_bert):
    data = linker_nlp.get_pipe("sapbert_linker").to_bytes()
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "max_length": 16})
    with pytest.raises(IndexFormatError, match=r"the index in index \(from bytes\) was built with max_length=25 but the config says max_length=16"):
        nlp.get_pipe("sapbert_linker").from_bytes(data)
    same = spacy.blank("en")
    same.add_pipe("sapbert_linker", config={"model": tiny_bert}).from_bytes(data)
    assert link(same) == link(linker_nlp)


@pytest.mark.parametrize("key", ["pooling", "lowercase"])
def test_a_memory_made_under_other_settings_is_refused(tiny_bert, toy_concepts, tmp_path, key):
    def pipeline(**config):
        nlp = spacy.blank("en")
        linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", **config})
        linker.initialize(vocabulary=toy_concepts)
        return nlp, linker

    old, old_linker = pipeline()
    old_linker.add_mentions([("liver tumour", "D005")])
    old.to_disk(tmp_path / "old")
    new, _ = pipeline(**{key: CHANGED[key]})  # index rebuilt under the new setting, memory copied over
    new.to_disk(tmp_path / "new")
    shutil.copytree(tmp_path / "old" / "sapbert_linker" / "memory", tmp_path / "new" / "sapbert_linker" / "memory")
    with pytest.raises(IndexFormatError) as err:
        spacy.load(tmp_path / "new")
    assert one_line(err) == (
        f"sapbert_linker: the mention memory in {tmp_path / 'new' / 'sapbert_linker' / 'memory'} was built with "
        f"{key}={DEFAULT[key]!r} but the config says {key}={CHANGED[key]!r}; rebuild it (add-memory) or set {key} back"
    )


DEFAULT = {"pooling": "cls", "max_length": 25, "lowercase": True, "normalize": True}


def test_a_memory_of_another_encoder_is_refused(linker_nlp, tiny_bert_seed1, toy_concepts, tmp_path):
    linker_nlp.get_pipe("sapbert_linker").add_mentions([("liver tumour", "D005")])
    linker_nlp.to_disk(tmp_path / "old")
    other = spacy.blank("en")
    other.add_pipe("sapbert_linker", config={"model": tiny_bert_seed1, "device": "cpu"}).initialize(vocabulary=toy_concepts)
    other.to_disk(tmp_path / "new")
    shutil.copytree(tmp_path / "old" / "sapbert_linker" / "memory", tmp_path / "new" / "sapbert_linker" / "memory")
    with pytest.raises(IndexFormatError, match=r"the mention memory in .*memory was built with the encoder of fingerprint .*\(add-memory\)"):
        spacy.load(tmp_path / "new")


# old formats -----------------------------------------------------------------------------------------


def downgrade(meta_path: Path) -> None:
    """meta.json as spacy-sapbert wrote it before fingerprints: format_version 1, no encoder settings."""
    meta = srsly.read_json(meta_path)
    for key in ("encoder_fingerprint", "pooling", "max_length", "vocabulary_hash"):
        meta.pop(key, None)
    meta["format_version"] = 1
    srsly.write_json(meta_path, meta)


def test_an_index_saved_before_fingerprints_asks_for_a_rebuild(linker_nlp, tmp_path):
    linker_nlp.to_disk(tmp_path / "pipe")
    downgrade(tmp_path / "pipe" / "sapbert_linker" / "index" / "meta.json")
    with pytest.raises(IndexFormatError) as err:
        spacy.load(tmp_path / "pipe")
    message = one_line(err)
    assert f"the index in {tmp_path / 'pipe' / 'sapbert_linker' / 'index'} has format_version 1 but this spacy-sapbert reads 10" in message
    assert message.endswith("rebuild it (build-index)")


def test_a_memory_saved_before_fingerprints_asks_for_a_rebuild(linker_nlp, tmp_path):
    linker_nlp.get_pipe("sapbert_linker").add_mentions([("liver tumour", "D005")])
    linker_nlp.to_disk(tmp_path / "pipe")
    downgrade(tmp_path / "pipe" / "sapbert_linker" / "memory" / "meta.json")
    with pytest.raises(IndexFormatError, match=r"mention memory in .* has format_version 1 .*rebuild it \(add-memory\)$"):
        spacy.load(tmp_path / "pipe")


def test_an_index_of_a_newer_format_asks_for_an_upgrade(linker_nlp, tmp_path):
    linker_nlp.to_disk(tmp_path / "pipe")
    meta_path = tmp_path / "pipe" / "sapbert_linker" / "index" / "meta.json"
    srsly.write_json(meta_path, {**srsly.read_json(meta_path), "format_version": 99})
    with pytest.raises(IndexFormatError, match="format_version 99, newer .*upgrade spacy-sapbert"):
        spacy.load(tmp_path / "pipe")


# the evaluation cache --------------------------------------------------------------------------------


def test_the_evaluation_cache_is_keyed_by_fingerprint_settings_and_vocabulary(tiny_bert, tiny_bert_seed1, toy_concepts, tmp_path, index_builds):
    from spacy_sapbert import evaluation

    builds = index_builds
    cache = tmp_path / "cache"
    encoder = Encoder(tiny_bert, device="cpu")
    first = evaluation.build_encoder_index(encoder, toy_concepts, cache)
    again = evaluation.build_encoder_index(Encoder(tiny_bert, device="cpu"), toy_concepts, cache)
    assert len(builds) == 1 and again.settings == first.settings and again.names == first.names
    variants = [
        (Encoder(tiny_bert, device="cpu", pooling="mean"), toy_concepts),
        (Encoder(tiny_bert, device="cpu", max_length=16), toy_concepts),
        (Encoder(tiny_bert_seed1, device="cpu"), toy_concepts),  # same width, other weights
        (encoder, toy_concepts[:-1] + [Concept("D006", "Renal disease", ["kidney disorders"])]),  # one name changed
    ]
    for other_encoder, concepts in variants:
        index = evaluation.build_encoder_index(other_encoder, concepts, cache)
        assert index.settings["encoder_fingerprint"] == other_encoder.fingerprint
        assert index.settings["pooling"] == other_encoder.pooling and index.settings["max_length"] == other_encoder.max_length
    assert len(builds) == 1 + len(variants)
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 1 + len(variants)


def test_an_evaluation_killed_while_encoding_resumes_from_its_finished_chunks(tiny_bert, tmp_path):
    from spacy_sapbert import evaluation

    concepts = [Concept(f"D{i}", f"disease number {i}", [f"syndrome {i * 7}"]) for i in range(12)]
    cache = tmp_path / "cache"
    encoder = Encoder(tiny_bert, device="cpu")
    calls: list = []

    class CountingEncoder:
        """The encoder, counting its calls; killed (an exception) on the call numbered `kill_at`."""

        def __init__(self, kill_at=None):
            self.kill_at = kill_at

        def __getattr__(self, name):
            return getattr(encoder, name)

        def encode(self, texts, **kwargs):
            calls.append(len(texts))
            if len(calls) == self.kill_at:
                raise RuntimeError("killed")
            return encoder.encode(texts, **kwargs)

    with pytest.raises(RuntimeError, match="killed"):
        evaluation.build_encoder_index(CountingEncoder(kill_at=3), concepts, cache, chunk_size=5)
    [chunks] = [p for p in cache.iterdir() if not p.name.endswith(".lock")]  # beside the key's lock file
    assert chunks.name.endswith(".chunks") and len(list(chunks.glob("chunk-*.npy"))) == 2

    calls.clear()
    resumed = evaluation.build_encoder_index(CountingEncoder(), concepts, cache, chunk_size=5)
    assert calls == [5, 5, 4]  # 24 names: chunks 2..4 only
    key = chunks.name[: -len(".chunks")]
    assert sorted(p.name for p in cache.iterdir()) == [key, key + ".lock"]  # the chunks are removed once saved
    whole = evaluation.build_encoder_index(encoder, concepts)
    assert resumed.names == whole.names
    numpy.testing.assert_allclose(
        resumed.vectors.reconstruct_n(0, len(whole.names)), whole.vectors.reconstruct_n(0, len(whole.names)), atol=1e-5
    )


def test_a_cached_index_under_the_wrong_key_is_refused(tiny_bert, toy_concepts, tmp_path):
    from spacy_sapbert import evaluation

    cache = tmp_path / "cache"
    evaluation.build_encoder_index(Encoder(tiny_bert, device="cpu", pooling="mean"), toy_concepts, cache)
    [mean_dir] = [p for p in cache.iterdir() if p.is_dir()]
    encoder = Encoder(tiny_bert, device="cpu")
    from spacy_sapbert.index import encoder_settings, vocabulary_hash
    from spacy_sapbert.kb import KnowledgeBase

    key = evaluation.index_cache_key(
        {**encoder_settings(encoder), **Normalizer().settings(), "normalize": True, "batch_size": encoder.batch_size},
        vocabulary_hash(KnowledgeBase(toy_concepts)),
    )
    shutil.copytree(mean_dir, cache / key)
    with pytest.raises(IndexFormatError, match="cached index in .* was built with pooling='mean' but this run uses pooling='cls'"):
        evaluation.build_encoder_index(encoder, toy_concepts, cache)


def test_a_config_override_of_index_type_is_refused(linker_nlp, tmp_path):
    linker_nlp.to_disk(tmp_path / "pipe")
    with pytest.raises(IndexFormatError, match="index_type='flat' but the config says index_type='hnsw'"):
        spacy.load(tmp_path / "pipe", config={"components": {"sapbert_linker": {"index_type": "hnsw"}}})

