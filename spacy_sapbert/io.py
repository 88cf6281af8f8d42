"""Atomic file writes: a crash mid-write never leaves a half-written output behind."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Union

import numpy


def atomic_write(path: Union[str, Path], writer: Callable[[Path], None]) -> None:
    """Call `writer(tmp_path)` on a temporary file next to `path`, then rename it into place.

    The file gets the permissions of a plain `open(path, "w")` (give_default_mode)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        writer(Path(tmp))
        give_default_mode(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def give_default_mode(path: Union[str, Path]) -> None:
    """The permissions `open` or `mkdir` would have given `path` (0666 or 0777 less the umask), in place of
    the owner-only ones of `tempfile.mkstemp` and `mkdtemp`: what a command saves stays readable by the
    other users of a shared machine, like what spaCy saves."""
    mask = os.umask(0o022)  # read the umask by setting it and putting it back
    os.umask(mask)
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~mask)


def atomic_write_bytes(path: Union[str, Path], data: bytes) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: Union[str, Path], text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf8"))


def write_npy(path: Union[str, Path], array: numpy.ndarray) -> None:
    """`array` as a .npy file at exactly `path` (numpy.save appends .npy to a path without it)."""
    with open(path, "wb") as f:
        numpy.save(f, array, allow_pickle=False)
