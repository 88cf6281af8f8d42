"""Outputs: a command never deletes what it did not create, and replacing its own output is atomic."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import spacy
import srsly
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.kb import Concept
from spacy_sapbert.outputs import TMP_MARK, OutputExistsError, exchange_paths
from spacy_sapbert.pipeline import build_pipeline, save_pipeline

runner = CliRunner()

VOCAB_A = "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\n"
VOCAB_B = "E1||Kidney disease|nephropathy\n"


def _vocab(tmp_path, text=VOCAB_A, name="vocab.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf8")
    return path


def _build(args):
    return runner.invoke(app, ["build-index", *map(str, args)])


def _linked_ids(path):
    return sorted(spacy.load(path).get_pipe("sapbert_linker").index.ids)


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if TMP_MARK in p.name or ".sapbert-old-" in p.name)


def test_build_index_refuses_a_folder_of_user_files_and_leaves_it_untouched(tmp_path, tiny_bert):
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("mine", encoding="utf8")
    result = _build([_vocab(tmp_path), data, "--model", tiny_bert, "--overwrite"])
    assert result.exit_code == 1
    [line] = [l for l in result.output.splitlines() if l.startswith("error:")]
    assert str(data) in line and "left untouched" in line
    assert sorted(p.name for p in data.iterdir()) == ["notes.txt"]
    assert (data / "notes.txt").read_text(encoding="utf8") == "mine"


def test_build_index_refuses_the_working_directory(tmp_path, tiny_bert, monkeypatch):
    (tmp_path / "keep.txt").write_text("x", encoding="utf8")
    vocab = _vocab(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = _build([vocab, ".", "--model", tiny_bert])
    assert result.exit_code == 1 and "error: the output folder . exists" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt", "vocab.txt"]


def test_an_output_that_is_a_file_is_refused(tmp_path, tiny_bert):
    target = tmp_path / "out"
    target.write_text("a file", encoding="utf8")
    result = _build([_vocab(tmp_path), target, "--model", tiny_bert, "--overwrite"])
    assert result.exit_code == 1 and "is a file" in result.output
    assert target.read_text(encoding="utf8") == "a file"


def test_replacing_a_pipeline_takes_overwrite_and_swaps_it_atomically(tmp_path, tiny_bert):
    out = tmp_path / "pipe"
    assert _build([_vocab(tmp_path), out, "--model", tiny_bert]).exit_code == 0
    assert _linked_ids(out) == ["D1", "D2"]
    vocab_b = _vocab(tmp_path, VOCAB_B, "b.txt")
    refused = _build([vocab_b, out, "--model", tiny_bert])
    assert refused.exit_code == 1 and "--overwrite" in refused.output
    assert _linked_ids(out) == ["D1", "D2"]
    assert _build([vocab_b, out, "--model", tiny_bert, "--overwrite"]).exit_code == 0
    assert _linked_ids(out) == ["E1"]
    assert _leftovers(tmp_path) == []


def test_a_pipeline_folder_holding_a_user_file_is_not_replaced(tmp_path, tiny_bert):
    out = tmp_path / "pipe"
    assert _build([_vocab(tmp_path), out, "--model", tiny_bert]).exit_code == 0
    inside = [out / "sapbert_linker" / part / "my-notes.md" for part in ("encoder", "index")] + [out / "vocab" / "my-notes.md"]
    for notes in [out / "my-notes.md", out / "sapbert_linker" / "my-notes.md", *inside]:  # beside it, in the linker, in its parts
        notes.write_text("keep me", encoding="utf8")
        result = _build([_vocab(tmp_path, VOCAB_B, "b.txt"), out, "--model", tiny_bert, "--overwrite"])
        assert result.exit_code == 1 and "my-notes.md" in result.output
        assert notes.read_text(encoding="utf8") == "keep me"
        assert _linked_ids(out) == ["D1", "D2"]
        notes.unlink()


def test_a_pipeline_without_its_record_of_written_files_is_checked_as_before(tmp_path, tiny_bert):
    """A pipeline saved before the record existed (or by spaCy itself) has nothing to tell a user's file inside its
    parts from ours: its top level and linker folder are checked, and a damaged record is refused, not trusted."""
    from spacy_sapbert.outputs import WRITTEN_RECORD

    out = tmp_path / "pipe"
    assert _build([_vocab(tmp_path), out, "--model", tiny_bert]).exit_code == 0
    record = out / WRITTEN_RECORD
    listed = srsly.read_json(record)
    assert "sapbert_linker/cfg" in listed and "config.cfg" in listed and WRITTEN_RECORD not in listed
    record.write_text("not json", encoding="utf8")
    damaged = _build([_vocab(tmp_path, VOCAB_B, "b.txt"), out, "--model", tiny_bert, "--overwrite"])
    assert damaged.exit_code == 1 and WRITTEN_RECORD in damaged.output and _linked_ids(out) == ["D1", "D2"]
    record.unlink()
    (out / "vocab" / "extra.bin").write_bytes(b"x")
    assert _build([_vocab(tmp_path, VOCAB_B, "b.txt"), out, "--model", tiny_bert, "--overwrite"]).exit_code == 0
    assert _linked_ids(out) == ["E1"] and (out / WRITTEN_RECORD).is_file()


def test_an_output_that_is_a_symbolic_link_is_refused_and_left_as_it_is(tmp_path, tiny_bert):
    out = tmp_path / "pipe"
    assert _build([_vocab(tmp_path), out, "--model", tiny_bert]).exit_code == 0
    (tmp_path / "link").symlink_to(out)
    result = _build([_vocab(tmp_path, VOCAB_B, "b.txt"), tmp_path / "link", "--model", tiny_bert, "--overwrite"])
    assert result.exit_code == 1 and "is a symbolic link to" in result.output
    assert (tmp_path / "link").is_symlink() and _linked_ids(out) == ["D1", "D2"]


def test_an_empty_folder_is_filled(tmp_path, tiny_bert):
    out = tmp_path / "empty"
    out.mkdir()
    assert _build([_vocab(tmp_path), out, "--model", tiny_bert]).exit_code == 0
    assert _linked_ids(out) == ["D1", "D2"]


def test_add_memory_in_place_needs_overwrite(tmp_path, tiny_bert):
    out = tmp_path / "pipe"
    assert _build([_vocab(tmp_path), out, "--model", tiny_bert, "--label", "DISEASE"]).exit_code == 0
    corpus = tmp_path / "train.txt"
    corpus.write_text("7|t|Hepatoma.\n7|a|x\n7\t0\t8\tHepatoma\tDisease\tD2\n\n", encoding="utf8")
    args = ["add-memory", str(out), str(corpus), "--output", str(out)]
    assert runner.invoke(app, args).exit_code == 1
    assert spacy.load(out).get_pipe("sapbert_linker").memory is None
    assert runner.invoke(app, args + ["--overwrite"]).exit_code == 0
    assert spacy.load(out).get_pipe("sapbert_linker").memory.texts == ["hepatoma"]


@pytest.fixture
def two_pipelines(tmp_path, tiny_bert):
    """A saved pipeline over vocabulary A, and an unsaved one over vocabulary B."""
    concepts_a = [Concept("D1", "Heart failure"), Concept("D2", "Liver cancer")]
    save_pipeline(build_pipeline(concepts_a, tiny_bert, label=None), tmp_path / "pipe")
    return tmp_path / "pipe", build_pipeline([Concept("E1", "Kidney disease")], tiny_bert, label=None)


def test_save_pipeline_without_overwrite_refuses_its_own_pipeline(two_pipelines):
    path, new = two_pipelines
    with pytest.raises(OutputExistsError, match="--overwrite"):
        save_pipeline(new, path)


def test_a_failure_while_writing_keeps_the_old_pipeline_and_removes_the_partial_copy(two_pipelines, monkeypatch):
    path, new = two_pipelines

    def broken_to_disk(folder, **kwargs):
        (folder / "config.cfg").write_text("half", encoding="utf8")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(new, "to_disk", broken_to_disk)
    with pytest.raises(OSError, match="No space"):
        save_pipeline(new, path, overwrite=True)
    assert _linked_ids(path) == ["D1", "D2"]
    assert _leftovers(path.parent) == []


def temporary_names(output: str, suffix: str) -> dict:
    """Names of temporary entries of `output` as this program writes them (pid@host@ and 8 characters, then `suffix`):
    a killed writer's, a running one's (this process), another host's, another output's, and one named otherwise."""
    import socket

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    host = socket.gethostname()
    return {
        "killed": f".{output}{TMP_MARK}{ended.pid}@{host}@abc12345{suffix}",
        "running": f".{output}{TMP_MARK}{os.getpid()}@{host}@def45678{suffix}",
        "other host": f".{output}{TMP_MARK}{ended.pid}@not-{host}@ghi78901{suffix}",
        "another output": f".{output}2{TMP_MARK}{ended.pid}@{host}@mno34567{suffix}",
        "named otherwise": f".{output}{TMP_MARK}{ended.pid}@{host}@my-notes-kept{suffix}",
    }


def test_a_killed_writers_temporary_folder_goes_at_the_next_write_and_nothing_else(tmp_path):
    """A process killed while it filled its temporary folder (a build of the offline default: 160 MB) left it
    for good. The next write of that output removes it; a running writer's, another host's and a folder named by
    anyone else are kept."""
    from spacy_sapbert.outputs import write_new_dir

    names = temporary_names("out", "")
    names["older format"] = f".out{TMP_MARK}jkl012"
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "part").write_text("x", encoding="utf8")
    write_new_dir(tmp_path / "out", lambda folder: (folder / "done").write_text("y", encoding="utf8"))
    assert (tmp_path / "out" / "done").read_text(encoding="utf8") == "y"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", *(n for k, n in names.items() if k != "killed")])


def test_a_killed_writers_temporary_file_goes_at_the_next_write_and_nothing_else(tmp_path, monkeypatch):
    """A process killed while it wrote an output file (extract of UMLS size: hundreds of MB) left its temporary file
    for good, and extract a second one inside it (an audit). The next write of that output removes the first; a running
    writer's, another host's and files named by anyone else are kept; extract no longer nests one."""
    from spacy_sapbert.io import atomic_write_text

    names = temporary_names("out.txt", ".tmp")
    names["older format"] = ".out.txt.jkl012ab.tmp"
    for name in names.values():
        (tmp_path / name).write_text("x", encoding="utf8")
    atomic_write_text(tmp_path / "out.txt", "y")
    assert (tmp_path / "out.txt").read_text(encoding="utf8") == "y"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.txt", *(n for k, n in names.items() if k != "killed")])

    import spacy_sapbert.training.extract as extract

    def nested(path, writer):
        raise AssertionError(f"a second temporary file inside {path}")

    monkeypatch.setattr(extract, "atomic_write", nested)
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("D1||heart failure|cardiac failure\n", encoding="utf8")
    result = runner.invoke(app, ["extract", str(vocabulary), "--output", str(tmp_path / "syn.txt")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "syn.txt").read_text(encoding="utf8") == "D1||heart failure|cardiac failure\n"


def test_an_output_whose_name_is_near_the_file_name_limit_is_written(tmp_path):
    """The process and host in the temporary file's name made it too long for an output of 237 characters (an audit):
    such a name falls back to a shorter temporary name; so does a folder's."""
    from spacy_sapbert.io import atomic_write_text
    from spacy_sapbert.outputs import write_new_dir

    for name in ("r" * 232 + ".json", "é" * 120 + ".json"):
        atomic_write_text(tmp_path / name, "written")
        assert (tmp_path / name).read_text(encoding="utf8") == "written"
    write_new_dir(tmp_path / ("f" * 240), lambda folder: (folder / "done").write_text("y", encoding="utf8"))
    assert (tmp_path / ("f" * 240) / "done").read_text(encoding="utf8") == "y"
    assert len(list(tmp_path.iterdir())) == 3


