"""Concept index: distinct names encoded once, faiss inner-product search, concept-level top-k."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import faiss
import numpy
import srsly

from .chunk_store import DEFAULT_CHUNK_SIZE, RERANK_CHUNK_FILE, ChunkStore  # noqa: F401 (RERANK_CHUNK_FILE: its old home)
from .encoder import same_encoder
from .errors import IndexFormatError
from .index_types import (
    DEFAULT_NPROBE, DEFAULT_SHORTLIST, RERANKED, TRAINED, choose_index_type, fill_index, inverted_lists, rescored,
    set_search_params,
)
from .columns import HashLookup, StringColumn, arrays_from_msg, arrays_to_msg, load_npy, read_arrays, write_arrays
from .io import atomic_write, atomic_write_text, changed_files, folder_signatures, save_npy
from .kb import Concept, ConceptTable, KnowledgeBase
from .normalizer import Normalizer
from .preprocess import bare_id

# 2: meta.json records the encoder fingerprint, pooling, max_length and the vocabulary hash.
# 3: and the Normalizer (lowercase, remove_punctuation, spelling corrections) that made the names.
# 4: spelling corrections apply to queries only, never to the indexed names.
# 5: concepts.msgpack holds columns (ids, names, flat synonyms/types/xrefs/alt_ids with offsets), and
#    names.msgpack the name/concept pairs as int64 bytes.
# 6: index types fp16, sq8 and ivfpq; an ivfpq index keeps its float16 re-scoring vectors in rerank.npy.
#    Format 5 indexes (flat or hnsw, same files) are read as they are.
# 7: the name and concept tables are flat arrays in tables/*.npy (UTF-8 blobs with offsets, CSR name ->
#    concept links, an id hash look-up), memory-mapped at load like the faiss index. Formats 5 and 6 are
#    read into memory.
# 8: concept definitions in the tables; 7 is read with empty definitions.
FORMAT_VERSION = 10  # 10: the names' hash look-up saved; 9: concept sources (8 and older: empty sources)
READABLE_VERSIONS = (5, 6, 7, 8, 9, 10)
MSGPACK_VERSIONS = (5, 6)
META_FILE, VECTORS_FILE, TABLES_DIR = "meta.json", "vectors.faiss", "tables"
CONCEPTS_FILE, NAMES_FILE = "concepts.msgpack", "names.msgpack"  # formats 5 and 6
RERANK_FILE = "rerank.npy"
NAME_LOOKUP = "name_lookup"
HNSW_EXACT_SHARE = 10  # an HNSW search whose filter allows under 1/10 of the names scans those names exactly  # the tables' prefix of the names' HashLookup (format 10)

Candidate = Tuple[str, float]
TIE_TOLERANCE = 1e-5  # scores this close to the best are ties (one vector; float rounding of the inner product)

# How the concepts sharing a name are ordered, which breaks their exact ties (meta.json's `tie_order`):
# the concepts `ConceptIndex.add_names` was given the name for (the latest call first, then the most often
# given), then those whose canonical name it is, then the rest in vocabulary row order. Indexes saved
# without the key keep the vocabulary row order they were built with (LEGACY_TIE_ORDER).
TIE_ORDER = "added, canonical, row"
LEGACY_TIE_ORDER = "row"


# What decides the meaning of a set of name vectors besides the names, in the order they are checked:
# the encoder (weights and tokenizer), its pooling and truncation, and the name normalization.
# The backend (torch, torch-bf16, torch-fp16, onnx, onnx-int8) runs the same weights, but reduced precision
# and int8 codes move the vectors.
ENCODER_SETTINGS = ("encoder_fingerprint", "backend", "pooling", "max_length")
VECTOR_SETTINGS = ENCODER_SETTINGS + ("lowercase", "remove_punctuation", "spell_check", "normalize")
# what a setting was before it was recorded (indexes and memories of 0.2.0 say nothing of the backend)
UNRECORDED = {"backend": "torch"}


def encoder_settings(encoder) -> Dict[str, Any]:
    """The encoder part of VECTOR_SETTINGS of an `Encoder`: its fingerprint, backend, pooling and max_length."""
    return {
        "encoder_fingerprint": encoder.fingerprint, "backend": encoder.backend, "pooling": encoder.pooling,
        "max_length": encoder.max_length,
    }


def check_vector_settings(
    recorded: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    what: str,
    rebuild: str,
    current_source: str = "the config says",
    encoder_source: str = "the loaded encoder has",
) -> None:
    """An IndexFormatError naming the first of VECTOR_SETTINGS whose recorded and current values differ.

    `what` names the vectors and their file ("the index in pipe/sapbert_linker/index"), `rebuild`
    the command that makes them again ("build-index").
    """
    for key in VECTOR_SETTINGS:
        was, now = recorded.get(key), current.get(key)
        was = UNRECORDED.get(key) if was is None else was
        if was == now:
            continue
        if key == "encoder_fingerprint":
            if same_encoder(was, now):
                continue
            raise IndexFormatError(
                f"{what} was built with the encoder of fingerprint {was!r} but {encoder_source} fingerprint {now!r} "
                f"(other weights or another tokenizer); rebuild it ({rebuild}) with this encoder"
            )
        raise IndexFormatError(
            f"{what} was built with {key}={was!r} but {current_source} {key}={now!r}; rebuild it ({rebuild}) or set {key} back"
        )


def first_search_depth(k: int, n_names: int, n_concepts: int) -> int:
    """How many names `ConceptIndex.search` asks the index for first: enough that most queries find `k`
    distinct concepts at once where a concept has several names (MEDIC: about 6). A flat search costs the
    same for any depth (the matrix product dominates), and each widening is one more whole search."""
    names_per_concept = max(1, round(n_names / max(1, n_concepts)))
    return 4 * k * names_per_concept + 16


def vocabulary_hash(concepts: Iterable[Concept], chunk: int = 10000) -> str:
    """16 hex digits of SHA-256 over the concept records (ids, names, types, xrefs, alt ids) in order."""
    digest = hashlib.sha256()
    batch: List[dict] = []
    for concept in concepts:
        batch.append(concept.to_dict())
        if len(batch) == chunk:
            digest.update(srsly.msgpack_dumps(batch))
            batch = []
    digest.update(srsly.msgpack_dumps(batch))
    return digest.hexdigest()[:16]


def format_version_error(kind: str, source: str, version: Any, expected: int, rebuild: str) -> IndexFormatError:
    """The error for saved vectors of another format version: older ones are rebuilt, newer ones need an upgrade."""
    if isinstance(version, int) and version > expected:
        return IndexFormatError(
            f"the {kind} in {source} has format_version {version}, newer than this spacy-sapbert reads ({expected}); "
            "upgrade spacy-sapbert"
        )
    return IndexFormatError(
        f"the {kind} in {source} has format_version {version} but this spacy-sapbert reads {expected}: it was saved "
        f"by an older version and does not record the encoder fingerprint, pooling and max_length its vectors were "
        f"made with; rebuild it ({rebuild})"
    )


def name_table(
    concepts: Sequence[Concept], normalizer: Normalizer, added: Iterable[Tuple[str, str]] = ()
) -> Tuple[List[str], "NameLinks"]:
    """Distinct normalized names, and the links from each name row to the concept rows that have it, in
    TIE_ORDER: the concepts whose canonical name it is before those that have it as a synonym. `added`: (concept id,
    name) pairs that come first on their names, the most often given first, as `ConceptIndex.add_names` puts them
    (the names must be among the concepts' own: the string baselines give the biosyn protocol's extra names so)."""
    name_rows: Dict[str, int] = {}
    pair_names: List[int] = []
    pair_concepts: List[int] = []
    pair_rank: List[int] = []  # 0 canonical, 1 synonym; an added pair minus the times it was given
    for concept_row, concept in enumerate(concepts):
        for position, name in enumerate(concept.names):
            key = normalizer(name)
            if key:
                pair_names.append(name_rows.setdefault(key, len(name_rows)))
                pair_concepts.append(concept_row)
                pair_rank.append(int(position > 0))
    added = list(added)
    row_of = {concept.id: row for row, concept in enumerate(concepts)} if added else {}
    given: Dict[Tuple[int, int], int] = {}  # times each (name row, concept row) is given, in the order first given
    for concept_id, name in added:
        key = normalizer(name)
        if key in name_rows and concept_id in row_of:
            pair = (name_rows[key], row_of[concept_id])
            given[pair] = given.get(pair, 0) + 1
    first = list(given)  # before the concepts' own pairs: from_pairs keeps a pair's first occurrence
    links = NameLinks.from_pairs(
        numpy.array([name for name, _ in first] + pair_names, "int64"),
        numpy.array([concept for _, concept in first] + pair_concepts, "int64"),
        len(name_rows),
        numpy.array([-given[pair] for pair in first] + pair_rank, "int64"),
    )
    return list(name_rows), links


class NameLinks:
    """Which concepts each name row belongs to, in CSR layout (name row i owns concepts[offsets[i]:offsets[i + 1]],
    in the order `from_pairs` keeps), and the concept-level ranking built on it."""

    def __init__(self, offsets: numpy.ndarray, concepts: numpy.ndarray):
        if offsets.ndim != 1 or len(offsets) == 0 or int(offsets[0]) != 0 or int(offsets[-1]) != len(concepts):
            raise ValueError(f"name offsets {offsets.shape} ending at {int(offsets[-1]) if len(offsets) else None} do not fit {len(concepts)} concept rows")
        self.offsets = offsets
        self.concepts = concepts

    @classmethod
    def from_pairs(
        cls, pair_names: numpy.ndarray, pair_concepts: numpy.ndarray, n_names: int, rank: Optional[numpy.ndarray] = None
    ) -> "NameLinks":
        """The links of (name row, concept row) pairs, each pair once (its first occurrence, with its rank).

        Within a name row the concepts are ordered by `rank` (lower first; default all equal), then by the
        order of the pairs. That order breaks exact ties between concepts sharing a name (TIE_ORDER)."""
        names, concepts = numpy.asarray(pair_names, "int64"), numpy.asarray(pair_concepts, "int64")
        rank = numpy.zeros(len(names), "int64") if rank is None else numpy.asarray(rank, "int64")
        _, first = numpy.unique(numpy.stack([names, concepts]), axis=1, return_index=True)
        first.sort()
        names, concepts, rank = names[first], concepts[first], rank[first]
        order = numpy.lexsort((numpy.arange(len(names)), rank, names))
        offsets = numpy.searchsorted(names[order], numpy.arange(n_names + 1)).astype("int64")
        return cls(offsets, numpy.ascontiguousarray(concepts[order]))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def concepts_of(self, name_row: int) -> List[int]:
        """The concept rows of a name row."""
        return self.concepts[int(self.offsets[name_row]) : int(self.offsets[name_row + 1])].tolist()

    def pairs(self) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """(name row, concept row) of every link."""
        return numpy.repeat(numpy.arange(len(self), dtype="int64"), numpy.diff(self.offsets)), numpy.asarray(self.concepts, "int64")

    def concept_hits(
        self, scores: Sequence[float], name_rows: Sequence[int], k: int, ids: Sequence[str],
        allowed: Optional[numpy.ndarray] = None,
    ) -> List[Candidate]:
        """Walk name hits best first and keep each concept's first (best) score, up to k concepts;
        `ids`: the concept id of each concept row; `allowed`: a boolean per concept row, False rows skipped."""
        hits: List[Candidate] = []
        seen = set()
        for score, name_row in zip(numpy.asarray(scores).tolist(), numpy.asarray(name_rows).tolist()):
            if name_row < 0:
                break
            for concept_row in self.concepts_of(name_row):
                if concept_row not in seen and (allowed is None or allowed[concept_row]):
                    seen.add(concept_row)
                    hits.append((ids[concept_row], float(score)))
                    if len(hits) == k:
                        return hits
        return hits


class NameSelector:
    """A faiss id selector over name rows (a bitmap; faiss reads the bits, which this keeps alive)."""

    def __init__(self, selected: numpy.ndarray) -> None:
        self.count = int(selected.sum())
        self.bits = numpy.packbits(selected, bitorder="little")
        self.faiss_selector = faiss.IDSelectorBitmap(len(selected), faiss.swig_ptr(self.bits))


class ConceptIndex:
    """Names of a vocabulary in a faiss index, searched at the concept level.

    Each distinct (normalized) name is one faiss row; a name shared by several concepts points to
    all of them. A concept's score for a query is the score of its best-matching name.
    """

    def __init__(
        self,
        concepts: ConceptTable,
        names: Union[StringColumn, Sequence[str]],
        links: NameLinks,
        vectors: faiss.Index,
        *,
        normalizer: Normalizer = Normalizer(),
        normalize: bool = True,
        index_type: str = "flat",
        encoder: Optional[Mapping[str, Any]] = None,
        vocabulary: Optional[str] = None,
        rerank: Optional[numpy.ndarray] = None,
        folder: Optional[Path] = None,
        tie_order: str = TIE_ORDER,
        name_lookup: Optional[HashLookup] = None,
    ):
        """`concepts`: the concepts, one row each, that the links point to; `names`: the distinct
        normalized names, one per faiss row; `encoder`: the ENCODER_SETTINGS the vectors were made with
        (None: unknown, an `encode` function); `vocabulary`: the vocabulary_hash of the concepts;
        `rerank`: the float16 vectors of a RERANKED index type; `folder`: the saved index that `vectors`
        and the tables are memory-mapped from (a mapped faiss index is read-only: faiss aborts the
        process when codes are added to it); `tie_order`: how `links` orders the concepts of a name;
        `name_lookup`: the saved `HashLookup` of `names` (else built on first use: 25 s at 10M names, in every process)."""
        names = names if isinstance(names, StringColumn) else StringColumn.from_strings(names)
        if vectors.ntotal != len(names) or len(links) != len(names):
            raise IndexFormatError(
                f"the faiss index holds {vectors.ntotal} vectors and the name links {len(links)} rows, but there are "
                f"{len(names)} names: the files come from different builds"
            )
        if (index_type in RERANKED) != (rerank is not None) or (rerank is not None and rerank.shape != (len(names), vectors.d)):
            raise IndexFormatError(
                f"index_type={index_type!r} with re-scoring vectors of shape {None if rerank is None else rerank.shape} "
                f"for {len(names)} names of dimension {vectors.d}: the files come from different builds"
            )
        self.rerank = rerank
        self.nprobe = DEFAULT_NPROBE
        self.shortlist = DEFAULT_SHORTLIST
        set_search_params(vectors, self.nprobe)
        self.concepts = concepts
        self.names = names
        self.links = links
        self.vectors = vectors
        self.inverted_lists = inverted_lists(vectors)  # 0 but for an inverted file (ivfpq, ivfopq)
        self.folder = folder  # None once the index differs from the saved one (add_names)
        self.vectors_mapped = folder is not None  # until add_names copies them into memory to add to them
        self.normalizer = normalizer
        self.normalize = normalize
        self.index_type = index_type
        self.tie_order = tie_order
        self.encoder_settings = {key: (encoder or {}).get(key) for key in ENCODER_SETTINGS}
        self.vocabulary_hash = vocabulary
        self._masks: Dict[Tuple[str, frozenset], numpy.ndarray] = {}  # list_mask's, per field and set of values
        if name_lookup is not None and len(name_lookup.hashes) != len(names):
            raise IndexFormatError(f"the name look-up holds {len(name_lookup.hashes)} names, not {len(names)}; rebuild the index (build-index)")
        self._name_lookup = name_lookup  # name_row's
        self._selectors: Dict[bytes, NameSelector] = {}  # search's, per allowed mask (a few kept)

    @property
    def dim(self) -> int:
        return int(self.vectors.d)

    def set_search_params(self, nprobe: int = DEFAULT_NPROBE, shortlist: int = DEFAULT_SHORTLIST) -> None:
        """Search-time settings of approximate types: inverted lists scanned (`ivfpq`) and how many
        candidates are re-scored exactly; they trade speed for recall and never change the vectors."""
        if nprobe < 1 or shortlist < 1:
            raise ValueError(f"nprobe={nprobe} and shortlist={shortlist} must be at least 1")
        self.nprobe, self.shortlist = nprobe, shortlist
        set_search_params(self.vectors, nprobe)

    @property
    def settings(self) -> Dict[str, Any]:
        """The VECTOR_SETTINGS the name vectors were made with."""
        return {**self.encoder_settings, **self.normalizer.settings(), "normalize": self.normalize}

    @property
    def ids(self) -> Sequence[str]:
        """The primary id of each concept, in row order (no Concept is built)."""
        return self.concepts.ids

    def __len__(self) -> int:
        return len(self.concepts)

    @classmethod
    def build(
        cls,
        concepts: Union[KnowledgeBase, Iterable[Concept]],
        encode,
        *,
        normalizer: Normalizer = Normalizer(),
        normalize: bool = True,
        index_type: str = "flat",
        encoder: Optional[Mapping[str, Any]] = None,
        chunk_dir: Optional[Union[str, Path]] = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        encode_chunks: Optional[Callable[[ChunkStore], Any]] = None,
        progress: bool = False,
        batch_size: Optional[int] = None,
    ) -> "ConceptIndex":
        """Index `concepts`; `encode(list_of_str) -> float32 array` embeds the distinct names once.

        Concepts of the same id are merged here, once (a KnowledgeBase or a ConceptTable is used as it is). They are
        made a ConceptTable before the names are encoded; given one (build-index reads the vocabulary into one), no
        Concept object of the vocabulary is held while encoding.
        `encoder`: the encoder_settings() of the encoder behind `encode`, recorded in the meta.
        `chunk_dir`: encode `chunk_size` names at a time into this folder (a `ChunkStore`), so a build
        that is killed resumes from its finished chunks when started again; vectors are added to faiss
        chunk by chunk (and an `ivfpq` build keeps its re-scoring vectors there, memory-mapped, until
        the index is saved). Without it, all names are encoded in one call (`progress` is then `encode`'s).
        `batch_size`: the names `encode` pads together, recorded with the chunks (a resume must use the same).
        `encode_chunks(store)`: encodes the chunks the store is missing before they are read, elsewhere
        (`build-index --ray`: `distributed.encode_chunks`); the index is then assembled as usual.
        `index_type`: one of index_types.CONFIG_INDEX_TYPES (`auto` picks by the number of names).
        """
        if isinstance(concepts, ConceptTable):  # distinct ids already: no Concept of every row is held while encoding
            table = concepts
        else:
            table = ConceptTable.from_concepts(concepts if isinstance(concepts, KnowledgeBase) else KnowledgeBase(concepts))
        del concepts
        if not len(table):
            raise IndexFormatError("the vocabulary gave no concepts; check the vocabulary file and its format")
        names, links = name_table(table, normalizer)
        if not names:
            raise IndexFormatError(
                f"the vocabulary's {len(table)} concept(s) gave no names to index: every name is empty once "
                f"normalized (remove_punctuation={normalizer.remove_punctuation}); check the vocabulary file and its format"
            )
        vocabulary = vocabulary_hash(table)
        index_type = choose_index_type(index_type, len(names))
        rerank_file = None
        if chunk_dir is None:
            encoded = [encode(names)]
            blocks = lambda: encoded  # noqa: E731
        else:
            if encoder is None:
                raise ValueError("a chunked build needs the encoder settings (encoder=encoder_settings(encoder))")
            settings = {**encoder, **normalizer.settings(), "normalize": normalize}
            store = ChunkStore(chunk_dir, names, settings, chunk_size, batch_size)
            if encode_chunks is not None:
                encode_chunks(store)
            if index_type in TRAINED:  # read twice (a training sample, then every vector): encode them all first
                store.encode_missing(encode, progress=progress)
                progress = False
            blocks = lambda: store.vectors(encode, progress=progress)  # noqa: E731
            rerank_file = store.new_rerank_file()
        faiss_index, rerank = fill_index(
            blocks, len(names), index_type, lambda block: float32_rows(block, normalize), rerank_file=rerank_file
        )
        return cls(
            table, names, links, faiss_index,
            normalizer=normalizer, normalize=normalize, index_type=index_type,
            encoder=encoder, vocabulary=vocabulary, rerank=rerank,
        )

    def concept(self, concept_id: str) -> Optional[Concept]:
        """The concept with this primary or alternative id ("MESH:D003920" is D003920 and "UMLS:C0011849" C0011849, as the readers name them), or None."""
        concept = self.concepts.get(concept_id)
        if concept is None and bare_id(concept_id) != concept_id:
            concept = self.concepts.get(bare_id(concept_id))
        return concept

    def add_names(self, names_by_id: Iterable[Tuple[str, str]], encode, *, new_concepts: bool = False) -> int:
        """Add extra names to existing concepts (e.g. training mentions); returns how many pairs were new.

        The (name, concept) pairs given come first on their names (TIE_ORDER), the most often given first, also
        a pair the index held already: adding "DM" to one concept links "DM" there, though the vocabulary gave
        "DM" to another concept too, and a name that training mentions give to one concept twenty times and
        to another once links to the first. A pair whose id is not in the index is left out, or with
        `new_concepts` makes a new concept of that id, named by its first name (as the BioSyn protocol's
        dictionary takes a training mention of a concept the vocabulary lacks). The index is then held in
        memory: its memory-mapped vectors and tables are read in."""
        names_by_id = list(names_by_id)
        n_concepts = len(self.concepts)
        if new_concepts:
            self._add_concepts(names_by_id)
        # the names held are found through the name look-up (saved with the index), not a dict of every name
        n_names, links = len(self.names), self.links
        new_rows: Dict[str, int] = {}
        new_names: List[str] = []
        given: Dict[Tuple[int, int], int] = {}  # times each pair is given, in the order first given
        for concept_id, name in names_by_id:
            concept_row = self.concepts.row(concept_id)
            key = self.normalizer(name)
            if concept_row is None or not key:
                continue
            row = new_rows.get(key)
            if row is None:
                row = self.name_row(key)
            if row is None:
                row = new_rows[key] = n_names + len(new_names)
                new_names.append(key)
            pair = (row, concept_row)
            given[pair] = given.get(pair, 0) + 1
        if new_names:
            vectors = float32_rows(encode(new_names), self.normalize)
            if self.vectors_mapped:  # a memory-mapped faiss index is read-only: add to a copy in memory
                self.vectors = faiss.deserialize_index(faiss.serialize_index(self.vectors))
                self.vectors_mapped = False
                set_search_params(self.vectors, self.nprobe)
            self.vectors.add(vectors)
            if self.rerank is not None:  # read into memory: fine for a few thousand training mentions
                self.rerank = numpy.concatenate([self.rerank, vectors.astype("float16")])
            lookup = self.name_lookup  # of the names held (the loop above used it)
            self.names = self.names.extended(new_names)
            self._name_lookup = lookup.extended(new_names, n_names)  # not built again over every name
        if given:
            first = numpy.array(sorted(given, key=lambda pair: -given[pair]), dtype="int64")  # stable: ties keep first-given order
            pair_names, pair_concepts = links.pairs()
            self.links = NameLinks.from_pairs(
                numpy.concatenate([first[:, 0], pair_names]), numpy.concatenate([first[:, 1], pair_concepts]), len(self.names)
            )
        self._selectors.clear()  # they select name rows, which the new names and links change
        if given or len(self.concepts) != n_concepts:  # no longer the saved index: pickled as itself, not as the folder
            self.folder = None
        return sum(row >= n_names or concept_row not in links.concepts_of(row) for row, concept_row in given)

    def _add_concepts(self, names_by_id: Sequence[Tuple[str, str]]) -> None:
        """Append a concept (id, first name) for each id of `names_by_id` the index lacks and that has a name."""
        new: Dict[str, Concept] = {}
        for concept_id, name in names_by_id:
            if concept_id not in new and self.normalizer(name) and self.concepts.row(concept_id) is None:
                new[concept_id] = Concept(concept_id, name)
        if new:
            self.concepts = self.concepts.extended(list(new.values()))
            self._masks.clear()

    def search(self, queries: numpy.ndarray, k: int, allowed: Optional[numpy.ndarray] = None) -> List[List[Candidate]]:
        """For each query vector, up to `k` (concept id, score) pairs, best first, each concept once.

        `allowed` (a boolean per concept row, e.g. type_mask): only those concepts are candidates, and faiss
        scans only names of an allowed concept (a rare type costs what an unfiltered search does, not a walk
        over every name; an HNSW graph filtered that way returns some of the few names, not the best, so one whose
        names are under a tenth allowed is scanned exactly, and one with more is searched as without a filter); the search widens until it has `k` of them or has seen every such name: deeper, and for an inverted file
        whose scanned lists ran out, over more lists (`nprobe`, given to that search only: the index is shared by
        threads, and a setting changed on it and set back mid-search changed their results)."""
        if len(queries) == 0:
            return []
        if queries.shape[1] != self.dim:
            raise IndexFormatError(f"query vectors have dimension {queries.shape[1]} but the index has {self.dim}")
        queries = float32_rows(queries, self.normalize)
        selector = None if allowed is None else self._name_selector(allowed)
        exact = False
        if selector is not None and isinstance(self.vectors, faiss.IndexHNSW):
            exact = selector.count * HNSW_EXACT_SHARE < self.vectors.ntotal
            selector = selector if exact else None
        limit = self.vectors.ntotal if selector is None else selector.count  # the names the search can return
        if limit == 0:
            return [[] for _ in queries]
        results: List[Optional[List[Candidate]]] = [None] * len(queries)
        pending = numpy.arange(len(queries))
        depth = min(limit, first_search_depth(k, len(self.names), len(self.concepts)))
        lists = self.inverted_lists
        nprobe = self.nprobe
        while len(pending):
            scores, rows = self._name_hits(queries[pending], depth, nprobe, exact, selector)
            unfinished, ran_out, graph_ended = [], False, False
            for qi, score_row, name_row in zip(pending, scores, rows):
                hits = self.links.concept_hits(score_row, name_row, k, self.concepts.ids, allowed)
                # a -1 row: the index has no more names for this query (an inverted file's scanned lists ran out)
                more_lists = name_row[-1] < 0 and nprobe < lists
                # an HNSW graph search ends short of the names it holds (a third of 6,000): the exact scan finds them
                graph_short = name_row[-1] < 0 and not lists and not exact and len(hits) < k
                if len(hits) < k and ((depth < limit and name_row[-1] >= 0) or more_lists or graph_short):
                    unfinished.append(qi)
                    ran_out, graph_ended = ran_out or more_lists, graph_ended or graph_short
                else:
                    results[qi] = hits
            pending = numpy.array(unfinished, dtype="int64")
            depth = min(limit, depth * 4)
            if ran_out:
                nprobe = min(lists, nprobe * 4)
            exact = exact or graph_ended
        return results  # type: ignore[return-value]

    def exact_name_first(self, name: str, hits: List[Candidate], allowed: Optional[numpy.ndarray] = None) -> List[Candidate]:
        """`hits` of the (normalized) query `name`, the concepts that have exactly that name put first among those
        tied with the best score: names cut alike at max_length have one vector ("muscular dystrophy-
        dystroglycanopathy (...), type A, 5" and "..., type A, 6"), and the faiss row order picked one of them."""
        best = hits[0][1] if hits else None
        tied = sum(1 for _, score in hits if score >= best - TIE_TOLERANCE) if hits else 0
        row = self.name_row(name) if tied > 1 else None
        if row is None:
            return hits
        given = dict(hits)
        # the query is the exact name, so its own vector scores highest when vectors are unit length (cosine 1): an
        # owner cut off by k then has the best score; unnormalized, an owner counts only where the search tied it
        owners = [
            cid for cid in (self.concepts.ids[r] for r in self.links.concepts_of(row) if allowed is None or allowed[r])
            if (cid not in given and self.normalize) or (cid in given and given[cid] >= best - TIE_TOLERANCE)
        ]
        first = [(cid, given.get(cid, best)) for cid in owners]
        return (first + [hit for hit in hits if hit[0] not in set(owners)])[:len(hits)]

    def name_row(self, name: str) -> Optional[int]:
        """The row of a stored (normalized) name, or None; the hash look-up over the names is built on first use."""
        for row in self.name_lookup.candidates(name):
            if self.names[row] == name:
                return row
        return None

    @property
    def name_lookup(self) -> HashLookup:
        """The hash look-up of the names: saved with the index (format 10), else built here once."""
        if self._name_lookup is None:
            self._name_lookup = HashLookup.build(self.names)
        return self._name_lookup

    def type_mask(self, types: Iterable[str]) -> numpy.ndarray:
        """A boolean per concept row: True where the concept has one of `types` (UMLS TUIs, an ontology's
        namespace, MeSH tree numbers and categories, as the vocabulary's reader stored them)."""
        return self.list_mask("types", types)

    def source_mask(self, sources: Iterable[str]) -> numpy.ndarray:
        """A boolean per concept row: True where the concept has a name from one of `sources` (UMLS SABs, "MSH",
        an ontology's id prefix, as the vocabulary's reader stored them)."""
        return self.list_mask("sources", sources)

    def list_mask(self, field: str, values: Iterable[str]) -> numpy.ndarray:
        """A boolean per concept row: True where the concept's list `field` holds one of `values`. Computed
        once per field and set of values."""
        key = (field, frozenset(values))
        if key not in self._masks:
            items, offsets = self.concepts.lists[field]
            item_allowed = numpy.fromiter((item in key[1] for item in items), dtype=bool, count=len(items))
            row_of_item = numpy.repeat(numpy.arange(len(self.concepts)), numpy.diff(offsets))
            mask = numpy.zeros(len(self.concepts), dtype=bool)
            mask[row_of_item[item_allowed]] = True
            self._masks[key] = mask
        return self._masks[key]

    def _name_selector(self, allowed: numpy.ndarray) -> "NameSelector":
        """The name rows of the concepts `allowed` (a boolean per concept row), as faiss selects ids; kept per mask."""
        key = hashlib.blake2b(numpy.packbits(allowed).tobytes(), digest_size=16).digest() + len(allowed).to_bytes(8, "little")
        selector = self._selectors.get(key)
        if selector is None:
            name_rows, concept_rows = self.links.pairs()
            selected = numpy.zeros(len(self.names), dtype=bool)
            selected[name_rows[numpy.asarray(allowed, dtype=bool)[concept_rows]]] = True
            selector = NameSelector(selected)
            if len(self._selectors) >= 16:  # types_by_label makes one mask per label: a few
                self._selectors.clear()  # (one call, safe beside threads that search with theirs)
            self._selectors[key] = selector
        return selector

    def _name_hits(
        self, queries: numpy.ndarray, depth: int, nprobe: int, exact: bool = False, selector: Optional["NameSelector"] = None
    ) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The `depth` best (score, name row) of each query, an inverted file scanning `nprobe` lists; a RERANKED type
        re-scores a wider shortlist exactly against its float16 vectors. `exact`: an HNSW graph's vectors are scanned
        whole (its graph search ended early). `selector`: only its name rows are scanned."""
        sel = {} if selector is None else {"sel": selector.faiss_selector}
        params = {"params": faiss.SearchParametersIVF(nprobe=nprobe, **sel)} if self.inverted_lists else {"params": faiss.SearchParameters(**sel)} if sel else {}
        if exact and isinstance(self.vectors, faiss.IndexHNSW):
            return faiss.downcast_index(self.vectors.storage).search(queries, depth, **params)
        if self.rerank is None:
            return self.vectors.search(queries, depth, **params)
        limit = self.vectors.ntotal if selector is None else selector.count
        _, rows = self.vectors.search(queries, min(limit, max(depth, self.shortlist)), **params)
        return rescored(queries, rows, self.rerank, depth)

    # serialization -----------------------------------------------------------------------------

    def meta(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "dim": self.dim,
            "n_concepts": len(self.concepts),
            "n_names": len(self.names),
            "normalizer": self.normalizer.to_dict(),
            "normalize": self.normalize,
            "index_type": self.index_type,
            "tie_order": self.tie_order,
            **self.encoder_settings,
            "vocabulary_hash": self.vocabulary_hash,
        }

    def tables(self) -> Dict[str, numpy.ndarray]:
        """The name and concept tables as flat arrays, saved as TABLES_DIR/KEY.npy and memory-mapped at load."""
        return {**table_arrays(self.concepts, self.names, self.links), **self.name_lookup.arrays(NAME_LOOKUP)}

    def to_disk(self, folder: Union[str, Path]) -> None:
        """Write the tables, vectors.faiss (and rerank.npy), then meta.json, each file atomically."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tables = self.tables()
        write_arrays(folder / TABLES_DIR, tables)
        atomic_write(folder / VECTORS_FILE, lambda tmp: faiss.write_index(self.vectors, str(tmp)))
        written = [VECTORS_FILE, *(f"{TABLES_DIR}/{key}.npy" for key in tables)]
        if self.rerank is not None:
            save_npy(folder / RERANK_FILE, self.rerank)
            written.append(RERANK_FILE)
        meta = {**self.meta(), RECORDED_FILES: folder_signatures(folder, written)}
        atomic_write_text(folder / META_FILE, srsly.json_dumps(meta, indent=2))

    @classmethod
    def from_disk(cls, folder: Union[str, Path]) -> "ConceptIndex":
        """The index saved in `folder`, memory-mapped: its tables, vectors and re-scoring vectors are
        read from disk as searches touch them (format 5 and 6 tables are read into memory)."""
        folder = Path(folder)
        meta_file = folder / META_FILE
        if not meta_file.exists():
            raise IndexFormatError(f"the concept index file {meta_file} is missing; rebuild the index (build-index)")
        meta = read_table(meta_file, srsly.read_json)
        version = meta.get("format_version")
        if version not in READABLE_VERSIONS:  # before reading the large files
            raise format_version_error("index", str(folder), version, FORMAT_VERSION, "build-index")
        vectors_file = folder / VECTORS_FILE
        if not vectors_file.exists():
            raise IndexFormatError(f"the concept index file {vectors_file} is missing; rebuild the index (build-index)")
        if version in MSGPACK_VERSIONS:
            tables = legacy_tables(folder)
        else:
            tables = read_arrays(folder / TABLES_DIR, table_dtypes(version))
        rerank = read_rerank(folder / RERANK_FILE) if meta.get("index_type") in RERANKED else None
        vectors = read_faiss_file(vectors_file, faiss.IO_FLAG_MMAP_IFC)
        index = cls._assemble(meta, tables, vectors, source=str(folder), rerank=rerank, folder=folder)
        check_recorded_files(folder, meta, "the concept index", "build-index")  # after the checks that say more
        return index

    def to_bytes(self) -> bytes:
        rerank = None if self.rerank is None else numpy.ascontiguousarray(self.rerank, dtype="<f2").tobytes()
        return srsly.msgpack_dumps(
            {"meta": self.meta(), "tables": arrays_to_msg(self.tables()), "vectors": faiss.serialize_index(self.vectors).tobytes(), "rerank": rerank}
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> "ConceptIndex":
        try:
            msg = srsly.msgpack_loads(data)
            meta = msg["meta"]
            if meta.get("format_version") not in READABLE_VERSIONS:
                raise format_version_error("index", "the serialized data", meta.get("format_version"), FORMAT_VERSION, "build-index")
            vectors = faiss.deserialize_index(numpy.frombuffer(msg["vectors"], dtype="uint8"))
            if meta["format_version"] in MSGPACK_VERSIONS:
                tables = legacy_arrays(srsly.msgpack_loads(msg["concepts"]), srsly.msgpack_loads(msg["names"]))
            else:
                tables = arrays_from_msg(msg["tables"], table_dtypes(meta["format_version"]))
            rerank = msg.get("rerank")
            if rerank is not None:
                rerank = numpy.frombuffer(rerank, dtype="<f2").reshape(-1, vectors.d).astype("float16")
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            if isinstance(err, IndexFormatError):
                raise
            raise IndexFormatError(f"the serialized concept index is corrupt: {err}") from err
        return cls._assemble(meta, tables, vectors, source="the serialized data", rerank=rerank)

    def __reduce__(self):
        """Pickled (spaCy's spawned `nlp.pipe` processes) as its folder while it is memory-mapped, so the
        processes share the pages; otherwise as bytes."""
        if self.folder is not None:
            return reopen_index, (str(self.folder), self.meta(), self.nprobe, self.shortlist)
        return index_from_bytes, (self.to_bytes(), self.nprobe, self.shortlist)

    @classmethod
    def _assemble(
        cls,
        meta: dict,
        tables: Mapping[str, numpy.ndarray],
        vectors: faiss.Index,
        source: str,
        rerank: Optional[numpy.ndarray] = None,
        folder: Optional[Path] = None,
    ) -> "ConceptIndex":
        if vectors.d != meta["dim"] or vectors.ntotal != meta["n_names"]:
            raise IndexFormatError(
                f"{source}: {VECTORS_FILE} has dimension {vectors.d} and {vectors.ntotal} vectors, but {META_FILE} "
                f"says dimension {meta['dim']} and {meta['n_names']} names; the files come from different builds"
            )
        if rerank is not None and rerank.shape != (meta["n_names"], meta["dim"]):
            raise IndexFormatError(
                f"{source}: {RERANK_FILE} holds {rerank.shape[0]} vectors of dimension {rerank.shape[1]}, but {META_FILE} "
                f"says {meta['n_names']} names of dimension {meta['dim']}; the files come from different builds"
            )
        try:
            table = ConceptTable.from_arrays(tables, "concepts")
            names = StringColumn.from_arrays(tables, "names")
            links = NameLinks(tables["links.offsets"], tables["links.concepts"])
            name_lookup = HashLookup.from_arrays(tables, NAME_LOOKUP) if f"{NAME_LOOKUP}.hashes" in tables else None
        except (ValueError, KeyError) as err:
            raise IndexFormatError(f"{source}: the tables in {TABLES_DIR}/ do not fit together ({err}); rebuild the index (build-index)") from err
        if len(table) != meta["n_concepts"]:
            raise IndexFormatError(
                f"{source}: the tables hold {len(table)} concepts but {META_FILE} says {meta['n_concepts']}; the files come from different builds"
            )
        return cls(
            table,
            names,
            links,
            vectors,
            normalizer=Normalizer.from_dict(meta["normalizer"]),
            normalize=meta["normalize"],
            index_type=meta["index_type"],
            encoder=meta,
            vocabulary=meta.get("vocabulary_hash"),
            rerank=rerank,
            folder=folder,
            tie_order=meta.get("tie_order", LEGACY_TIE_ORDER),
            name_lookup=name_lookup,
        )


RECORDED_FILES = "files"  # the meta.json key of the files' signatures (io.file_signature) at save


def check_recorded_files(folder: Path, meta: Mapping[str, Any], what: str, rebuild: str) -> None:
    """IndexFormatError when a file that meta.json recorded at save is another now (a file copied in from another
    build that has its dimension and size would be searched). A meta.json of an earlier save records none."""
    changed = changed_files(folder, meta.get(RECORDED_FILES, {}))
    if changed:
        raise IndexFormatError(
            f"{what} in {folder}: {', '.join(changed)} {'is' if len(changed) == 1 else 'are'} not the file(s) its "
            f"{META_FILE} was saved with (copied from another build?); rebuild it ({rebuild}) or restore them"
        )


def reopen_index(folder: str, meta: dict, nprobe: int, shortlist: int) -> ConceptIndex:
    """The memory-mapped index in `folder` (unpickling), refused if the folder now holds another index."""
    index = ConceptIndex.from_disk(folder)
    if index.meta() != meta:
        raise IndexFormatError(f"the index in {folder} changed on disk after it was loaded; load the pipeline again")
    index.set_search_params(nprobe, shortlist)
    return index


def index_from_bytes(data: bytes, nprobe: int, shortlist: int) -> ConceptIndex:
    index = ConceptIndex.from_bytes(data)
    index.set_search_params(nprobe, shortlist)
    return index


def table_arrays(concepts: ConceptTable, names: StringColumn, links: NameLinks) -> Dict[str, numpy.ndarray]:
    """The arrays an index saves for its tables, by name (see table_dtypes)."""
    return {
        **names.arrays("names"),
        "links.offsets": links.offsets,
        "links.concepts": links.concepts,
        **concepts.arrays("concepts"),
    }


def table_dtypes(version: int = FORMAT_VERSION) -> Dict[str, str]:
    """The arrays of ConceptIndex.tables() and their dtypes, as saved by index format `version` (7 or later)."""
    return {
        **StringColumn.dtypes("names"), "links.offsets": "int64", "links.concepts": "int64",
        **ConceptTable.array_dtypes("concepts", definitions=version >= 8, sources=version >= 9),
        **(HashLookup.dtypes(NAME_LOOKUP) if version >= 10 else {}),
    }


def legacy_tables(folder: Path) -> Dict[str, numpy.ndarray]:
    """The tables of a format 5 or 6 index folder (concepts.msgpack and names.msgpack), read into memory."""
    files = [folder / CONCEPTS_FILE, folder / NAMES_FILE]
    for path in files:
        if not path.exists():
            raise IndexFormatError(f"the concept index file {path} is missing; rebuild the index (build-index)")
    concepts, names = (read_table(path, srsly.read_msgpack) for path in files)
    try:
        return legacy_arrays(concepts, names)
    except (ValueError, KeyError, TypeError) as err:
        raise IndexFormatError(f"{folder}: {CONCEPTS_FILE} or {NAMES_FILE} is malformed: {err!r}") from err


def legacy_arrays(concepts: dict, names: dict) -> Dict[str, numpy.ndarray]:
    """The arrays of ConceptIndex.tables() from the msgpack columns of formats 5 and 6."""
    table = ConceptTable.from_dict(concepts)
    pair_names = numpy.frombuffer(names["pair_names"], dtype="<i8").astype("int64")
    pair_concepts = numpy.frombuffer(names["pair_concepts"], dtype="<i8").astype("int64")
    if len(pair_names) != len(pair_concepts) or (len(pair_concepts) and pair_concepts.max() >= len(table)):
        raise ValueError(f"the name/concept pairs do not fit the {len(table)} concepts")
    links = NameLinks.from_pairs(pair_names, pair_concepts, len(names["names"]))
    return table_arrays(table, StringColumn.from_strings(names["names"]), links)


def float32_rows(vectors: numpy.ndarray, normalize: bool = True) -> numpy.ndarray:
    """A C-contiguous float32 copy of `vectors` for faiss, rows scaled to unit length when `normalize`.

    Always a copy: the caller's array is never normalized in place.
    """
    vectors = numpy.array(vectors, dtype="float32", order="C", copy=True)
    if normalize:
        faiss.normalize_L2(vectors)
    return vectors


def read_table(path: Path, reader):
    """`reader(path)` (srsly JSON or msgpack) with a corrupt file reported as an IndexFormatError naming it."""
    try:
        return reader(path)
    except (ValueError, TypeError) as err:
        raise IndexFormatError(f"the file {path} is corrupt: {err}") from err


def read_faiss_file(path: Path, flags: int = 0) -> faiss.Index:
    """A faiss index from disk, a corrupt file reported as an IndexFormatError naming it.

    With `faiss.IO_FLAG_MMAP_IFC` the codes (of every index type: flat, scalar-quantized, HNSW storage,
    inverted lists) stay memory-mapped: a load reads almost nothing, processes on one machine share the
    pages, and the index is read-only."""
    try:
        return faiss.read_index(str(path), flags)
    except RuntimeError as err:
        raise IndexFormatError(f"the faiss index file {path} is corrupt: {err}") from err


def read_rerank(path: Path) -> numpy.ndarray:
    """The float16 re-scoring vectors of an index, memory-mapped (pages are read as queries touch them)."""
    return load_npy(path, "re-scoring vector file", "float16", 2)
