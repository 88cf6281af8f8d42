"""Errors: one line naming what and where; impossible config refused at add_pipe; missing extras named."""
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import spacy
import torch
from typer.testing import CliRunner

from spacy_sapbert.cli import app, describe_error
from spacy_sapbert.errors import SapbertError
from spacy_sapbert.extras import OPTIONAL, MissingExtraError, require

from conftest import ROOT

runner = CliRunner()


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("pooling", "max", "`pooling`"),
        ("index_type", "ivf", "`index_type`"),
        ("threshold", 1.5, "`threshold`"),
        ("max_length", 1, "`max_length`"),
        ("k", 0, "`k`"),
        ("nprobe", 0, "`nprobe`"),
        ("index_type", "ivf_pq", "auto"),
    ],
)
def test_impossible_config_values_fail_at_add_pipe(key, value, words):
    nlp = spacy.blank("en")
    with pytest.raises(SapbertError, match=re.escape(words)):
        nlp.add_pipe("sapbert_linker", config={key: value})
    assert "sapbert_linker" not in nlp.pipe_names


def test_a_threshold_above_one_is_allowed_for_unnormalized_scores():
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"threshold": 20.0, "normalize": False})
    assert nlp.get_pipe("sapbert_linker").threshold == 20.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_asking_for_a_gpu_without_one_fails_at_add_pipe():
    nlp = spacy.blank("en")
    with pytest.raises(SapbertError, match=r"device='cuda' asks for a GPU but torch sees 0 CUDA device"):
        nlp.add_pipe("sapbert_linker", config={"device": "cuda"})


def test_a_missing_optional_library_names_its_extra(monkeypatch):
    for name in list(sys.modules):
        if name == "sklearn" or name.startswith("sklearn."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(MissingExtraError, match=r"scikit-learn.*pip install 'spacy-sapbert\[eval\]'"):
        require("sklearn.feature_extraction.text")
    from spacy_sapbert.evaluation import TfidfRetriever
    from spacy_sapbert.kb import Concept

    with pytest.raises(MissingExtraError, match=r"spacy-sapbert\[eval\]"):
        TfidfRetriever([Concept("D1", "heart failure")])


def test_describe_error_is_one_line_for_every_kind():
    assert describe_error(FileNotFoundError(2, "No such file or directory", "x.txt")) == "x.txt: No such file or directory"
    err = ModuleNotFoundError("No module named 'pytorch_metric_learning'", name="pytorch_metric_learning")
    assert "spacy-sapbert[train]" in describe_error(err)
    assert describe_error(KeyError("k")).endswith("(run with --debug for the traceback)")


def test_cli_errors_are_one_line_and_debug_shows_the_traceback(tmp_path):
    missing = str(tmp_path / "missing.txt")
    result = runner.invoke(app, ["build-index", missing, str(tmp_path / "out")])
    assert result.exit_code == 1
    assert [line for line in result.output.splitlines() if line.strip()] == [f"error: {missing}: file not found"]
    debug = runner.invoke(app, ["--debug", "build-index", missing, str(tmp_path / "out")])
    assert debug.exit_code == 1 and isinstance(debug.exception, SapbertError)
    usage = runner.invoke(app, ["build-index"])
    assert usage.exit_code == 2
    [line] = usage.output.strip().splitlines()
    assert line.startswith("error: Missing argument") and "build-index --help" in line


def test_optional_libraries_are_imported_only_through_require():
    """A bare `import sklearn` in the package would raise a raw ModuleNotFoundError where the extra is missing."""
    pattern = re.compile(r"^\s*(import|from)\s+(" + "|".join(OPTIONAL) + r")\b", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "spacy_sapbert").rglob("*.py") if pattern.search(p.read_text(encoding="utf8"))]
    assert offenders == []


def test_the_readme_install_covers_every_extra_a_documented_command_needs():
    readme = (ROOT / "README.md").read_text(encoding="utf8")
    first = next(line for line in readme.splitlines() if line.startswith("python3 -m venv") and "demo" in line)
    assert 'pip install -e ".[all]"' in first
    setup = (ROOT / "setup.py").read_text(encoding="utf8")
    namespace: dict = {}
    exec(setup.split("setup(")[0].split("# Optional libraries")[1].split("\n", 1)[1], namespace)
    installed = {re.split(r"[<>=]", req)[0] for req in namespace["EVAL"] + namespace["TRAIN"]}
    needed = {package for package, extra in OPTIONAL.values() if extra in ("eval", "train")}
    assert needed <= installed


NETWORK_GUARD = textwrap.dedent(
    """
    import os, socket
    _log = os.environ["NETWORK_AUDIT_LOG"]
    def _record(*args, **kwargs):
        with open(_log, "a") as handle:
            handle.write(repr(args[:2]) + "\\n")
        raise OSError("network access blocked by the audit")
    socket.socket.connect = _record
    socket.socket.connect_ex = _record
    socket.create_connection = _record
    socket.getaddrinfo = _record
    """
)


def run_cli_without_network(tmp_path: Path, args, log: Path) -> subprocess.CompletedProcess:
    """`python -m spacy_sapbert ARGS` with every socket connection recorded in `log` and refused."""
    guard = tmp_path / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(NETWORK_GUARD, encoding="utf8")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(PYTHONPATH=str(guard), NETWORK_AUDIT_LOG=str(log), SPACY_SAPBERT_HOME=str(tmp_path / "home"))
    return subprocess.run([sys.executable, "-m", "spacy_sapbert", *map(str, args)], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_documented_commands_run_with_a_local_model_and_never_touch_the_network(tmp_path, tiny_bert):
    """The real entry point, in this (the README's) environment: build, link, evaluate with baselines, train."""
    log = tmp_path / "connections.log"
    log.write_text("", encoding="utf8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\n", encoding="utf8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("1|t|Hepatoma seen.\n1|a|x\n1\t0\t8\tHepatoma\tDisease\tD2\n\n", encoding="utf8")
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("D1||heart failure||cardiac failure\nD2||liver cancer||hepatoma\n", encoding="utf8")
    steps = [
        ["build-index", vocab, "pipe", "--model", tiny_bert, "--label", "DISEASE"],
        ["link", "cardiac failure and hepatoma", "--pipeline", "pipe"],
        ["evaluate", corpus, "--vocab", vocab, "--model", tiny_bert, "--baselines", "--baseline-model", tiny_bert, "--cache-dir", "cache", "--output", "report.json", "--plot", "report.png"],
        ["train", pairs, "--model", tiny_bert, "--output", "run", "--batch-size", "2", "--max-steps", "1", "--no-progress"],
    ]
    stdout = {}
    for args in steps:
        done = run_cli_without_network(tmp_path, args, log)
        assert done.returncode == 0, (args[0], done.stderr[-3000:])
        stdout[args[0]] = done.stdout
    assert [e["kb_id"] for e in json.loads(stdout["link"])["ents"]] == ["D1", "D2"]
    assert "tf-idf char 3-grams" in json.loads((tmp_path / "report.json").read_text(encoding="utf8"))["results"]
    assert (tmp_path / "report.png").stat().st_size > 0 and (tmp_path / "run" / "model" / "config.json").is_file()
    assert log.read_text(encoding="utf8") == ""

    # the audit itself works: a hub name does try the network, and fails in one line
    done = run_cli_without_network(tmp_path, ["build-index", vocab, "pipe2", "--model", "some-org/some-model"], log)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("error: Could not load the encoder")
    assert log.read_text(encoding="utf8") != ""