def test_exchange_paths_swaps_two_folders(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "one").write_text("1", encoding="utf8")
    (second / "two").write_text("2", encoding="utf8")
    if not exchange_paths(first, second):
        pytest.skip("this system has no atomic exchange of two paths")
    assert [p.name for p in first.iterdir()] == ["two"] and [p.name for p in second.iterdir()] == ["one"]


KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import spacy_sapbert.outputs as outputs
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline, save_pipeline

    model, path, when = sys.argv[1:4]
    nlp = build_pipeline([Concept("E1", "Kidney disease")], model, label=None)
    kill = lambda: os.kill(os.getpid(), signal.SIGKILL)
    if when == "while-writing":
        real = nlp.to_disk
        def to_disk(folder, **kwargs):
            real(folder, **kwargs)
            os.remove(os.path.join(folder, "config.cfg"))
            kill()
        nlp.to_disk = to_disk
    else:
        real_exchange = outputs.exchange_paths
        def exchange(first, second):
            swapped = real_exchange(first, second)
            if when == "after-swap":
                kill()
            return swapped
        if when == "before-swap":
            outputs.exchange_paths = lambda first, second: kill()
        else:
            outputs.exchange_paths = exchange
    save_pipeline(nlp, path, overwrite=True)
    """
)


@pytest.mark.parametrize("when, expected", [("while-writing", ["D1", "D2"]), ("before-swap", ["D1", "D2"]), ("after-swap", ["E1"])])
def test_a_kill_during_replacement_leaves_a_complete_loadable_pipeline(two_pipelines, tiny_bert, tmp_path, when, expected):
    path, _ = two_pipelines
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT, encoding="utf8")
    done = subprocess.run([sys.executable, str(script), tiny_bert, str(path), when], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr[-2000:]
    assert _linked_ids(path) == expected
    if when != "after-swap":
        # the unfinished (or finished but not yet swapped) new pipeline is in a marked temporary folder
        assert len(_leftovers(path.parent)) == 1


def _train(tmp_path, tiny_bert, output, *extra):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("D1||heart failure||cardiac failure\nD2||liver cancer||hepatoma\n", encoding="utf8")
    args = ["train", str(pairs), "--model", tiny_bert, "--output", str(output), "--batch-size", "2", "--max-steps", "1", "--no-progress"]
    return runner.invoke(app, args + list(extra))


def test_train_refuses_a_foreign_folder_and_an_earlier_run_without_resume_or_overwrite(tmp_path, tiny_bert, one_thread):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "model").mkdir()
    (foreign / "model" / "weights.bin").write_text("not ours", encoding="utf8")
    result = _train(tmp_path, tiny_bert, foreign)
    assert result.exit_code == 1 and "not a training run" in result.output
    assert (foreign / "model" / "weights.bin").read_text(encoding="utf8") == "not ours"

    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    again = _train(tmp_path, tiny_bert, run)
    assert again.exit_code == 1 and "--resume" in again.output and "--overwrite" in again.output
    state = run / "checkpoints" / "last" / "trainer_state.json"
    state.write_text('{"step": 1, "marker": "old"}', encoding="utf8")
    assert _train(tmp_path, tiny_bert, run, "--overwrite").exit_code == 0
    assert "marker" not in state.read_text(encoding="utf8")  # the earlier run's checkpoint is not resumed later
    assert (run / "model" / "config.json").is_file()


def test_clear_run_deletes_only_an_earlier_run_of_ours(tmp_path):
    from spacy_sapbert.outputs import clear_run

    foreign = tmp_path / "theirs"
    (foreign / "checkpoints").mkdir(parents=True)  # a folder name a run uses, but no run config of ours
    with pytest.raises(OutputExistsError):
        clear_run(foreign)
    assert (foreign / "checkpoints").is_dir()
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "train_config.json").write_text("{}", encoding="utf8")
    clear_run(run)
    assert list(run.iterdir()) == []


def test_a_built_pipeline_has_the_permissions_of_the_umask_not_owner_only(tmp_path, tiny_bert):
    """Temporary files and folders are created 0600/0700; what lands must be readable like spaCy's own files."""
    old_mask = os.umask(0o022)
    try:
        assert _build([_vocab(tmp_path), tmp_path / "pipe", "--model", tiny_bert]).exit_code == 0
    finally:
        os.umask(old_mask)
    modes = {path.relative_to(tmp_path).as_posix(): path.stat().st_mode & 0o777 for path in [tmp_path / "pipe", *(tmp_path / "pipe").rglob("*")]}
    assert modes["pipe"] == 0o755 and modes["pipe/sapbert_linker/index/meta.json"] == 0o644
    assert {path: oct(mode) for path, mode in modes.items() if mode not in (0o755, 0o644)} == {}


