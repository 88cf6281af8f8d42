"""A trained NER in front of the linker: `assemble --ner`, and the checks that keep the copy faithful."""
import pytest
import spacy
from spacy.training import Example
from spacy.util import fix_random_seed
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import SapbertError
from spacy_sapbert.pipeline import add_trained_ner

runner = CliRunner()

TRAIN = [
    ("Patients with hepatoma were treated.", [(14, 22)]),
    ("The boy had cardiac failure and fever.", [(12, 27)]),
    ("Hepatoma is a liver cancer.", [(0, 8), (14, 26)]),
    ("No sign of nephropathy was seen.", [(11, 22)]),
    ("Nephropathy and hepatoma together.", [(0, 11), (16, 24)]),
    ("She was treated for cardiac failure.", [(20, 35)]),
]


def train_toy_ner(folder, shared_tok2vec: bool = True):
    """A tiny NER overfit on TRAIN (label Disease); by default its ner listens to a shared tok2vec, as spaCy's
    quickstart configs build it."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    if shared_tok2vec:
        nlp.add_pipe("tok2vec")
    nlp.add_pipe("ner")
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": [(s, e, "Disease") for s, e in spans]}) for t, spans in TRAIN]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(40):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    nlp.to_disk(folder)
    return folder


@pytest.fixture(scope="module")
def toy_ner(tmp_path_factory):
    return train_toy_ner(tmp_path_factory.mktemp("ner") / "model-best")


@pytest.fixture
def linker_only(tmp_path, tiny_bert):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nD3||Kidney disease|nephropathy\n", encoding="utf8")
    result = runner.invoke(app, ["build-index", str(vocab), str(tmp_path / "linker"), "--model", tiny_bert, "--label", ""])
    assert result.exit_code == 0, result.output
    return tmp_path / "linker"


def test_assemble_puts_the_trained_ner_before_the_linker_self_contained(toy_ner, linker_only, tmp_path):
    result = runner.invoke(app, ["assemble", str(linker_only), str(tmp_path / "pipe"), "--ner", str(toy_ner)])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "pipe")
    assert nlp.pipe_names == ["ner", "sapbert_abbreviations", "sapbert_linker"]  # no tok2vec: the listener was replaced
    assert nlp.get_pipe("sapbert_abbreviations").label_short_forms
    result = runner.invoke(app, ["assemble", str(linker_only), str(tmp_path / "plain"), "--ner", str(toy_ner), "--no-short-forms"])
    assert result.exit_code == 0, result.output
    assert not spacy.load(tmp_path / "plain").get_pipe("sapbert_abbreviations").label_short_forms
    # neither --ner nor --matcher-vocab: a pipeline that finds no mention (one to put a NER in front of) is written,
    # and says that it links nothing on raw text (it said nothing)
    from spacy_sapbert.errors import ConfigWarning

    with pytest.warns(ConfigWarning, match="no component finds mentions"):
        result = runner.invoke(app, ["assemble", str(linker_only), str(tmp_path / "blind")])
    assert result.exit_code == 0 and spacy.load(tmp_path / "blind")("Patients with hepatoma.").ents == ()
    result = runner.invoke(app, ["assemble", str(linker_only), str(tmp_path / "labelled"), "--ner", str(toy_ner), "--label", "Disease"])
    assert result.exit_code == 1 and "--label describes the dictionary matcher; give --matcher-vocab" in result.output  # it did nothing
    doc = nlp("Patients with hepatoma were treated.")
    assert [(e.text, e.label_) for e in doc.ents] == [("hepatoma", "Disease")]
    assert doc.ents[0].kb_id_ in {"D1", "D2", "D3"} and doc.ents[0]._.kb_ents
    trained = spacy.load(toy_ner)
    for text, _ in TRAIN:  # the copy finds exactly what the trained pipeline finds
        assert [(e.start_char, e.end_char) for e in nlp(text).ents] == [(e.start_char, e.end_char) for e in trained(text).ents]


def test_assemble_puts_the_ner_before_the_dictionary_matcher_build_index_made(toy_ner, tmp_path, tiny_bert):
    """A linker built with --label has a dictionary matcher; the NER went after it, so the matcher's entities won
    wherever they overlapped. Now the NER comes first and the matcher adds only what the NER left free."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("D1||Heart failure|cardiac failure|failure\nD2||Liver cancer|hepatoma\nD3||Fever|pyrexia\n", encoding="utf8")
    result = runner.invoke(app, ["build-index", str(vocab), str(tmp_path / "linker"), "--model", tiny_bert, "--label", "DISEASE"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["assemble", str(tmp_path / "linker"), str(tmp_path / "pipe"), "--ner", str(toy_ner)])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "pipe")
    assert nlp.pipe_names == ["ner", "dictionary_matcher", "sapbert_abbreviations", "sapbert_linker"]
    doc = nlp("She was treated for cardiac failure. The pyrexia was seen.")
    assert [(e.text, e.label_) for e in doc.ents][:1] == [("cardiac failure", "Disease")]  # the NER's, not the matcher's
    assert ("pyrexia", "DISEASE") in [(e.text, e.label_) for e in doc.ents]  # the matcher adds what the NER missed


