import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app

runner = CliRunner()


@pytest.mark.parametrize("command", ["build-index", "link", "demo"])
def test_every_command_has_help(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output and ("--pipeline" in result.output or "--model" in result.output)


def test_every_registered_command_answers_help():
    names = [command.name for command in app.registered_commands]
    assert {"build-index", "link", "demo", "evaluate", "assemble", "add-memory", "extract", "pairs", "train", "train-dhns"} <= set(names)
    for name in names:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output, name


def test_module_entry_lists_the_commands():
    out = subprocess.run([sys.executable, "-m", "spacy_sapbert", "--help"], capture_output=True, text=True, check=True)
    for command in ("build-index", "link", "demo"):
        assert command in out.stdout


@pytest.fixture
def built_pipeline(tmp_path, tiny_bert):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nOMIM:3||Kidney disease|nephropathy\n",
        encoding="utf8",
    )
    result = runner.invoke(
        app, ["build-index", str(vocab), str(tmp_path / "pipe"), "--model", tiny_bert, "--label", "DISEASE"]
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "pipe"


def test_build_index_then_link_from_stdin_gives_json_lines(built_pipeline):
    text = "Hepatoma with cardiac failure.\n\nNo finding here.\n"
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline)], input=text)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [r["text"] for r in rows] == ["Hepatoma with cardiac failure.", "No finding here."]
    ents = rows[0]["ents"]
    assert [(e["text"], e["label"], e["kb_id"], e["name"]) for e in ents] == [
        ("Hepatoma", "DISEASE", "D2", "Liver cancer"),
        ("cardiac failure", "DISEASE", "D1", "Heart failure"),
    ]
    assert ents[0]["score"] == pytest.approx(1.0, abs=1e-3) and ents[0]["candidates"][0][0] == "D2"
    assert rows[1]["ents"] == []


def test_link_reads_a_file(built_pipeline, tmp_path):
    doc = tmp_path / "in.txt"
    doc.write_text("nephropathy\n", encoding="utf8")
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline), "--file", str(doc)])
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert row["ents"][0]["kb_id"] == "OMIM:3"


def test_build_index_reports_a_malformed_vocabulary_line(tmp_path, tiny_bert):
    vocab = tmp_path / "bad.txt"
    vocab.write_text("D1||Heart failure\nthis line has no separator\n", encoding="utf8")
    result = runner.invoke(app, ["build-index", str(vocab), str(tmp_path / "pipe"), "--model", tiny_bert])
    assert result.exit_code == 1
    [line] = [l for l in result.output.splitlines() if l.startswith("error:")]
    assert "bad.txt" in line and "line 2" in line
    assert not (tmp_path / "pipe").exists()


def test_add_memory_stores_corpus_mentions_and_settings_in_the_pipeline(built_pipeline, tmp_path):
    import spacy

    corpus = tmp_path / "train.txt"
    corpus.write_text(
        "7|t|Renal trouble (RT) again.\n7|a|Liver mass seen; RT persists.\n"
        "7\t0\t13\tRenal trouble\tDisease\tOMIM:3\n7\t15\t17\tRT\tDisease\tOMIM:3\n"
        "7\t26\t36\tLiver mass\tDisease\tD2\n7\t26\t36\tLiver mass\tChemical\tD1\n\n",
        encoding="utf8",
    )
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"memory_k": 1, "memory_weight": 0.9}), encoding="utf8")
    args = ["add-memory", str(built_pipeline), str(corpus), "--label", "Disease", "--output", str(tmp_path / "out"), "--settings", str(settings)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "out")
    linker = nlp.get_pipe("sapbert_linker")
    # no abbreviation detector in this pipeline: the linker searches "rt" as it is, so the memory holds "rt"
    assert sorted(zip(linker.memory.texts, linker.memory.ids)) == [("liver mass", "D2"), ("renal trouble", "OMIM:3"), ("rt", "OMIM:3")]
    assert nlp.config["components"]["sapbert_linker"]["memory_weight"] == 0.9
    assert linker.memory_settings.memory_k == 1
    doc = nlp.make_doc("liver mass")
    doc.ents = [doc.char_span(0, 10, label="DISEASE")]
    assert linker(doc).ents[0].kb_id_ == "D2"

    nlp = spacy.load(built_pipeline)
    nlp.add_pipe("sapbert_abbreviations", first=True)
    nlp.to_disk(tmp_path / "with-abbreviations")
    result = runner.invoke(app, ["add-memory", str(tmp_path / "with-abbreviations"), str(corpus), "--label", "Disease", "--output", str(tmp_path / "out2")])
    assert result.exit_code == 0, result.output
    memory = spacy.load(tmp_path / "out2").get_pipe("sapbert_linker").memory
    assert sorted(zip(memory.texts, memory.ids)) == [("liver mass", "D2"), ("renal trouble", "OMIM:3")]  # "RT" as its long form

    result = runner.invoke(app, ["add-memory", str(built_pipeline), str(corpus), "--label", "Gene", "--output", str(tmp_path / "out3")])
    assert result.exit_code != 0 and "'Chemical', 'Disease'" in result.output


def test_build_index_writes_no_machine_path_of_the_vocabulary_into_the_config(built_pipeline, tmp_path):
    config = (built_pipeline / "config.cfg").read_text(encoding="utf8")
    assert str(tmp_path) not in config and "vocab.txt" not in config
    assert "vocabulary" not in config


