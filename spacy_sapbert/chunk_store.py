"""Name vectors encoded chunk by chunk into a folder, so an interrupted index build resumes where it stopped.

Encoding a large vocabulary is the whole cost of an index build (UMLS, 10M names with a BERT-base
encoder, runs for days on a CPU). The build writes each finished chunk of `chunk_size` names as its
own .npy file, atomically, beside a manifest of what the vectors depend on: the encoder's settings,
the name normalization, the names themselves, the chunk size and the encoder's batch size (padding to
another batch's longest name moves a vector by rounding). A build started again with the same
settings loads the finished chunks and encodes only the rest; a folder of another build is an error,
never mixed in. Chunk i always holds names[i * chunk_size : (i + 1) * chunk_size] encoded in one call,
so a resumed build ends with the vectors of an uninterrupted one.
"""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Union

import numpy
import srsly

from .errors import IndexFormatError
from .io import atomic_write, atomic_write_text, write_npy
from .outputs import OutputExistsError

FORMAT_VERSION = 1
DEFAULT_CHUNK_SIZE = 10000
MANIFEST_FILE = "manifest.json"
CHUNKS_SUFFIX = ".chunks"  # the default chunk folder of an output: OUTPUT.chunks beside it
CHUNK_NAME = "chunk-{:06d}.npy"
RERANK_CHUNK_FILE = "rerank-float16.npy"  # an ivfpq build's re-scoring vectors, until the index is saved
# the chunk files, and the temporary files atomic_write leaves when a kill interrupts it
OWN_FILE = re.compile(r"^(chunk-\d{6}\.npy|manifest\.json|rerank-float16\.npy|\.(chunk-\d{6}\.npy|manifest\.json)\..*\.tmp)$")
# what a build killed while writing its first manifest leaves in a folder (no chunk is written before it)
MANIFEST_TMP = re.compile(r"^\.manifest\.json\..*\.tmp$")

Encode = Callable[[Sequence[str]], numpy.ndarray]