def test_reassembling_moves_an_earlier_detector_after_the_ner_with_short_forms(toy_ner, linker_only, tmp_path):
    # a pipeline assembled before short forms were labelled: the detector in front, label_short_forms off
    old = spacy.load(linker_only)
    old.add_pipe("sapbert_abbreviations", first=True)
    old.to_disk(tmp_path / "old")
    result = runner.invoke(app, ["assemble", str(tmp_path / "old"), str(tmp_path / "pipe"), "--ner", str(toy_ner)])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "pipe")
    assert nlp.pipe_names == ["ner", "sapbert_abbreviations", "sapbert_linker"]
    assert nlp.get_pipe("sapbert_abbreviations").label_short_forms
    result = runner.invoke(app, ["assemble", str(tmp_path / "old"), str(tmp_path / "kept"), "--ner", str(toy_ner), "--no-abbreviations"])
    assert result.exit_code == 0, result.output
    kept = spacy.load(tmp_path / "kept")
    assert kept.pipe_names == ["sapbert_abbreviations", "ner", "sapbert_linker"]
    text = "She was treated for cardiac failure (CF). No CF was seen."
    second_cf = text.rindex("CF")
    assert second_cf not in [e.start_char for e in kept(text).ents]  # the NER alone misses it
    doc = nlp(text)
    short_form = [e for e in doc.ents if e.start_char == second_cf]
    assert [e.text for e in short_form] == ["CF"]  # labelled because its long form is an entity
    assert short_form[0].kb_id_ == doc.ents[0].kb_id_ and doc.ents[0].text == "cardiac failure"


def test_a_ner_pipeline_that_tokenizes_differently_is_refused(toy_ner, tmp_path):
    other = spacy.load(toy_ner)
    other.tokenizer.add_special_case("hepatoma", [{"ORTH": "hepat"}, {"ORTH": "oma"}])
    other.to_disk(tmp_path / "other")
    with pytest.raises(SapbertError, match="tokenizes differently"):
        add_trained_ner(spacy.blank("en"), tmp_path / "other")


def test_a_pipeline_without_ner_or_a_missing_folder_is_an_error(tmp_path):
    spacy.blank("en").to_disk(tmp_path / "blank")
    with pytest.raises(SapbertError, match="has no ner component"):
        add_trained_ner(spacy.blank("en"), tmp_path / "blank")
    with pytest.raises(SapbertError, match="cannot load the NER pipeline"):
        add_trained_ner(spacy.blank("en"), tmp_path / "absent")


def toy_docbin(path):
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = []
    for text, spans in TRAIN:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(s, e, label="Disease") for s, e in spans]
        docs.append(doc)
    DocBin(docs=docs).to_disk(path)
    return path


def test_train_ner_passes_gpu_id_to_spacy_train(tmp_path, monkeypatch):
    """train-ner refused --gpu-id (no such option) and always trained on the CPU (found by an audit)."""
    import spacy.cli.train

    from conftest import ROOT

    used = []

    def fake_train(config, output, use_gpu=-1, overrides=None):
        used.append(use_gpu)
        raise SystemExit(1)  # spaCy's error exit: nothing is written

    monkeypatch.setattr(spacy.cli.train, "train", fake_train)
    config = ROOT / "projects" / "sapbert" / "configs" / "ner.cfg"
    for extra, expected in (([], -1), (["--gpu-id", "0"], 0)):
        result = runner.invoke(app, ["train-ner", str(config), str(tmp_path / "ner"), *extra])
        assert result.exit_code == 1 and used[-1] == expected and not (tmp_path / "ner").exists()