@pytest.mark.parametrize("option", ["--output", "--errors", "--plot"])
def test_evaluate_refuses_an_unwritable_output_file_before_any_work(tmp_path, option):
    """A report path that is a folder, or under a file, fails at once: not after a long evaluation."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("1|t|Hepatoma seen.\n1|a|x\n1\t0\t8\tHepatoma\tDisease\tD2\n\n", encoding="utf8")
    vocab = _vocab(tmp_path)
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("kept", encoding="utf8")
    common = ["evaluate", str(corpus), "--vocab", str(vocab), "--model", str(tmp_path / "no-such-model")]
    for target, words in ((tmp_path / "a-folder", "is a folder, not a file"), (tmp_path / "a-file" / "r.json", "a-file is a file")):
        result = runner.invoke(app, common + [option, str(target)])
        assert result.exit_code == 1 and words in result.output, result.output
        assert "no-such-model" not in result.output  # refused before the model was loaded
    assert list((tmp_path / "a-folder").iterdir()) == [] and (tmp_path / "a-file").read_text(encoding="utf8") == "kept"


def test_convert_refuses_an_output_that_is_a_folder(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("1|t|Hepatoma seen.\n1|a|x\n1\t0\t8\tHepatoma\tDisease\tD2\n\n", encoding="utf8")
    (tmp_path / "train.spacy").mkdir()
    result = runner.invoke(app, ["convert", str(corpus), "--output", str(tmp_path / "train.spacy")])
    assert result.exit_code == 1 and "is a folder, not a file" in result.output


def test_a_run_killed_while_writing_resumes_and_its_leftovers_go(tmp_path, tiny_bert, one_thread):
    """A kill while the model or a checkpoint was being written leaves this program's temporary names in the run:
    --resume (and --overwrite) took them for a user's files and refused the run ("choose a new or empty folder")."""
    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    shutil.copytree(run / "model", run / ".model.tmp-ke19s8te")  # a model half written
    (run / ".loss.png.x1y2z3ab.tmp").write_bytes(b"\x89PNG")  # atomic_write's temporary file
    shutil.copytree(run / "checkpoints" / "last", run / "checkpoints" / ".last.tmp-q9w8e7r6")
    (run / "notes.txt").write_text("mine", encoding="utf8")
    refused = _train(tmp_path, tiny_bert, run, "--resume")
    assert refused.exit_code == 1 and "(notes.txt)" in refused.output  # a user's file still stops it, named alone
    (run / "notes.txt").unlink()
    result = _train(tmp_path, tiny_bert, run, "--resume")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in run.iterdir()) == sorted(["checkpoints", "loss.png", "model", "train_config.json", "train_log.jsonl"])
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["last"]
    both = _train(tmp_path, tiny_bert, run, "--resume", "--overwrite")
    assert both.exit_code == 1 and "pass one of them" in both.output


