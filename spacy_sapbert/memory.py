"""Mention memory (kNN-BioEL, Lin et al., ICASSP 2024): annotated mentions consulted at inference.

The memory holds the vectors of annotated mention strings with their gold concept ids. A query's
`k` nearest memory entries vote for their ids, and the vote is mixed with the concept index's scores:

    p(y|x) = weight * p_kNN(y|x) + (1 - weight) * p_model(y|x)

* p_model: softmax of the similarities of the concepts retrieved from the concept index, divided by
  `concept_temperature` (the paper's beta1). It is computed over the retrieved candidates (the
  linker's top `k` concepts); with the paper's temperature of 0.01 the concepts outside them hold a
  negligible share.
* p_kNN, `memory_mixture = "published"` (the default; the kNN-BioEL code's `combine_dists`, agg
  "max"): each candidate concept takes the best similarity among the neighbours voting for it, and
  the softmax at `memory_temperature` (beta2) runs over the candidates; a candidate without a vote
  gets 0, and an id that only the memory retrieved gets no probability at all. When no neighbour
  votes for any candidate, p_kNN is uniform over the candidates (the published code's softmax of
  equal placeholders), which leaves the concept index's ranking unchanged.
* p_kNN, `memory_mixture = "union"` (this package's earlier mixture): the softmax at
  `memory_temperature` runs over the neighbours themselves, then the maximum per concept id; an id
  that only the memory retrieved joins the candidates with its p_kNN share.

The memory is a small flat faiss index (exact cosine similarity) with one row per distinct
(mention string, concept id): adding an annotation that is already there changes nothing.
"""
from __future__ import annotations

import math
import re
import threading
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import faiss
import numpy
import srsly

from .errors import ConfigWarning, IndexFormatError, SapbertError
from .index import RECORDED_FILES, VECTOR_SETTINGS, Candidate, check_recorded_files, float32_rows, format_version_error, read_faiss_file, read_table
from .io import atomic_write, atomic_write_bytes, atomic_write_text, folder_signatures

# 2: meta.json records the encoder fingerprint, pooling, max_length, lowercase and normalize.
# 3: and the normalizer's remove_punctuation and spelling-correction list.
FORMAT_VERSION = 3
META_FILE, ENTRIES_FILE, VECTORS_FILE = "meta.json", "entries.msgpack", "vectors.faiss"
# what MentionMemory.to_disk writes into its folder, and the temporary files a killed atomic write leaves
OWN_FILE = re.compile(r"^\.?(meta\.json|entries\.msgpack|vectors\.faiss)(\..*\.tmp)?$")

Encode = Callable[[List[str]], numpy.ndarray]
MIXTURES = ("published", "union")


def softmax(scores: Sequence[float], temperature: float) -> List[float]:
    """softmax(scores / temperature), computed stably."""
    if not scores:
        return []
    scaled = [s / temperature for s in scores]
    top = max(scaled)
    exps = [math.exp(s - top) for s in scaled]
    total = sum(exps)
    return [e / total for e in exps]


def published_votes(candidate_ids: Sequence[str], memory_hits: Sequence[Candidate], temperature: float) -> Dict[str, float]:
    """p_kNN of kNN-BioEL's code: softmax over the candidates of their best neighbour similarity.

    Candidates no neighbour votes for get 0; neighbours of other ids are dropped. No vote at all:
    uniform over the candidates.
    """
    wanted = set(candidate_ids)
    best: Dict[str, float] = {}
    for cid, score in memory_hits:
        if cid in wanted:
            best[cid] = max(score, best.get(cid, -math.inf))
    if not best:
        return {cid: 1.0 / len(candidate_ids) for cid in candidate_ids}
    return dict(zip(best, softmax(list(best.values()), temperature)))


def union_votes(memory_hits: Sequence[Candidate], temperature: float) -> Dict[str, float]:
    """p_kNN of the `union` mixture: softmax over the neighbours, then the largest share per id."""
    p_knn: Dict[str, float] = {}
    for (cid, _), p in zip(memory_hits, softmax([s for _, s in memory_hits], temperature)):
        p_knn[cid] = max(p, p_knn.get(cid, 0.0))
    return p_knn


