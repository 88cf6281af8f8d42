"""Atomic file writes (a crash mid-write never leaves a half-written output behind; a killed writer's temporary file
goes at the next write), and the digests and signatures that tell one file from another."""
from __future__ import annotations

import glob
import hashlib
import os
import re
import secrets
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Union

import numpy

TMP_MARK = ".sapbert-tmp-"  # in the names of the temporary files and folders this program writes outputs through

def atomic_write(path: Union[str, Path], writer: Callable[[Path], None]) -> None:
    """Call `writer(tmp_path)` on a temporary file next to `path`, then rename it into place (`atomic_outputs`).

    The file gets the permissions of a plain `open(path, "w")` (give_default_mode)."""
    with atomic_outputs(path) as (tmp,):
        writer(tmp)


@contextmanager
def atomic_outputs(*paths: Optional[Union[str, Path]]) -> Iterator[List[Optional[Path]]]:
    """Temporary paths beside `paths` (None stays None) for a command's outputs that belong together: renamed
    into place one after the other when the block ends without error, removed when it fails, so an interrupted
    run never leaves a new file beside the old one it describes. Only the temporary files made here are removed."""
    staged: List[Optional[Path]] = []
    for path in paths:
        if path is None:
            staged.append(None)
            continue
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_abandoned_tmp_files(path)
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(path, ".tmp"), suffix=".tmp", dir=path.parent)
        os.close(fd)
        staged.append(Path(tmp))
    try:
        yield staged
        for tmp, path in zip(staged, paths):
            if tmp is not None:
                give_default_mode(tmp)
                os.replace(tmp, path)
    finally:
        for tmp in staged:
            if tmp is not None and tmp.exists():
                tmp.unlink()


MAX_NAME_BYTES = 255  # a file name's length limit on the common file systems (ext4, XFS, APFS, NTFS)


def tmp_prefix(path: Path, suffix: str = "") -> str:
    """The start of the names of `path`'s temporary files (`suffix` ".tmp") or folders: named for this process and host
    (so a later write removes one when its process was killed), or, where that would make the name too long, `.NAME.`
    cut to fit (kept if killed)."""
    prefix = f".{path.name}{TMP_MARK}{os.getpid()}@{socket.gethostname()}@"
    room = MAX_NAME_BYTES - len(suffix) - 8  # mkstemp's and mkdtemp's 8 random characters
    if len(os.fsencode(prefix)) <= room:
        return prefix
    return os.fsdecode(os.fsencode(f".{path.name}")[: room - 1]) + "."


def abandoned_tmp_paths(output: Path, suffix: str = "") -> List[Path]:
    """The temporary entries of `output` that a process of this host made (named by `tmp_prefix`, then 8 random
    characters and `suffix`) and that it left when it ended without finishing them (killed). An entry of a running
    process, of another host, or named otherwise (another program's) is not among them."""
    own_name = re.compile(re.escape(f".{output.name}{TMP_MARK}") + r"(\d+)@([^@/]+)@[a-z0-9_]{8}" + re.escape(suffix))
    host = socket.gethostname()
    found = []
    for candidate in output.parent.glob(glob.escape(f".{output.name}{TMP_MARK}") + "*" + glob.escape(suffix)):
        match = own_name.fullmatch(candidate.name)
        if match and match[2] == host and not process_alive(int(match[1])) and not candidate.is_symlink():
            found.append(candidate)
    return found


def remove_abandoned_tmp_files(path: Path) -> List[Path]:
    """Remove the temporary files of `path` that `atomic_outputs` made in a process that was killed (an extract of
    UMLS size leaves hundreds of MB); see `abandoned_tmp_paths`."""
    removed = [candidate for candidate in abandoned_tmp_paths(path, ".tmp") if candidate.is_file()]
    for candidate in removed:
        candidate.unlink(missing_ok=True)
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process with that id runs on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def save_npy(path: Union[str, Path], array: numpy.ndarray) -> None:
    """`array` as a .npy file at `path`, atomically. An array that memory-maps a whole .npy file (a
    chunked build's re-scoring vectors: 15 GB at 10M x 768 float16) is hard-linked there instead of
    copied, where the file system allows it; both names then share the file, which is never written again."""
    source = whole_npy_file(array)
    if source is not None:
        if os.path.exists(path) and os.path.samefile(source, path):
            return  # saved there already (rename() would leave a second link to the same file behind)
        array.flush()
        if atomic_link(source, path):
            return
    atomic_write(path, lambda tmp: write_npy(tmp, array))