def names_digest(names: Sequence[str]) -> str:
    """SHA-256 of the names in order (each length-prefixed, so no two lists share a digest)."""
    digest = hashlib.sha256()
    for name in names:
        data = name.encode("utf8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class ChunkStore:
    """The encoded chunks of one list of names in `folder`, made with `settings` (VECTOR_SETTINGS)."""

    def __init__(
        self, folder: Union[str, Path], names: Sequence[str], settings: Mapping[str, Any], chunk_size: int = DEFAULT_CHUNK_SIZE,
        batch_size: Optional[int] = None,
    ):
        """`batch_size`: the names the encoder pads and encodes together (recorded when given; a manifest written
        without it is not checked for it)."""
        if chunk_size < 1:
            raise ValueError(f"chunk_size={chunk_size} must be >= 1")
        self.folder = Path(folder)
        self.names = names
        self.chunk_size = chunk_size
        self.manifest = {
            "format_version": FORMAT_VERSION, **settings, "n_names": len(names), "chunk_size": chunk_size,
            "names_sha256": names_digest(names), **({"batch_size": batch_size} if batch_size else {}),
        }
        self._open()

    @property
    def n_chunks(self) -> int:
        return -(-len(self.names) // self.chunk_size)

    def chunk_path(self, number: int) -> Path:
        return self.folder / CHUNK_NAME.format(number)

    def finished(self) -> List[int]:
        """The numbers of the chunks already on disk."""
        return [number for number in range(self.n_chunks) if self.chunk_path(number).exists()]

    def missing(self) -> List[int]:
        """The numbers of the chunks still to encode."""
        return [number for number in range(self.n_chunks) if not self.chunk_path(number).exists()]

    def rows(self, number: int) -> Sequence[str]:
        """The names of chunk `number`: names[number * chunk_size : (number + 1) * chunk_size]."""
        return self.names[number * self.chunk_size : (number + 1) * self.chunk_size]

    def vectors(self, encode: Encode, progress: bool = False) -> Iterator[numpy.ndarray]:
        """The float32 vectors of every chunk in order: read from disk when finished, else encoded and saved."""
        bar = self._progress_bar(progress)
        dim = self.manifest.get("dim")  # recorded with the first chunk saved: a wrong first chunk is named, not the next
        for number in range(self.n_chunks):
            path = self.chunk_path(number)
            if path.exists():
                vectors = self._load(path, len(self.rows(number)), dim)
            else:
                vectors = self._encode_and_save(number, encode, dim)
                bar.update(len(vectors))
            dim = vectors.shape[1]
            yield vectors
        bar.close()

    def encode_missing(self, encode: Encode, progress: bool = False) -> None:
        """Encode and save the unfinished chunks, without reading the finished ones (for builds that
        read the vectors more than once, e.g. to train a quantizer first)."""
        bar = self._progress_bar(progress)
        for number in self.missing():
            bar.update(len(self._encode_and_save(number, encode, None)))
        bar.close()

    def save(self, number: int, vectors: numpy.ndarray, dim: Optional[int] = None, what: str = "the encoder's output") -> numpy.ndarray:
        """Check the vectors of chunk `number` (encoded elsewhere, e.g. on a Ray worker) and write them atomically."""
        path = self.chunk_path(number)
        vectors = numpy.ascontiguousarray(vectors, dtype="float32")
        self._check(vectors, len(self.rows(number)), dim or self.manifest.get("dim"), f"{what} for {path.name}")
        if "dim" not in self.manifest:
            self.manifest["dim"] = int(vectors.shape[1])
            atomic_write_text(self.folder / MANIFEST_FILE, srsly.json_dumps(self.manifest, indent=2))
        atomic_write(path, lambda tmp: write_npy(tmp, vectors))
        return vectors

    def _encode_and_save(self, number: int, encode: Encode, dim) -> numpy.ndarray:
        return self.save(number, encode(self.rows(number)), dim)

    def _progress_bar(self, progress: bool):
        """A tqdm bar over names starting at those already encoded (disabled unless `progress`)."""
        from tqdm import tqdm

        done = self.finished()
        if progress and done:
            tqdm.write(f"resuming: {len(done)} of {self.n_chunks} chunks already encoded in {self.folder}", file=sys.stderr)
        return tqdm(
            total=len(self.names), initial=sum(len(self.rows(number)) for number in done), unit="name",
            desc="encoding names", unit_scale=True, disable=not progress,
        )

    def new_rerank_file(self) -> str:
        """The path for this build's re-scoring vectors, an earlier build's file there unlinked first (this store's
        own, in the folder its manifest claims): a saved index may share that file by a hard link (io.save_npy), so
        it is never opened again for writing."""
        path = self.folder / RERANK_CHUNK_FILE
        if path.is_file():
            path.unlink()
        return str(path)

    def _open(self) -> None:
        manifest_path = self.folder / MANIFEST_FILE
        if manifest_path.exists():
            try:
                recorded = srsly.read_json(manifest_path)
            except ValueError as err:
                raise IndexFormatError(f"the chunk manifest {manifest_path} is corrupt ({err}); remove {self.folder} to encode again") from err
            self._check_manifest(recorded)
            return
        created = not self.folder.exists()
        if not created:  # chunk files without a manifest are not known to be this build's: refused
            if not self.folder.is_dir() or any(not MANIFEST_TMP.match(entry.name) for entry in self.folder.iterdir()):
                raise OutputExistsError(
                    f"{self.folder} holds files of its own and no {MANIFEST_FILE}: it is not a chunk folder of an index "
                    "build; choose another chunk folder (--chunk-dir)"
                )
        # whether this build made the folder: remove_chunks deletes only a folder it made
        self.manifest["created_folder"] = created
        atomic_write_text(manifest_path, srsly.json_dumps(self.manifest, indent=2))

    def _check_manifest(self, recorded: Mapping[str, Any]) -> None:
        from .index import check_vector_settings

        remove = f"remove {self.folder} to encode again"
        if recorded.get("format_version") != FORMAT_VERSION:
            raise IndexFormatError(
                f"the chunks in {self.folder} have format_version {recorded.get('format_version')!r}, this spacy-sapbert "
                f"writes {FORMAT_VERSION}; {remove}"
            )
        check_vector_settings(
            recorded, self.manifest, what=f"the encoded chunks in {self.folder}", rebuild=remove,
            current_source="this build has", encoder_source="this build's encoder has",
        )
        for key, meaning in (("chunk_size", "chunk_size"), ("n_names", "number of names"), ("names_sha256", "names")):
            if recorded.get(key) != self.manifest[key]:
                raise IndexFormatError(
                    f"the encoded chunks in {self.folder} are of another vocabulary or chunking: its {meaning} differs "
                    f"({key} {recorded.get(key)!r} there, {self.manifest[key]!r} here); {remove}"
                )
        if "dim" in recorded:  # the width of the chunks saved so far (a manifest of an earlier version has none)
            self.manifest["dim"] = recorded["dim"]
        recorded_batch, batch = recorded.get("batch_size"), self.manifest.get("batch_size")
        if recorded_batch and batch and recorded_batch != batch:
            raise IndexFormatError(
                f"the encoded chunks in {self.folder} were encoded {recorded_batch} names per batch, this build encodes {batch} "
                f"(batch_size; the vectors differ in rounding): build with --batch-size {recorded_batch} to resume, or {remove}"
            )

    def _load(self, path: Path, n_rows: int, dim) -> numpy.ndarray:
        try:
            vectors = numpy.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:
            raise IndexFormatError(f"the chunk file {path} is corrupt ({err}); delete it to encode that chunk again") from err
        self._check(vectors, n_rows, dim, f"the chunk file {path}")
        return vectors

    @staticmethod
    def _check(vectors: numpy.ndarray, n_rows: int, dim, what: str) -> None:
        if vectors.dtype != numpy.float32 or vectors.ndim != 2 or len(vectors) != n_rows or (dim and vectors.shape[1] != dim):
            raise IndexFormatError(
                f"{what} holds {vectors.dtype} vectors of shape {vectors.shape}, expected {n_rows} float32 rows"
                + (f" of dimension {dim}" if dim else "")
            )


def own_manifest(folder: Union[str, Path]) -> Optional[dict]:
    """The manifest of a chunk folder this program wrote, or None (no folder, no manifest, or not ours)."""
    try:
        recorded = srsly.read_json(Path(folder) / MANIFEST_FILE)
    except (ValueError, OSError):
        return None
    if not isinstance(recorded, dict) or recorded.get("format_version") != FORMAT_VERSION or "names_sha256" not in recorded:
        return None
    return recorded


def remove_chunks(folder: Union[str, Path]) -> None:
    """Delete the chunk files of a chunk folder that holds this program's manifest (nothing else, and
    nothing at all without that manifest), the manifest last, then the folder itself when a build
    created it and it is empty (a folder the user made stays)."""
    folder = Path(folder)
    manifest = folder / MANIFEST_FILE
    recorded = own_manifest(folder)
    if recorded is None:
        return
    for entry in folder.iterdir():
        if entry.name != MANIFEST_FILE and OWN_FILE.match(entry.name) and entry.is_file():
            entry.unlink()
    manifest.unlink()  # last: a removal cut short can be run again
    if recorded.get("created_folder") and not any(folder.iterdir()):
        folder.rmdir()
