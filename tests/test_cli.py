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
    assert result.exit_code != 0
    assert "bad.txt" in str(result.exception) and "line 2" in str(result.exception)
    assert not (tmp_path / "pipe").exists()