def atomic_link(source: Union[str, Path], path: Union[str, Path]) -> bool:
    """Hard-link `source` at `path` through a new temporary name beside it, renamed into place; False
    (and nothing written) where the file system cannot link it (another device, no hard links)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        os.link(source, tmp)
    except OSError:
        return False
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)  # the link made just above (os.link refuses a name that exists, so it is ours)
        raise
    return True


def whole_npy_file(array: numpy.ndarray) -> Union[str, None]:
    """The .npy file `array` memory-maps from its header to its end (numpy.load(mmap_mode=...) or
    open_memmap), or None for any other array (in memory, a slice, a raw memmap)."""
    if not isinstance(array, numpy.memmap) or not array.filename or not array.flags.c_contiguous:
        return None
    fmt = numpy.lib.format
    try:
        with open(array.filename, "rb") as f:
            version = fmt.read_magic(f)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran_order, dtype = read_header(f)
            header_end = f.tell()
            size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError):
        return None
    if (tuple(shape), dtype, fortran_order, header_end) != (array.shape, array.dtype, False, array.offset):
        return None
    return array.filename if size == header_end + array.nbytes else None


def file_digest(path: Union[str, Path], folder_contents: bool = False) -> str:
    """16 hex digits of SHA-256 over a file's bytes; for a folder, over its files' names and sizes (a UMLS release:
    cheap), or with `folder_contents` their names and bytes (a model folder whose weights keep their size). What a
    resume or a cache compares, so that the same path with other contents is not taken for what was used."""
    digest = hashlib.sha256()
    path = Path(path)
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            name = file.relative_to(path).as_posix()
            if not folder_contents:
                digest.update(f"{name}\t{file.stat().st_size}\n".encode("utf8"))
                continue
            digest.update(name.encode("utf8") + b"\0")
            _update_with_bytes(digest, file)
        return digest.hexdigest()[:16]
    _update_with_bytes(digest, path)
    return digest.hexdigest()[:16]


def file_signature(path: Union[str, Path], samples: int = 16, chunk: int = 1 << 16) -> str:
    """A file's size and 16 hex digits of SHA-256 over `samples` chunks spread evenly through it (the first and the
    last among them): what tells a file of another build from the one a record was written with, without reading
    gigabytes of vectors at every load. Files up to `samples * chunk` bytes are read whole."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= samples * chunk:
            digest.update(handle.read())
        else:
            for i in range(samples):
                handle.seek((size - chunk) * i // (samples - 1))
                digest.update(handle.read(chunk))
    return f"{size}:{digest.hexdigest()[:16]}"


def folder_signatures(folder: Union[str, Path], names: Iterable[str]) -> Dict[str, str]:
    """`file_signature` of each file (a path relative to `folder`) that exists, by name."""
    folder = Path(folder)
    return {name: file_signature(folder / name) for name in sorted(names) if (folder / name).is_file()}


def changed_files(folder: Union[str, Path], recorded: Mapping[str, str]) -> List[str]:
    """The files of a `folder_signatures` record whose signature differs now (missing ones included)."""
    folder = Path(folder)
    return [name for name, signature in recorded.items() if not (folder / name).is_file() or file_signature(folder / name) != signature]


def _update_with_bytes(digest, path: Path) -> None:
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)


@contextmanager
def held_lock(lock_file: Path, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` (created, and kept, where it is named) while inside; without `wait`, a lock
    another process holds raises BlockingIOError at once. Where the system has no fcntl (Windows), no lock."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