def test_an_overwrite_that_does_not_finish_keeps_the_earlier_run(tmp_path, tiny_bert, one_thread):
    """--overwrite cleared the earlier run before training: a new run stopped early (here: bad pairs) left neither."""
    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    weights = (run / "model" / "model.safetensors").read_bytes()
    bad = tmp_path / "bad.txt"
    bad.write_text("D1||heart failure\n", encoding="utf8")  # one name: not a pair
    args = ["train", str(bad), "--model", tiny_bert, "--output", str(run), "--batch-size", "2", "--max-steps", "1", "--no-progress", "--overwrite"]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 1
    previous = tmp_path / ".run.sapbert-previous-run"
    assert (previous / "model" / "model.safetensors").read_bytes() == weights and "kept at" in failed.output
    assert runner.invoke(app, args).exit_code == 1 and (previous / "model" / "model.safetensors").read_bytes() == weights
    # --resume with no checkpoint of the new run started afresh and, finished, removed the earlier run (an audit)
    resumed = _train(tmp_path, tiny_bert, run, "--resume")
    assert resumed.exit_code == 1 and "holds no checkpoint of the run --overwrite started" in resumed.output
    assert (previous / "model" / "model.safetensors").read_bytes() == weights
    assert _train(tmp_path, tiny_bert, run, "--overwrite").exit_code == 0  # a finished run: the earlier one goes
    assert not previous.exists() and (run / "model" / "model.safetensors").is_file()
    assert not [p for p in tmp_path.iterdir() if "sapbert-tmp" in p.name]


