"""Columns of strings as flat numpy arrays, so that a table of millions of names loads memory-mapped.

A `StringColumn` is one UTF-8 blob and the byte offsets of its strings; a `HashLookup` finds a string's
positions through sorted 64-bit hashes. Both are plain arrays: saved as .npy files they open with
`numpy.load(mmap_mode="r")` in no time, and only the pages that look-ups touch are ever read.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Mapping, Sequence, Tuple, Union, overload

import numpy

from .errors import IndexFormatError
from .io import atomic_write, write_npy

Arrays = Dict[str, numpy.ndarray]


class SavedArrays:
    """Saving for a class made of flat arrays: PARTS maps each saved part to (attribute, dtype), in the
    order of the constructor's arguments; arrays are named PREFIX.PART."""

    PARTS: Dict[str, Tuple[str, str]] = {}

    def arrays(self, prefix: str) -> Arrays:
        return {f"{prefix}.{part}": getattr(self, attribute) for part, (attribute, _) in self.PARTS.items()}

    @classmethod
    def dtypes(cls, prefix: str) -> Dict[str, str]:
        """The name and dtype of each array of arrays(prefix)."""
        return {f"{prefix}.{part}": dtype for part, (_, dtype) in cls.PARTS.items()}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, numpy.ndarray], prefix: str):
        return cls(*(arrays[f"{prefix}.{part}"] for part in cls.PARTS))


class StringColumn(SavedArrays, Sequence[str]):
    """Strings stored as one UTF-8 blob (uint8) and int64 offsets: string i is blob[offsets[i]:offsets[i + 1]]."""

    PARTS = {"utf8": ("blob", "uint8"), "offsets": ("offsets", "int64")}

    def __init__(self, blob: numpy.ndarray, offsets: numpy.ndarray):
        if blob.dtype != numpy.uint8 or blob.ndim != 1 or offsets.ndim != 1 or len(offsets) == 0:
            raise ValueError(f"a string column needs a uint8 blob and offsets, not {blob.dtype}{blob.shape} and {offsets.shape}")
        if int(offsets[0]) != 0 or int(offsets[-1]) != len(blob):
            raise ValueError(f"the string offsets run from {int(offsets[0])} to {int(offsets[-1])}, not 0 to {len(blob)}")
        self.blob = blob
        self.offsets = offsets
        self._bytes = memoryview(numpy.ascontiguousarray(blob).view(numpy.ndarray))

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> "StringColumn":
        encoded = [string.encode("utf-8") for string in strings]
        offsets = numpy.zeros(len(encoded) + 1, dtype="int64")
        numpy.cumsum([len(item) for item in encoded], out=offsets[1:])
        return cls(numpy.frombuffer(b"".join(encoded), dtype="uint8"), offsets)

    def __reduce__(self):
        return StringColumn, (self.blob, self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, row: int) -> str: ...

    @overload
    def __getitem__(self, row: slice) -> List[str]: ...

    def __getitem__(self, row: Union[int, slice]) -> Union[str, List[str]]:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} of a column of {len(self)} strings")
        return str(self._bytes[int(self.offsets[row]) : int(self.offsets[row + 1])], "utf-8")

    def __iter__(self) -> Iterator[str]:
        bounds = self.offsets.tolist() if len(self) < 1_000_000 else self.offsets
        for start, end in zip(bounds[:-1], bounds[1:]):
            yield str(self._bytes[int(start) : int(end)], "utf-8")

    def __eq__(self, other: object) -> bool:
        """Equal to a column, list or tuple of the same strings in the same order."""
        if isinstance(other, StringColumn):
            return numpy.array_equal(self.offsets, other.offsets) and numpy.array_equal(self.blob, other.blob)
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking like a list: not hashable

    def extended(self, strings: Sequence[str]) -> "StringColumn":
        """A new in-memory column: these strings, then `strings`."""
        more = StringColumn.from_strings(strings)
        return StringColumn(
            numpy.concatenate([self.blob, more.blob]), numpy.concatenate([self.offsets, more.offsets[1:] + len(self.blob)])
        )


def string_hash(string: str) -> int:
    """A 64-bit hash of a string that is the same in every process and on every machine."""
    return int.from_bytes(hashlib.blake2b(string.encode("utf-8"), digest_size=8).digest(), "little")


