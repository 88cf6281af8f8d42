"""Output folders: a command creates its outputs and never deletes what it did not create.

An output folder is written complete into a temporary sibling (``.<name>.sapbert-tmp-<pid>@<host>@*``) and
then moved into place; the next write of that output removes such a folder that a killed process of this host left. An existing folder is only replaced when it is one this project writes (a spaCy
pipeline with a ``sapbert_linker``, or a training run) and the caller asked for it (``overwrite``).
The replacement swaps the two folders in one ``renameat2(RENAME_EXCHANGE)`` call where the system
has it (Linux), so a kill at any moment leaves either the old or the new folder in place, complete.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set

from .errors import SapbertError
from .io import TMP_MARK, abandoned_tmp_paths, give_default_mode, tmp_prefix  # noqa: F401 (TMP_MARK: its old home)

# The files a folder written whole (write_new_dir, checkpoints.write_dir) held when it was finished, kept in it: what
# --overwrite or --resume may replace there. A file it does not list was put in later, by someone else, and is kept.
WRITTEN_RECORD = ".sapbert-written.json"
# What spaCy's Language.to_disk writes besides one folder per component.
PIPELINE_FILES = {"config.cfg", "meta.json", "tokenizer", "vocab", WRITTEN_RECORD}
# What SapbertLinker.to_disk writes into its component's folder.
LINKER_PARTS = {"cfg", "encoder", "index", "memory", "reranker"}
# What the trainers write into their output folder.
RUN_CONFIG_FILES = ("train_config.json", "dhns_config.json", "reranker_config.json", "kge_config.json")
RUN_FILES = {"model", "checkpoints", "train_log.jsonl", "loss.png", *RUN_CONFIG_FILES}
# what a run killed while writing leaves beside them: the temporary folder of the model being written
# (checkpoints.write_dir), the model moved aside while the new one takes its place, and io.atomic_write's temporary files
RUN_LEFTOVER = re.compile(
    r"^(\.model\.tmp-\w+|model\.old|\.(" + "|".join(re.escape(name) for name in ("train_log.jsonl", "loss.png", *RUN_CONFIG_FILES)) + r")\..+\.tmp)$"
)
# a checkpoint being written, inside checkpoints/ (last.old is a checkpoint: find_checkpoint reads it)
CHECKPOINT_LEFTOVER = re.compile(r"^\.last\.tmp-\w+$")
# What checkpoints/ holds: the trainers' checkpoint folders, or train-kge's PyKEEN checkpoint (kge.pt, and the file
# PyKEEN saves when training fails), each possibly with io.atomic_write's temporary file beside it
CHECKPOINT_ENTRY = re.compile(r"^(last|last\.old|\.last\.tmp-\w+|\.?(kge|PyKEEN_just_saved_my_day_[\d_]+)\.pt(\..+\.tmp)?)$")
# The folders of a run that are written whole, each with its WRITTEN_RECORD
RUN_WRITTEN_FOLDERS = ("model", "model.old", "checkpoints/last", "checkpoints/last.old")
# What `train-ner` writes: spacy train's two models and its own record, which marks the folder as ours.
TRAIN_NER_RECORD = "train_ner.json"
SPACY_TRAIN_FILES = {"model-best", "model-last", TRAIN_NER_RECORD, WRITTEN_RECORD}


class OutputExistsError(SapbertError):
    """An output path holds something the command did not create, or replacing it was not asked for."""


def pipeline_component_names(folder: Path) -> Optional[Dict[str, Optional[str]]]:
    """{component name: factory} of a saved pipeline that has a sapbert_linker, or None for anything else."""
    config_path = folder / "config.cfg"
    if not config_path.is_file():
        return None
    from spacy.util import load_config

    try:
        config = load_config(config_path, interpolate=False)
        components = config.get("components", {})
        factories = {block.get("factory") for block in components.values() if isinstance(block, dict)}
    except Exception:  # an unreadable config.cfg is not a pipeline we wrote
        return None
    if "sapbert_linker" not in factories:
        return None
    return {name: block.get("factory") if isinstance(block, dict) else None for name, block in components.items()}


def _unexpected(folder: Path, allowed: Iterable[str]) -> list:
    allowed = set(allowed)
    return sorted(entry.name for entry in folder.iterdir() if entry.name not in allowed)


def _files_in(folder: Path) -> List[str]:
    """Every entry under `folder` that is not a folder (a symbolic link counts as a file), as its path inside it."""
    return sorted(entry.relative_to(folder).as_posix() for entry in folder.rglob("*") if entry.is_symlink() or not entry.is_dir())


def record_written_files(folder: Path) -> None:
    """Write `folder`'s WRITTEN_RECORD, listing the files it holds now: called on a finished temporary folder before
    it is moved into place."""
    files = [name for name in _files_in(Path(folder)) if name != WRITTEN_RECORD]
    (Path(folder) / WRITTEN_RECORD).write_text(json.dumps(files, indent=0) + "\n", encoding="utf8")


def unrecorded_files(folder: Path) -> List[str]:
    """The files in `folder` that its WRITTEN_RECORD does not list: put there after this program wrote it. Empty when
    it has no record (written before records were kept, or by another program): nothing more can be told."""
    record = Path(folder) / WRITTEN_RECORD
    if not record.is_file():
        return []
    try:
        listed = json.loads(record.read_text(encoding="utf8"))
        if not isinstance(listed, list):
            raise ValueError("not a list")
    except (ValueError, UnicodeDecodeError) as err:
        raise OutputExistsError(
            f"{record}: not the list of files this program wrote there ({err}); nothing was replaced: check the folder, then remove the file"
        ) from err
    listed = {str(name) for name in listed} | {WRITTEN_RECORD}
    return [name for name in _files_in(Path(folder)) if name not in listed]


def _refuse_unrecorded(output: Path, what: str, foreign: Sequence[str]) -> None:
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise OutputExistsError(
            f"the output folder {output} holds files that {what} did not write there ({shown}); it was left untouched: "
            "move them, or choose a new folder"
        )


def _refuse_foreign(output: Path, what: str, allowed: Optional[Set[str]], hint: str) -> None:
    """Raise unless `output` is absent, an empty folder, or a folder whose entries are all in `allowed`; a symbolic
    link is refused (replacing it would replace the link, not the folder it points to)."""
    if output.is_symlink():
        raise OutputExistsError(f"the output {output} is a symbolic link to {os.readlink(output)}; give that folder itself, or a new one")
    if not output.exists():
        return
    if not output.is_dir():
        raise OutputExistsError(f"the output {output} is a file, not a folder; choose another output path")
    entries = [entry.name for entry in output.iterdir()]
    if not entries:
        return
    if allowed is None:
        raise OutputExistsError(
            f"the output folder {output} exists and is not {what}; it was left untouched: choose a new or empty folder"
        )
    extra = _unexpected(output, allowed)
    if extra:
        shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
        raise OutputExistsError(
            f"the output folder {output} holds files that {what} does not have ({shown}); "
            "it was left untouched: choose a new or empty folder"
        )
    if hint:
        raise OutputExistsError(f"the output folder {output} already holds {what}; {hint}")


def remove_own_folder(folder: Path, is_own: Callable[[str], bool], what: str) -> None:
    """Delete `folder` when every file in it (its path inside the folder) is one `is_own` says this program writes
    there; a folder holding anything else is left whole and the OutputExistsError names what is not ours."""
    files = [entry.relative_to(folder).as_posix() for entry in folder.rglob("*") if not entry.is_dir()]
    foreign = sorted(name for name in files if not is_own(name))
    if foreign:
        raise OutputExistsError(
            f"{folder} holds files that {what} does not write ({', '.join(foreign[:5])}); nothing was removed: move them, "
            "then save again"
        )
    shutil.rmtree(folder)


def check_file_outputs(
    *paths: Optional[Path], inputs: Sequence[Optional[Path]] = (), output_dirs: Sequence[Optional[Path]] = ()
) -> None:
    """Refuse, before any work, an output file path that is a folder or lies under a file (the write at the
    end of a long run would fail there and lose the run), that is one of the command's `inputs` or lies inside an
    input folder (a pipeline's config.cfg: it would be replaced by what was read from it), that is or lies inside a
    folder the command writes (`output_dirs`), or that another output of the same command also names. None entries
    (outputs or inputs not given) are skipped."""
    read = {Path(path).resolve() for path in inputs if path is not None}
    written = {Path(path).resolve() for path in output_dirs if path is not None}
    seen: set = set()
    for path in paths:
        if path is None:
            continue
        path = Path(path)
        resolved = path.resolve()
        if resolved in read or any(folder in read for folder in resolved.parents):
            raise OutputExistsError(f"the output {path} is also an input of this command, or inside one; write it to another file")
        if resolved in written or any(folder in written for folder in resolved.parents):
            raise OutputExistsError(f"the output {path} is the folder this command writes, or inside it; write it to another file")
        if resolved in seen:
            raise OutputExistsError(f"the output {path} is named twice; give each output its own file")
        seen.add(resolved)
        if path.is_dir():
            raise OutputExistsError(f"the output {path} is a folder, not a file; choose a file path")
        blocking = next((parent for parent in path.parents if parent.exists() and not parent.is_dir()), None)
        if blocking is not None:
            raise OutputExistsError(f"the output {path} cannot be written: {blocking} is a file, not a folder")
    for path in seen:  # "-o out/x.spacy --report out": the report would be the other output's folder
        inside = next((other for other in seen if path in other.parents), None)
        if inside is not None:
            raise OutputExistsError(f"the output {path} is the folder of another output, {inside}; write it to another file")


def check_pipeline_output(output: Path, overwrite: bool) -> None:
    """Refuse an OUTPUT that is not absent, empty, or (with `overwrite`) a pipeline of this project."""
    output = Path(output)
    names = pipeline_component_names(output) if output.is_dir() else None
    allowed = None if names is None else PIPELINE_FILES | set(names)
    _refuse_foreign(output, "a spacy-sapbert pipeline", allowed, "" if overwrite else "pass --overwrite to replace it")
    for name, factory in (names or {}).items():  # --overwrite: what a user put beside a linker's parts is kept
        folder = output / name
        extra = _unexpected(folder, LINKER_PARTS) if factory == "sapbert_linker" and folder.is_dir() else []
        if extra:
            raise OutputExistsError(
                f"the output folder {output} holds files in {folder} that a sapbert_linker does not write ({', '.join(extra[:5])}); "
                "it was left untouched: move them, or choose a new folder"
            )
    if names is not None:  # inside spaCy's folders (vocab/, a trained ner/) and the linker's (encoder/, index/) too
        _refuse_unrecorded(output, "this program", unrecorded_files(output))


def check_ensemble_output(output: Path, overwrite: bool) -> None:
    """`combine-rerankers`' output folder: absent, empty, or (with `overwrite`) an ensemble it wrote, holding nothing
    else. A single trained re-ranker (train-reranker's model folder, e.g. one of the members) is never replaced."""
    from .reranker import ensemble_entries

    output = Path(output)
    entries = ensemble_entries(output) if output.is_dir() else None
    _refuse_foreign(output, "a re-ranker ensemble", None if entries is None else entries | {WRITTEN_RECORD}, "" if overwrite else "pass --overwrite to replace it")
    if entries is not None:
        _refuse_unrecorded(output, "combine-rerankers", unrecorded_files(output))


def run_names(folder: Path) -> Optional[Set[str]]:
    """The names a trainer's run may hold in `folder` (RUN_FILES and the RUN_LEFTOVER names there), or None when
    `folder` is not a run of ours: the trainers write their config file before anything else."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir() or not any((folder / name).is_file() for name in RUN_CONFIG_FILES):
        return None
    return RUN_FILES | {entry.name for entry in folder.iterdir() if RUN_LEFTOVER.match(entry.name)}


def files_not_of_the_run(output: Path) -> List[str]:
    """What the trainers did not write inside a run's folders: an entry of checkpoints/ that is no checkpoint of ours
    (CHECKPOINT_ENTRY), a file that a folder written whole does not list (its WRITTEN_RECORD), such a folder that
    is a symbolic link, or a folder moved aside (model.old, checkpoints/last.old) without its record."""
    output = Path(output)
    checkpoints = output / "checkpoints"
    foreign = []
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        foreign += [f"checkpoints/{entry.name}" for entry in sorted(checkpoints.iterdir()) if not CHECKPOINT_ENTRY.match(entry.name)]
    for name in ("checkpoints", *RUN_WRITTEN_FOLDERS):
        folder = output / name
        if folder.is_symlink():
            foreign.append(name)
        elif name.endswith(".old") and folder.is_dir() and not (folder / WRITTEN_RECORD).is_file():
            foreign.append(f"{name} (without {WRITTEN_RECORD}: a folder moved aside by this program has one)")
        elif name != "checkpoints" and folder.is_dir():
            foreign += [f"{name}/{file}" for file in unrecorded_files(folder)]
    return foreign


def holds_only_a_run(folder: Path) -> bool:
    """Whether `folder` is a run of ours holding nothing else (what may be removed or replaced whole)."""
    names = run_names(folder)
    if names is None or _unexpected(Path(folder), names):
        return False
    try:
        return not files_not_of_the_run(Path(folder))
    except OutputExistsError:  # an unreadable record: nothing in it is taken for ours
        return False


def check_run_output(output: Path, resume: bool, overwrite: bool) -> None:
    """A trainer's output folder: absent, empty, or an earlier run (continued with --resume or replaced with
    --overwrite) holding nothing the trainers did not write, inside its folders too."""
    output = Path(output)
    hint = "" if (resume or overwrite) else "pass --resume to continue it or --overwrite to start again"
    names = run_names(output)
    if names is not None and not _unexpected(output, names):
        _refuse_unrecorded(output, "a trainer", files_not_of_the_run(output))
    _refuse_foreign(output, "a training run", names, hint)


def remove_run_leftovers(output: Path) -> None:
    """Remove the temporary files and folders a killed run left in `output` (RUN_LEFTOVER; the model moved aside,
    model.old, is left for the run's next model write to remove after its replacement is in place). Nothing is
    removed unless `output` is a run of ours holding nothing else."""
    output = Path(output)
    if not holds_only_a_run(output):
        return
    checkpoints = output / "checkpoints"
    in_checkpoints = [entry for entry in checkpoints.iterdir() if CHECKPOINT_LEFTOVER.match(entry.name)] if checkpoints.is_dir() else []
    for entry in [entry for entry in output.iterdir() if RUN_LEFTOVER.match(entry.name) and entry.name != "model.old"] + in_checkpoints:
        if entry.is_symlink():  # the trainers write real files and folders: a link by that name is someone else's
            continue
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def check_spacy_train_output(output: Path, overwrite: bool) -> None:
    """`train-ner`'s output folder: absent, empty, or (with `overwrite`) an earlier train-ner output holding
    nothing else. A folder `spacy train` wrote by itself has no TRAIN_NER_RECORD and is never replaced."""
    output = Path(output)
    is_run = output.is_dir() and (output / TRAIN_NER_RECORD).is_file()
    _refuse_foreign(output, "a train-ner output", SPACY_TRAIN_FILES if is_run else None, "" if overwrite else "pass --overwrite to replace it")
    if is_run:
        _refuse_unrecorded(output, "train-ner", unrecorded_files(output))


def previous_run_folder(output: Path) -> Path:
    """Where `set_aside_run` keeps an earlier run until the run replacing it has finished: a hidden sibling."""
    output = Path(output).absolute()  # "." has no name to put beside it
    return output.with_name(f".{output.name}.sapbert-previous-run")


def set_aside_run(output: Path) -> Optional[Path]:
    """--overwrite of a training run: rename the earlier run's folder (a run of ours holding nothing else, as
    check_run_output makes sure) to `previous_run_folder` in one step and start an empty `output`, so that a new run
    stopped before it finishes does not cost the earlier one (`drop_previous_run` removes it once the new run has
    finished). Where that folder holds a run already (an --overwrite that did not finish), it keeps the last finished
    run and what is in `output` is that unfinished run's, which is cleared. The folder, or None when there was nothing
    to keep. A folder of that name that is not a run set aside is refused, left as it is."""
    output = Path(output)
    previous = previous_run_folder(output)
    check_run_output(output, resume=False, overwrite=True)
    if previous.exists() or previous.is_symlink():
        if not holds_only_a_run(previous):
            raise OutputExistsError(f"{previous} is not an earlier run that --overwrite set aside; move it, then run again")
        clear_run(output)
        return previous
    if not output.is_dir() or not any(output.iterdir()):
        return None
    os.replace(output, previous)  # the earlier run whole, or (a crash before it) not moved at all
    output.mkdir()
    return previous


def drop_previous_run(output: Path) -> None:
    """Remove the earlier run `set_aside_run` kept, once a run into `output` has finished (only a run of ours holding
    nothing else: a folder of that name that is anything more stays)."""
    previous = previous_run_folder(output)
    if holds_only_a_run(previous):
        shutil.rmtree(previous)


def clear_run(output: Path) -> None:
    """Remove an earlier run's own entries (RUN_FILES) from `output`; refused (OutputExistsError) unless
    `output` is absent, empty, or a run of ours holding nothing else."""
    check_run_output(Path(output), resume=False, overwrite=True)
    remove_run_leftovers(Path(output))
    for name in sorted(RUN_FILES | {"model.old"}):
        path = Path(output) / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def write_new_dir(output: Path, fill: Callable[[Path], None], *, replace: bool = False) -> None:
    """Call `fill(tmp)` on a fresh temporary sibling of `output`, then move the finished folder into place.

    `replace` allows an existing non-empty `output` (checked by the caller) to be swapped out; the
    old folder is removed only after the new one is in place. On a failure while filling, the
    partial temporary folder (this function's own) is removed; on a failure while moving, the
    complete new folder is left where it is and the error names it.
    """
    output = Path(output)
    tmp = new_tmp_dir(output)
    try:
        give_default_mode(tmp)
        fill(tmp)
        record_written_files(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        _move_into_place(tmp, output, replace)
    except OSError as err:
        raise SapbertError(f"could not move the finished output {tmp} to {output}: {err}; it is complete at {tmp}") from err


def new_tmp_dir(output: Path) -> Path:
    """A fresh temporary folder beside `output` (same file system: moved into place by a rename), named for this
    process and host so that a later write of `output` removes it if the process is killed; earlier abandoned ones go."""
    output.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_tmp_dirs(output)
    return Path(tempfile.mkdtemp(prefix=tmp_prefix(output), dir=output.parent))


def remove_abandoned_tmp_dirs(output: Path) -> List[Path]:
    """Remove the temporary folders of `output` that `write_new_dir` made in a process that was killed (a build of
    the offline default leaves 160 MB); see `io.abandoned_tmp_paths`."""
    removed = [path for path in abandoned_tmp_paths(output) if path.is_dir()]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def _move_into_place(tmp: Path, output: Path, replace: bool) -> None:
    if output.is_dir() and any(output.iterdir()):
        if not replace:
            raise OutputExistsError(f"the output folder {output} appeared while it was being written; the new one is at {tmp}")
        if exchange_paths(tmp, output):
            shutil.rmtree(tmp)  # now the old folder, checked by the caller to be ours
            return
        old = Path(tempfile.mkdtemp(prefix=f".{output.name}.sapbert-old-", dir=output.parent))
        os.replace(output, old / output.name)
        os.replace(tmp, output)
        shutil.rmtree(old)
        return
    if output.is_dir():
        output.rmdir()  # empty: nothing is lost (os.replace cannot replace a folder on every system)
    os.replace(tmp, output)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange_paths(first: Path, second: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where the system cannot."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    try:
        renameat2 = ctypes.CDLL(libc_name, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    result = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if result == 0:
        return True
    errno = ctypes.get_errno()
    if errno in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the file system or kernel cannot exchange
        return False
    raise OSError(errno, os.strerror(errno), str(second))
