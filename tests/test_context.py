"""Context-aware mentions: the [Ms] ... [Me] window, DHNS training in context, and the linker's
`context_window` (names stay context-free)."""
from __future__ import annotations

import json

import numpy
import pytest
import spacy
import torch

from spacy_sapbert.context import MENTION_END, MENTION_START, MentionInContext, add_markers, context_vectors, window_ids
from spacy_sapbert.encoder import load_pretrained
from spacy_sapbert.errors import SapbertError
from spacy_sapbert.training.dhns import train_dhns
from test_dhns import PUBTATOR, VOCAB, config_for

TEXT = "the patient with heart failure and liver cancer was seen in the clinic"


@pytest.fixture(scope="module")
def marked(tiny_bert):
    tokenizer, model = load_pretrained(tiny_bert)
    rows_before = model.get_input_embeddings().weight.shape[0]
    assert add_markers(tokenizer, model) and not add_markers(tokenizer, model)
    assert model.get_input_embeddings().weight.shape[0] == rows_before + 2
    model.eval()
    return tokenizer, model


def test_the_window_marks_the_mention_and_splits_the_context_between_its_sides(marked):
    tokenizer, _ = marked
    start = TEXT.index("heart failure")
    item = MentionInContext(TEXT, start, start + len("heart failure"))
    # a window wider than the text: the same ids as tokenizing the marked text as one string
    ids, first, end = window_ids(tokenizer, item, 64)
    marked_text = f"{TEXT[:start]} {MENTION_START} heart failure {MENTION_END} {TEXT[item.end:]}"
    assert ids == tokenizer(marked_text)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids[first - 1 : end + 1]) == [MENTION_START, "heart", "failure", MENTION_END]
    # a narrow window: 12 pieces = [CLS] + 3 left + [Ms] + 2 + [Me] + 3 right + [SEP], the pieces nearest the mention
    ids, first, end = window_ids(tokenizer, item, 12)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert len(ids) == 12 and tokens[first - 1] == MENTION_START and tokens[end] == MENTION_END
    left = tokenizer.convert_ids_to_tokens(tokenizer(TEXT[:start], add_special_tokens=False)["input_ids"])
    right = tokenizer.convert_ids_to_tokens(tokenizer(TEXT[item.end:], add_special_tokens=False)["input_ids"])
    assert end - first == 2 and tokens[1:first - 1] == left[-3:] and tokens[end + 1 : -1] == right[:3]
    # a mention at the very start lends the whole budget to the right side
    ids, first, _ = window_ids(tokenizer, MentionInContext(TEXT, 0, 3), 12)
    assert first == 2 and len(ids) == 12
    with pytest.raises(SapbertError, match="too small"):
        window_ids(tokenizer, item, 4)


def test_the_vector_is_the_mean_of_the_mention_pieces_and_depends_on_the_context(marked):
    tokenizer, model = marked
    start = TEXT.index("heart failure")
    item = MentionInContext(TEXT, start, start + len("heart failure"))
    other = MentionInContext("heart failure", 0, len("heart failure"))
    with torch.no_grad():
        vectors = context_vectors(model, tokenizer, [item, other], window=16, device="cpu")
        ids, first, end = window_ids(tokenizer, item, 16)
        hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    assert torch.allclose(vectors[0], hidden[first:end].mean(0), atol=1e-5)  # padding of the batch changes nothing
    assert not torch.allclose(vectors[0], vectors[1], atol=1e-3)


def test_dhns_in_context_trains_a_model_with_markers_that_the_linker_uses(tmp_path, tiny_bert, one_thread):
    tiny_task = tmp_path
    (tiny_task / "train.txt").write_text(PUBTATOR, encoding="utf8")
    (tiny_task / "vocab.txt").write_text(VOCAB, encoding="utf8")
    model_dir = train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "run", epochs=2, context_window=16))
    log = [json.loads(line) for line in (tiny_task / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [e["mined"] for e in log if "mined" in e] == [7, 7]  # every annotated mention, in its document
    tokenizer, _ = load_pretrained(str(model_dir))
    assert MENTION_START in tokenizer.get_vocab() and MENTION_END in tokenizer.get_vocab()

    def linker_pipeline(model, context_window):
        nlp = spacy.blank("en")
        nlp.add_pipe("sapbert_linker", config={"model": model, "device": "cpu", "k": 5, "context_window": context_window,
                                               "pooling": "mean"})
        nlp.get_pipe("sapbert_linker").initialize(vocabulary=str(tiny_task / "vocab.txt"))
        return nlp

    nlp = linker_pipeline(str(model_dir), 16)
    docs = []
    for text in ("Heart failure was severe.", "In this family, heart failure was severe."):
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(text.lower().index("heart failure"), text.lower().index("heart failure") + 13, label="Disease")]
        docs.append(nlp(doc))
    (first,), (second,) = (doc.ents for doc in docs)
    assert first._.kb_ents and second._.kb_ents
    assert first._.kb_ents[0][1] != pytest.approx(second._.kb_ents[0][1], abs=1e-6)  # the context changed the vector
    loaded = spacy.load(_saved(nlp, tiny_task / "pipeline"))
    assert loaded.get_pipe("sapbert_linker").context_window == 16
    reloaded = loaded(docs[1].copy()).ents[0]._.kb_ents
    assert [c for c, _ in reloaded] == [c for c, _ in second._.kb_ents]
    assert [s for _, s in reloaded] == pytest.approx([s for _, s in second._.kb_ents], abs=1e-5)
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    result = CliRunner().invoke(app, ["build-index", str(tiny_task / "vocab.txt"), str(tiny_task / "built"), "--model", str(model_dir),
                                      "--context-window", "16", "--label", "", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    built = spacy.load(tiny_task / "built")
    assert built.get_pipe("sapbert_linker").context_window == 16
    assert [c for c, _ in built(docs[1].copy()).ents[0]._.kb_ents] == [c for c, _ in second._.kb_ents]
    with pytest.raises(SapbertError, match=r"`context_window` is 16, but the encoder .* has no \[Ms\]/\[Me\] mention markers"):
        linker_pipeline(tiny_bert, 16)  # at initialize, before the names are encoded (it was said at the first doc)
    plain = linker_pipeline(tiny_bert, 0)
    plain.to_disk(tiny_task / "plain")
    with pytest.raises(SapbertError, match=r"`context_window` is 16, but the encoder .* has no \[Ms\]/\[Me\] mention markers"):
        spacy.load(tiny_task / "plain", config={"components": {"sapbert_linker": {"context_window": 16}}})  # and at load
    with pytest.raises(SapbertError, match="context_window"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "context_window": 4})


def _saved(nlp, path):
    nlp.to_disk(path)
    return path


def test_context_free_names_keep_their_vectors_after_markers_are_added(tiny_bert, marked):
    tokenizer, model = load_pretrained(tiny_bert)
    before = tokenizer(["heart failure"], return_tensors="pt")
    with torch.no_grad():
        expected = model(**before).last_hidden_state
    marked_tokenizer, marked_model = marked
    after = marked_tokenizer(["heart failure"], return_tensors="pt")
    with torch.no_grad():
        got = marked_model(**after).last_hidden_state
    assert torch.equal(before["input_ids"], after["input_ids"]) and numpy.allclose(expected.numpy(), got.numpy(), atol=1e-6)