def check_mixture(mixture: str) -> None:
    """SapbertError naming the config key for a mixture other than those of MIXTURES."""
    if mixture not in MIXTURES:
        raise SapbertError(f"sapbert_linker config key `memory_mixture` is {mixture!r}; choose one of {list(MIXTURES)}")


def mix_scores(
    concept_hits: Sequence[Candidate],
    memory_hits: Sequence[Candidate],
    *,
    weight: float,
    concept_temperature: float,
    memory_temperature: float,
    mixture: str = "published",
) -> List[Candidate]:
    """(id, p(y|x)) best first: the concept index's candidates mixed with the memory neighbours' votes.

    `concept_hits`: distinct concepts with their similarities; `memory_hits`: the nearest memory
    entries (ids may repeat) with theirs; `mixture`: "published" or "union" (see the module
    docstring). Ties keep the concept index's order, then the memory's.
    """
    check_mixture(mixture)
    ids = [cid for cid, _ in concept_hits]
    p_model = dict(zip(ids, softmax([s for _, s in concept_hits], concept_temperature)))
    if mixture == "published":
        p_knn = published_votes(ids, memory_hits, memory_temperature) if ids else {}
    else:
        p_knn = union_votes(memory_hits, memory_temperature)
        ids += [cid for cid in p_knn if cid not in p_model]
    mixed = [(cid, weight * p_knn.get(cid, 0.0) + (1.0 - weight) * p_model.get(cid, 0.0)) for cid in ids]
    return sorted(mixed, key=lambda hit: -hit[1])