def test_a_resume_of_train_kge_after_an_unfinished_overwrite_continues_from_its_pykeen_checkpoint(tmp_path):
    """train-kge checkpoints as checkpoints/kge.pt, which the refusal did not know: its --resume was refused with a
    false message (an audit). Without any checkpoint of the new run it is still refused."""
    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.training.commands import _refuse_resume_without_the_new_runs_checkpoint

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (tmp_path / ".run.sapbert-previous-run").mkdir()
    with pytest.raises(SapbertError, match="holds no checkpoint of the run --overwrite started"):
        _refuse_resume_without_the_new_runs_checkpoint(run)
    (run / "checkpoints" / "kge.pt").write_bytes(b"PyKEEN's")
    _refuse_resume_without_the_new_runs_checkpoint(run)


def test_a_run_without_overwrite_or_resume_leaves_a_run_set_aside_alone(tmp_path, tiny_bert, one_thread):
    """The set-aside run is the last finished one of an --overwrite that did not finish; a plain run into the
    same (emptied) output asked to replace nothing, yet deleted it when it finished (found by an audit)."""
    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    weights = (run / "model" / "model.safetensors").read_bytes()
    bad = tmp_path / "bad.txt"
    bad.write_text("D1||heart failure\n", encoding="utf8")
    args = ["train", str(bad), "--model", tiny_bert, "--output", str(run), "--batch-size", "2", "--max-steps", "1", "--no-progress", "--overwrite"]
    assert runner.invoke(app, args).exit_code == 1
    previous = tmp_path / ".run.sapbert-previous-run"
    shutil.rmtree(run)
    result = _train(tmp_path, tiny_bert, run)
    assert result.exit_code == 0 and "an earlier run that --overwrite set aside, is kept" in result.output
    assert (previous / "model" / "model.safetensors").read_bytes() == weights