def test_train_ner_writes_model_best_complete_or_nothing(tmp_path):
    from conftest import ROOT

    config = ROOT / "projects" / "sapbert" / "configs" / "ner.cfg"
    data = toy_docbin(tmp_path / "toy.spacy")
    args = ["train-ner", str(config), str(tmp_path / "ner"), "--paths.train", str(data), "--paths.dev", str(data),
            "--training.max_steps", "4", "--training.eval_frequency", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert spacy.load(tmp_path / "ner" / "model-best").pipe_names == ["ner"]
    assert sorted(p.name for p in (tmp_path / "ner").iterdir()) == [".sapbert-written.json", "model-best", "model-last", "train_ner.json"]

    again = runner.invoke(app, args)  # an earlier output is replaced only when asked
    assert again.exit_code == 1 and "--overwrite" in again.output
    notes = tmp_path / "ner" / "model-best" / "notes.md"  # and never with a file someone put inside it
    notes.write_text("keep", encoding="utf8")
    inside = runner.invoke(app, args + ["--overwrite"])
    assert inside.exit_code == 1 and "model-best/notes.md" in inside.output and notes.read_text(encoding="utf8") == "keep"
    notes.unlink()
    assert runner.invoke(app, args + ["--overwrite"]).exit_code == 0

    failed = runner.invoke(app, args[:3] + ["--paths.train", str(tmp_path / "absent.spacy")] + args[5:] + ["--overwrite"])
    assert failed.exit_code != 0
    assert spacy.load(tmp_path / "ner" / "model-best").pipe_names == ["ner"]  # the earlier output is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ner", "toy.spacy"]  # no half-written folder left behind

    import shutil

    shutil.copytree(tmp_path / "ner" / "model-best", tmp_path / "plain" / "model-best")  # spacy train's own output:
    shutil.copytree(tmp_path / "ner" / "model-last", tmp_path / "plain" / "model-last")  # not ours, never replaced
    refused = runner.invoke(app, [args[0], args[1], str(tmp_path / "plain"), *args[3:], "--overwrite"])
    assert refused.exit_code == 1 and sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["model-best", "model-last"]

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep", encoding="utf8")
    refused = runner.invoke(app, [args[0], args[1], str(tmp_path / "mine"), *args[3:], "--overwrite"])
    assert refused.exit_code == 1 and (tmp_path / "mine" / "notes.txt").read_text(encoding="utf8") == "keep"


def test_a_terminated_train_ner_leaves_neither_output_nor_temporary_folder(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT

    data = toy_docbin(tmp_path / "toy.spacy")
    args = [sys.executable, "-m", "spacy_sapbert", "train-ner", str(ROOT / "projects" / "sapbert" / "configs" / "ner.cfg"),
            str(tmp_path / "ner"), "--paths.train", str(data), "--paths.dev", str(data),
            "--training.max_steps", "1000000", "--training.eval_frequency", "100000"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.time() + 120
    while time.time() < deadline and not any(".ner.sapbert-tmp-" in p.name for p in tmp_path.iterdir()):
        time.sleep(0.2)
    time.sleep(5)  # into the training loop
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy.spacy"]


def test_train_ner_names_a_config_that_is_not_utf8_or_not_a_training_config(tmp_path):
    (tmp_path / "latin1.cfg").write_bytes(b'[nlp]\nlang = "en"\n# caf\xe9\n[training]\n')
    (tmp_path / "empty.cfg").write_text("", encoding="utf8")
    for name, expected in (("latin1.cfg", "not valid UTF-8 (byte 0xe9"), ("empty.cfg", "not a spaCy training config (no [nlp], [training] section)")):
        result = runner.invoke(app, ["train-ner", str(tmp_path / name), str(tmp_path / "ner")])
        assert result.exit_code == 1 and f"{tmp_path / name}: {expected}" in result.output, result.output
        assert not (tmp_path / "ner").exists()


def test_a_ner_copied_into_a_pipeline_brings_its_static_vectors_and_lookup_tables(tmp_path):
    """add_pipe(source=...) copies the component and its strings only: a NER trained with static vectors crashed on
    its first text in the assembled pipeline, and one trained with a lexeme_norm table found other entities
    (found by an audit)."""
    import numpy
    import spacy
    from spacy.training import Example
    from spacy.util import fix_random_seed

    from spacy_sapbert.pipeline import add_trained_ner

    train = [("Patients with hepatoma were treated.", [(14, 22)]), ("The boy had cardiac failure and fever.", [(12, 27)]),
             ("Hepatoma is a liver cancer.", [(0, 8), (14, 26)]), ("No sign of nephropathy was seen.", [(11, 22)])]
    fix_random_seed(0)
    ner_nlp = spacy.blank("en")
    rng = numpy.random.default_rng(0)
    for word in sorted({t.text.lower() for text, _ in train for t in ner_nlp.make_doc(text)}):
        ner_nlp.vocab.set_vector(word, rng.normal(size=16).astype("float32"))
    ner_nlp.vocab.lookups.add_table("lexeme_norm", {w: "diseaseword" for w in ["hepatoma", "nephropathy", "failure", "cancer"]})
    embed = {"@architectures": "spacy.MultiHashEmbed.v2", "width": 32, "attrs": ["NORM"], "rows": [500], "include_static_vectors": True}
    ner_nlp.add_pipe("ner", config={"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False, "hidden_width": 32,
        "maxout_pieces": 2, "use_upper": True, "nO": None,
        "tok2vec": {"@architectures": "spacy.Tok2Vec.v2", "embed": embed, "encode": {
            "@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 32, "depth": 1, "window_size": 1, "maxout_pieces": 2}}}})
    examples = [Example.from_dict(ner_nlp.make_doc(t), {"entities": [(s, e, "Disease") for s, e in spans]}) for t, spans in train]
    optimizer = ner_nlp.initialize(lambda: examples)
    for _ in range(30):
        ner_nlp.update(examples, sgd=optimizer, drop=0.0)
    ner_nlp.to_disk(tmp_path / "ner")
    nlp = spacy.blank("en")
    nlp.vocab["hepatoma"]  # a lexeme made before the table comes keeps the norm it was made with, unless reset
    add_trained_ner(nlp, tmp_path / "ner")
    # in memory too, before a save: the table was copied but not read until the pipeline was saved and loaded
    assert [t.norm_ for t in nlp.make_doc("hepatoma and nephropathy")] == ["diseaseword", "and", "diseaseword"]
    nlp.to_disk(tmp_path / "assembled")
    trained, assembled = spacy.load(tmp_path / "ner"), spacy.load(tmp_path / "assembled")
    assert assembled.vocab.vectors.shape == trained.vocab.vectors.shape and trained.vocab.vectors.shape[1] == 16
    assert assembled.vocab.lookups.has_table("lexeme_norm")
    texts = [t for t, _ in train] + ["Nephropathy and hepatoma were seen."]
    assert [[e.text for e in assembled(t).ents] for t in texts] == [[e.text for e in trained(t).ents] for t in texts]


def test_assemble_warns_when_no_linker_links_the_label_its_mention_finders_give(linker_only, tmp_path):
    """A linker restricted to Disease behind a matcher that labels ENTITY linked nothing, and assemble said nothing
    (found by an audit)."""
    import warnings

    from spacy_sapbert.errors import ConfigWarning

    restricted = spacy.load(linker_only, config={"components": {"sapbert_linker": {"labels": ["Disease"]}}})
    restricted.to_disk(tmp_path / "disease-linker")
    vocab = tmp_path / "vocab.txt"
    args = ["assemble", str(tmp_path / "disease-linker"), str(tmp_path / "pipe"), "--matcher-vocab", str(vocab)]
    with pytest.warns(ConfigWarning, match=r"label entities \['ENTITY'\], but the linkers link only \['Disease'\]"):
        assert runner.invoke(app, args).exit_code == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        result = runner.invoke(app, args[:2] + [str(tmp_path / "ok"), "--matcher-vocab", str(vocab), "--label", "Disease"])
    assert result.exit_code == 0, result.output
    assert spacy.load(tmp_path / "ok")("Patients with hepatoma.").ents[0].kb_id_ == "D2"