@dataclass(frozen=True)
class MemorySettings:
    """The numbers of the mixture, named as the `sapbert_linker` config keys.

    memory_k: memory neighbours per query (the paper's k); memory_weight: lambda;
    concept_temperature: beta1; memory_temperature: beta2; memory_mixture: how the neighbours' votes
    are normalized, "published" (kNN-BioEL's code) or "union" (see the module docstring).
    Defaults: the paper's NCBI-disease values and the published mixture.
    """

    memory_k: int = 4
    memory_weight: float = 0.1
    concept_temperature: float = 0.01
    memory_temperature: float = 1.0
    memory_mixture: str = "published"

    def __post_init__(self) -> None:
        for key, value in asdict(self).items():  # read from JSON or a config: a quoted number names its key
            expected = (str,) if key == "memory_mixture" else (int,) if key == "memory_k" else (int, float)
            if not isinstance(value, expected) or isinstance(value, bool):
                raise SapbertError(f"memory setting `{key}` must be {expected[-1].__name__}, got {value!r}")
        if self.memory_k < 1:
            raise SapbertError(f"sapbert_linker config key `memory_k` must be at least 1, got {self.memory_k}")
        if not 0.0 <= self.memory_weight <= 1.0:
            raise SapbertError(f"sapbert_linker config key `memory_weight` must be between 0 and 1, got {self.memory_weight}")
        for key in ("concept_temperature", "memory_temperature"):
            if getattr(self, key) <= 0:
                raise SapbertError(f"sapbert_linker config key `{key}` must be greater than 0, got {getattr(self, key)}")
        check_mixture(self.memory_mixture)

    def mix(self, concept_hits: Sequence[Candidate], memory_hits: Sequence[Candidate]) -> List[Candidate]:
        """`mix_scores` of the concept candidates and the first `memory_k` memory neighbours."""
        return mix_scores(
            concept_hits,
            memory_hits[: self.memory_k],
            weight=self.memory_weight,
            concept_temperature=self.concept_temperature,
            memory_temperature=self.memory_temperature,
            mixture=self.memory_mixture,
        )

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(
        cls, data: Mapping, source: str = "settings", protocol: str = "strict", other_protocol: bool = False
    ) -> "MemorySettings":
        """Settings from a plain mapping, or from an `evaluate` report that holds them under memory.settings.

        A report of `--tune-memory` holds the settings chosen under each protocol; `protocol` picks
        one (strict: the index holds vocabulary names only, as in a pipeline built by build-index). A report that
        chose none under `protocol` is an error, or with `other_protocol` a ConfigWarning and the settings it has.
        """
        if not isinstance(data, Mapping):
            raise SapbertError(f"{source}: memory settings must be a JSON object of {sorted(cls.__dataclass_fields__)}, got {type(data).__name__}")
        if isinstance(data.get("memory"), Mapping):
            memory = data["memory"]
            by_protocol = memory.get("settings_by_protocol") or {}
            if by_protocol and protocol not in by_protocol:
                chosen = f"{source}: the report chose memory settings under {sorted(by_protocol)} only, not under {protocol}"
                if not other_protocol:
                    raise SapbertError(f"{chosen}; tune them under {protocol} (evaluate --tune-memory --protocol {protocol})")
                warnings.warn(f"{chosen}: {protocol} runs with them", ConfigWarning, stacklevel=2)
            data = by_protocol.get(protocol) or memory.get("settings", {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise SapbertError(f"{source}: unknown memory setting(s) {unknown}; known: {sorted(known)}")
        try:
            return cls(**data)
        except SapbertError as err:
            raise SapbertError(f"{source}: {err}") from err


_ADDING = threading.Lock()  # MentionMemory.add's (module-wide: a memory pickles and copies without one)


class MentionMemory:
    """Distinct (mention string, concept id) entries and their unit vectors in a flat faiss index.

    `settings`: the index.VECTOR_SETTINGS (encoder fingerprint, pooling, max_length, lowercase,
    normalize) under which the entries were normalized and encoded; saved with the memory so that a
    pipeline whose encoder or config changed refuses it. None: unknown.
    """

    def __init__(
        self,
        dim: int,
        texts: Sequence[str] = (),
        ids: Sequence[str] = (),
        vectors: faiss.Index = None,
        settings: Optional[Mapping[str, Any]] = None,
    ):
        self.vectors = vectors if vectors is not None else faiss.IndexFlatIP(dim)
        if self.vectors.d != dim or self.vectors.ntotal != len(texts) or len(texts) != len(ids):
            raise IndexFormatError(
                f"mention memory: {self.vectors.ntotal} vectors of dimension {self.vectors.d} for "
                f"{len(texts)} texts and {len(ids)} ids of dimension {dim}"
            )
        self.texts = list(texts)
        self.ids = list(ids)
        self.settings: Dict[str, Any] = {key: (settings or {}).get(key) for key in VECTOR_SETTINGS}
        self._keys = set(zip(self.texts, self.ids))

    @property
    def dim(self) -> int:
        return int(self.vectors.d)

    def __len__(self) -> int:
        return len(self.texts)

    def add(self, entries: Iterable[Tuple[str, str]], encode: Encode) -> int:
        """Add (mention string, concept id) entries; strings are encoded once. Returns how many were new.

        One add at a time (threads sharing a pipeline that added the same entries at once each stored them: an audit's
        6 threads made 6 copies, and a query's memory neighbours were one entry 4 times)."""
        entries = list(entries)
        with _ADDING:
            new = list(dict.fromkeys(
                (text, concept_id) for text, concept_id in entries if text and concept_id and (text, concept_id) not in self._keys
            ))
            if not new:
                return 0
            distinct = sorted({text for text, _ in new})
            rows = dict(zip(distinct, float32_rows(encode(distinct))))
            vectors = numpy.stack([rows[text] for text, _ in new])
            held = len(self.texts)
            self.texts.extend(text for text, _ in new)  # before the vectors: a search beside this finds no row without its text
            self.ids.extend(concept_id for _, concept_id in new)
            try:
                self.vectors.add(vectors)
            except BaseException:
                del self.texts[held:], self.ids[held:]
                raise
            self._keys.update(new)  # only now: an encoder that fails leaves the memory as it was, and a retry adds them
            return len(new)

    def remapped(self, primary_id: Callable[[str], Optional[str]]) -> Tuple["MentionMemory", int]:
        """A memory of the entries whose concept id `primary_id` knows, under the id it returns (a rebuilt concept
        index may make another id of the concept primary), and how many entries were left out."""
        kept: Dict[Tuple[str, str], int] = {}
        for row, (text, concept_id) in enumerate(zip(self.texts, self.ids)):
            new_id = primary_id(concept_id)
            if new_id is not None:
                kept.setdefault((text, new_id), row)
        vectors = faiss.IndexFlatIP(self.dim)
        if kept:
            vectors.add(self.vectors.reconstruct_batch(numpy.fromiter(kept.values(), dtype="int64")))
        texts, ids = zip(*kept) if kept else ((), ())
        return MentionMemory(self.dim, texts, ids, vectors, self.settings), len(self) - len(kept)

    def search(self, queries: numpy.ndarray, k: int) -> List[List[Candidate]]:
        """For each query vector, its `k` nearest entries as (concept id, cosine similarity), best first."""
        return [[(cid, score) for _, cid, score in row] for row in self.neighbours(queries, k)]

    def neighbours(self, queries: numpy.ndarray, k: int) -> List[List[Tuple[str, str, float]]]:
        """For each query vector, its `k` nearest entries as (mention string, concept id, similarity)."""
        if len(queries) == 0 or len(self) == 0:
            return [[] for _ in range(len(queries))]
        if queries.shape[1] != self.dim:
            raise IndexFormatError(f"query vectors have dimension {queries.shape[1]} but the mention memory has {self.dim}")
        scores, rows = self.vectors.search(float32_rows(queries), min(k, len(self)))
        return [
            [(self.texts[row], self.ids[row], float(score)) for score, row in zip(score_row, row_row) if row >= 0]
            for score_row, row_row in zip(scores.tolist(), rows.tolist())
        ]

    # serialization -----------------------------------------------------------------------------

    def _meta(self) -> dict:
        return {"format_version": FORMAT_VERSION, "dim": self.dim, "n_entries": len(self), **self.settings}

    def to_disk(self, folder: Union[str, Path]) -> None:
        """Write meta.json, entries.msgpack and vectors.faiss, each atomically."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / VECTORS_FILE, lambda tmp: faiss.write_index(self.vectors, str(tmp)))
        atomic_write_bytes(folder / ENTRIES_FILE, srsly.msgpack_dumps({"texts": self.texts, "ids": self.ids}))
        meta = {**self._meta(), RECORDED_FILES: folder_signatures(folder, [VECTORS_FILE, ENTRIES_FILE])}
        atomic_write_text(folder / META_FILE, srsly.json_dumps(meta, indent=2))

    @classmethod
    def from_disk(cls, folder: Union[str, Path]) -> "MentionMemory":
        folder = Path(folder)
        for name in (META_FILE, ENTRIES_FILE, VECTORS_FILE):
            if not (folder / name).exists():
                raise IndexFormatError(f"the mention memory file {folder / name} is missing; rebuild the memory (add-memory)")
        meta = read_table(folder / META_FILE, srsly.read_json)
        memory = cls._assemble(
            meta,
            read_table(folder / ENTRIES_FILE, srsly.read_msgpack),
            read_faiss_file(folder / VECTORS_FILE),
            source=str(folder),
        )
        check_recorded_files(folder, meta, "the mention memory", "add-memory")  # after the checks that say more
        return memory

    def to_bytes(self) -> bytes:
        vectors = faiss.serialize_index(self.vectors).tobytes()
        return srsly.msgpack_dumps({"meta": self._meta(), "texts": self.texts, "ids": self.ids, "vectors": vectors})

    @classmethod
    def from_bytes(cls, data: bytes) -> "MentionMemory":
        try:
            msg = srsly.msgpack_loads(data)
            vectors = faiss.deserialize_index(numpy.frombuffer(msg["vectors"], dtype="uint8"))
            entries = {"texts": msg["texts"], "ids": msg["ids"]}
            meta = msg["meta"]
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            raise IndexFormatError(f"the serialized mention memory is corrupt: {err}") from err
        return cls._assemble(meta, entries, vectors, source="the serialized data")

    @classmethod
    def _assemble(cls, meta: dict, entries: dict, vectors: faiss.Index, source: str) -> "MentionMemory":
        if meta.get("format_version") != FORMAT_VERSION:
            raise format_version_error("mention memory", source, meta.get("format_version"), FORMAT_VERSION, "add-memory")
        if vectors.d != meta["dim"] or vectors.ntotal != meta["n_entries"] or len(entries["texts"]) != meta["n_entries"]:
            raise IndexFormatError(
                f"{source}: the mention memory's {VECTORS_FILE} has dimension {vectors.d} and {vectors.ntotal} vectors, "
                f"{ENTRIES_FILE} {len(entries['texts'])} entries, but {META_FILE} says dimension {meta['dim']} and "
                f"{meta['n_entries']} entries; the files come from different builds"
            )
        return cls(meta["dim"], entries["texts"], entries["ids"], vectors, settings=meta)