@pytest.fixture
def two_linker_pipeline(tmp_path, tiny_bert):
    """A saved pipeline: an entity ruler for Disease and Chemical names, then one linker per label."""
    import spacy

    from spacy_sapbert.kb import Concept

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"})
    ruler.add_patterns([{"label": "Disease", "pattern": "hepatoma"}, {"label": "Chemical", "pattern": "advil"}])
    vocabularies = {
        "Disease": [Concept("D1", "Heart failure"), Concept("D2", "Liver cancer", ["hepatoma"])],
        "Chemical": [Concept("C1", "Aspirin"), Concept("C2", "Ibuprofen", ["advil"])],
    }
    for label, concepts in vocabularies.items():
        linker = nlp.add_pipe("sapbert_linker", name=f"{label.lower()}_linker", config={"model": tiny_bert, "labels": [label]})
        linker.initialize(vocabulary=concepts)
    nlp.to_disk(tmp_path / "two")
    return tmp_path / "two"


def error_line(result) -> str:
    [line] = [l for l in result.output.splitlines() if l.startswith("error:")]
    return line


def test_link_names_each_id_from_the_linker_of_its_label(two_linker_pipeline):
    result = runner.invoke(app, ["link", "Hepatoma, then Advil.", "--pipeline", str(two_linker_pipeline)])
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(e["text"], e["kb_id"], e["name"]) for e in row["ents"]] == [("Hepatoma", "D2", "Liver cancer"), ("Advil", "C2", "Ibuprofen")]


def test_demo_and_add_memory_need_component_when_a_pipeline_has_two_linkers(two_linker_pipeline, tmp_path, monkeypatch):
    import spacy

    from spacy_sapbert.linker import SapbertLinker

    result = runner.invoke(app, ["demo", "--pipeline", str(two_linker_pipeline), "--mention", "advil"])
    assert result.exit_code == 1
    assert "['disease_linker', 'chemical_linker']; choose one with --component NAME" in error_line(result)
    result = runner.invoke(app, ["demo", "--pipeline", str(two_linker_pipeline), "--mention", "advil", "--component", "chemical_linker"])
    assert result.exit_code == 0, result.output
    assert "'advil'" in result.output and "C2" in result.output.split("Free-form")[1]
    searched = []
    monkeypatch.setattr(SapbertLinker, "search_texts", lambda self, texts, *a, **k: searched.extend(texts) or [[] for _ in texts])
    runner.invoke(app, ["demo", "--pipeline", str(two_linker_pipeline), "--mention", "Advil", "--component", "chemical_linker"])
    assert searched == ["Advil"]  # as written: the linker's own `lowercase` setting decides
    monkeypatch.undo()

    corpus = tmp_path / "train.txt"
    corpus.write_text("7|t|Liver mass seen.\n7|a|\n7\t0\t10\tLiver mass\tDisease\tD2\n\n", encoding="utf8")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"memory_weight": 0.9}), encoding="utf8")
    args = ["add-memory", str(two_linker_pipeline), str(corpus), "--settings", str(settings), "--output", str(tmp_path / "out")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "choose one with --component NAME" in error_line(result)
    result = runner.invoke(app, args + ["--component", "disease_linker"])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "out")
    assert nlp.config["components"]["disease_linker"]["memory_weight"] == 0.9
    assert nlp.config["components"]["chemical_linker"]["memory_weight"] != 0.9
    assert nlp.get_pipe("disease_linker").memory.ids == ["D2"] and nlp.get_pipe("chemical_linker").memory is None


def test_commands_on_a_pipeline_without_linker_fail_in_one_line(tmp_path):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "plain")
    for command in (["link", "text", "--pipeline"], ["demo", "--pipeline"]):
        result = runner.invoke(app, command + [str(tmp_path / "plain")])
        assert result.exit_code == 1
        assert error_line(result) == "error: the pipeline has no sapbert_linker component; its components: ['sentencizer']"


def test_choose_pipeline_keeps_the_candidate_that_links_dev_best(tmp_path, tiny_bert):
    import json

    import spacy
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline, save_pipeline

    text = "Hepatoma and heart failure."
    (tmp_path / "dev.txt").write_text(
        f"1|t|{text}\n1|a|\n1\t0\t8\tHepatoma\tDisease\tD2\n1\t13\t26\theart failure\tDisease\tD1\n\n", encoding="utf8")
    full = [Concept("D1", "heart failure"), Concept("D2", "hepatoma"), Concept("D3", "kidney disease")]
    lacking = [Concept("D1", "heart failure"), Concept("D3", "kidney disease")]  # cannot link hepatoma
    for name, concepts in (("lacking", lacking), ("full", full)):
        nlp = build_pipeline(concepts, tiny_bert, label=None, linker_config={"device": "cpu", "pooling": "mean"})
        save_pipeline(nlp, tmp_path / name)
    runner = CliRunner()
    result = runner.invoke(app, ["choose-pipeline", str(tmp_path / "dev.txt"), str(tmp_path / "lacking"), str(tmp_path / "full"),
                                 "--output", str(tmp_path / "best"), "--report", str(tmp_path / "best.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "best.json").read_text())
    assert [c["accuracy"] for c in report["candidates"]] == [0.5, 1.0] and report["chosen"] == str(tmp_path / "full")
    assert spacy.load(tmp_path / "best").get_pipe("sapbert_linker").concept("D2") is not None
    result = runner.invoke(app, ["choose-pipeline", str(tmp_path / "dev.txt"), str(tmp_path / "full"), str(tmp_path / "best"),
                                 "--output", str(tmp_path / "tie"), "--report", str(tmp_path / "tie.json")])
    assert result.exit_code == 0 and json.loads((tmp_path / "tie.json").read_text())["chosen"] == str(tmp_path / "full")
    result = runner.invoke(app, ["choose-pipeline", str(tmp_path / "dev.txt"), str(tmp_path / "full"), "--output", str(tmp_path / "best")])
    assert result.exit_code == 1 and "--overwrite" in result.output  # an existing output is never replaced silently