def test_the_set_aside_folder_is_removed_only_when_it_holds_a_run(tmp_path, tiny_bert, one_thread):
    """A folder that happens to have the set-aside name but holds a user's files is neither taken for the earlier run
    nor deleted when a run finishes."""
    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    previous = tmp_path / ".run.sapbert-previous-run"
    previous.mkdir()
    (previous / "mine.txt").write_text("mine", encoding="utf8")
    refused = _train(tmp_path, tiny_bert, run, "--overwrite")
    assert refused.exit_code == 1 and "is not an earlier run that --overwrite set aside" in refused.output
    assert (run / "model" / "model.safetensors").is_file() and (previous / "mine.txt").read_text(encoding="utf8") == "mine"
    assert _train(tmp_path, tiny_bert, run, "--resume").exit_code == 0  # a finished resume: the folder stays
    assert (previous / "mine.txt").is_file()


@pytest.mark.parametrize("inside", ["model/my-notes.md", "checkpoints/last/my-notes.md", "checkpoints/my-notes.md"])
def test_a_user_file_inside_a_runs_folders_stops_overwrite_and_resume(tmp_path, tiny_bert, one_thread, inside):
    """--overwrite replaced, and --resume's next model or checkpoint write removed, a file put inside the run's
    model/ or checkpoints/: only the run's top level was checked."""
    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    notes = run / inside
    notes.write_text("keep me", encoding="utf8")
    for option in ("--overwrite", "--resume"):
        refused = _train(tmp_path, tiny_bert, run, option, "--max-steps", "2")
        assert refused.exit_code == 1 and inside in refused.output and "left untouched" in refused.output
        assert notes.read_text(encoding="utf8") == "keep me"
    assert not (tmp_path / ".run.sapbert-previous-run").exists()
    notes.unlink()
    assert _train(tmp_path, tiny_bert, run, "--resume", "--max-steps", "2").exit_code == 0