class HashLookup(SavedArrays):
    """Exact look-up of strings by position: the 64-bit hash of each string, sorted, with its position.

    Positions of equal hashes stay in ascending order, so the first match found is the first position
    holding the string. Callers compare the strings themselves: a hash collision costs a comparison,
    never a wrong answer.
    """

    PARTS = {"hashes": ("hashes", "uint64"), "positions": ("positions", "int64")}

    def __init__(self, hashes: numpy.ndarray, positions: numpy.ndarray):
        if hashes.shape != positions.shape:
            raise ValueError(f"{hashes.shape[0]} hashes but {positions.shape[0]} positions")
        self.hashes = hashes
        self.positions = positions

    @classmethod
    def build(cls, strings: Iterable[str]) -> "HashLookup":
        hashes = numpy.fromiter((string_hash(string) for string in strings), dtype="uint64")
        order = numpy.argsort(hashes, kind="stable")
        return cls(hashes[order], order.astype("int64"))

    def extended(self, strings: Sequence[str], start: int) -> "HashLookup":
        """A new look-up that also finds `strings` at positions start, start + 1, ... (the positions held stay)."""
        more = numpy.fromiter((string_hash(string) for string in strings), dtype="uint64")
        hashes = numpy.concatenate([self.hashes, more])
        positions = numpy.concatenate([self.positions, numpy.arange(start, start + len(more), dtype="int64")])
        order = numpy.argsort(hashes, kind="stable")  # `candidates` sorts the positions of equal hashes
        return HashLookup(hashes[order], positions[order])

    def candidates(self, string: str) -> List[int]:
        """Positions whose string has the same hash as `string`, ascending."""
        key = numpy.uint64(string_hash(string))
        first = int(numpy.searchsorted(self.hashes, key, side="left"))
        last = int(numpy.searchsorted(self.hashes, key, side="right"))
        return sorted(self.positions[first:last].tolist())


# saving -----------------------------------------------------------------------------------------


def write_arrays(folder: Path, arrays: Mapping[str, numpy.ndarray]) -> None:
    """Each array as folder/KEY.npy, written atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, array in arrays.items():
        atomic_write(folder / f"{key}.npy", lambda tmp, array=array: write_npy(tmp, numpy.asarray(array)))


def load_npy(path: Path, what: str, dtype: str, ndim: int) -> numpy.ndarray:
    """The .npy file at `path` memory-mapped (pages are read as they are touched); an IndexFormatError
    naming `what` and the file when it is missing, corrupt, or not `ndim`-dimensional `dtype`."""
    try:
        array = numpy.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError as err:
        raise IndexFormatError(f"the {what} {path} is missing; rebuild the index (build-index)") from err
    except (ValueError, OSError) as err:
        raise IndexFormatError(f"the {what} {path} is corrupt: {err}") from err
    if array.dtype != numpy.dtype(dtype) or array.ndim != ndim:
        raise IndexFormatError(f"the {what} {path} holds {array.dtype} of shape {array.shape}, not {ndim}-d {dtype}")
    return array.view(numpy.ndarray)


def read_arrays(folder: Path, dtypes: Mapping[str, str]) -> Arrays:
    """folder/KEY.npy for each KEY of `dtypes`, one-dimensional of that dtype, memory-mapped (load_npy)."""
    return {key: load_npy(folder / f"{key}.npy", "index table", dtype, 1) for key, dtype in dtypes.items()}


def arrays_to_msg(arrays: Mapping[str, numpy.ndarray]) -> dict:
    """Arrays as msgpack-ready {key: [dtype, bytes]} (little-endian)."""
    out = {}
    for key, array in arrays.items():
        array = numpy.asarray(array)
        dtype = array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype
        out[key] = [dtype.str, numpy.ascontiguousarray(array, dtype=dtype).tobytes()]
    return out


def arrays_from_msg(msg: Mapping[str, Sequence], dtypes: Mapping[str, str]) -> Arrays:
    """The arrays of arrays_to_msg, read-only views of the message's bytes; a ValueError (KeyError) when
    one is missing or of another dtype."""
    arrays = {}
    for key, dtype in dtypes.items():
        saved_dtype, data = msg[key]
        if numpy.dtype(saved_dtype) != numpy.dtype(dtype).newbyteorder("<"):
            raise ValueError(f"the table {key} holds {saved_dtype}, not {dtype}")
        arrays[key] = numpy.frombuffer(data, dtype=saved_dtype).astype(dtype, copy=False)
    return arrays