def test_a_run_into_the_working_directory_finishes(tmp_path, tiny_bert, one_thread, monkeypatch):
    """--output . trained, then failed on the name of the folder beside it for a set-aside run (found by an audit)."""
    run = tmp_path / "run"
    run.mkdir()
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("D1||heart failure||cardiac failure\nD2||liver cancer||hepatoma\n", encoding="utf8")
    monkeypatch.chdir(run)
    args = ["train", str(pairs), "--model", tiny_bert, "--output", ".", "--batch-size", "2", "--max-steps", "1", "--no-progress"]
    assert runner.invoke(app, args).exit_code == 0 and (run / "model" / "model.safetensors").is_file()
    again = runner.invoke(app, args + ["--overwrite"])  # it cannot be moved aside while the process works in it
    assert again.exit_code == 1 and "holds the working directory: run from outside it" in again.output
    assert (run / "model" / "model.safetensors").is_file() and not (tmp_path / ".run.sapbert-previous-run").exists()


def test_an_overwrite_that_would_move_its_own_input_aside_is_refused(tmp_path, tiny_bert, one_thread):
    """--model RUN/model --output RUN --overwrite set the run aside, model included, then could not find the model
    (found by an audit: a minute of hub retries, the output left empty)."""
    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    pairs = tmp_path / "pairs.txt"
    args = ["train", str(pairs), "--model", str(run / "model"), "--output", str(run), "--batch-size", "2", "--max-steps", "1",
            "--no-progress", "--overwrite"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1 and f"the run reads from inside it (--model {run / 'model'})" in refused.output
    assert (run / "model" / "model.safetensors").is_file() and not (tmp_path / ".run.sapbert-previous-run").exists()


def test_a_second_run_into_an_output_in_use_is_refused(tmp_path, tiny_bert, one_thread):
    """A --resume started beside a running run trained alongside it and interleaved their logs (found by an audit)."""
    from spacy_sapbert.io import held_lock

    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    log = (run / "train_log.jsonl").read_text(encoding="utf8")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from spacy_sapbert.io import held_lock
        with held_lock(Path({str(tmp_path / '.run.sapbert-lock')!r})):
            print("held", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = _train(tmp_path, tiny_bert, run, "--resume", "--max-steps", "2")
        assert refused.exit_code == 1 and f"another training run is writing {run}" in refused.output
        assert (run / "train_log.jsonl").read_text(encoding="utf8") == log
    finally:
        holder.kill()
        holder.wait()
    with held_lock(tmp_path / ".run.sapbert-lock", wait=False):  # released with its process
        pass
    assert _train(tmp_path, tiny_bert, run, "--resume", "--max-steps", "2").exit_code == 0


def test_a_model_old_folder_without_its_record_stops_resume_and_overwrite(tmp_path, tiny_bert, one_thread):
    """The trainers move their model aside as model.old, record included; a model.old without one is someone else's
    (a copy kept by hand), and --resume's next model write deleted it (found by an audit)."""
    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    kept = run / "model.old"
    shutil.copytree(tiny_bert, kept)
    (kept / "NOTES.txt").write_text("my copy", encoding="utf8")
    for option in ("--resume", "--overwrite"):
        refused = _train(tmp_path, tiny_bert, run, option, "--max-steps", "2")
        assert refused.exit_code == 1 and "model.old (without .sapbert-written.json" in refused.output
        assert (kept / "NOTES.txt").read_text(encoding="utf8") == "my copy"


def test_a_link_named_like_a_leftover_is_left_with_what_it_points_to(tmp_path, tiny_bert, one_thread):
    """remove_run_leftovers deletes the trainers' own temporary files and folders: a symbolic link of such a name is
    not one of them (rmtree refused it mid-resume, and it points at somebody's folder)."""
    from spacy_sapbert.outputs import remove_run_leftovers

    run = tmp_path / "run"
    assert _train(tmp_path, tiny_bert, run).exit_code == 0
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine", encoding="utf8")
    (run / ".model.tmp-abcd1234").symlink_to(theirs)
    (run / ".loss.png.x1y2z3ab.tmp").write_bytes(b"\x89PNG")  # a real leftover beside it
    remove_run_leftovers(run)
    assert (run / ".model.tmp-abcd1234").is_symlink() and (theirs / "keep.txt").read_text(encoding="utf8") == "mine"
    assert not (run / ".loss.png.x1y2z3ab.tmp").exists()
