"""Encoded vocabularies of evaluation runs, cached by everything their vectors depend on."""
from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Iterator, List, Mapping, Optional, Sequence

from ..chunk_store import CHUNKS_SUFFIX, DEFAULT_CHUNK_SIZE, remove_chunks
from ..index import ConceptIndex, META_FILE, check_vector_settings, encoder_settings, vocabulary_hash
from ..io import held_lock
from ..kb import Concept, KnowledgeBase
from ..normalizer import Normalizer


# How build_encoder_index builds its indexes (the names are normalized by the index's Normalizer).
EVAL_INDEX = {"normalize": True, "index_type": "flat"}
# Part of the cache key of encoded vocabularies: raise it when an index change alters what evaluation reads
# from a cached index. Format 8 added definitions, which evaluation does not read, so format 7 caches stayed;
# 8: the concepts of a name in TIE_ORDER (canonical names first), which orders exact ties.
CACHE_INDEX_FORMAT = 8


def build_encoder_index(
    encoder,
    concepts: Sequence[Concept],
    cache_dir: Optional[Path] = None,
    vocabulary: Optional[str] = None,
    normalizer: Normalizer = Normalizer(),
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> ConceptIndex:
    """The strict concept index for an encoder, reused from `cache_dir` when the same one was built before.

    The cache folder's name is `index_cache_key` of everything the vectors depend on: the encoder's
    fingerprint (weights and tokenizer), pooling, max_length and batch size (padding moves vectors by
    rounding), the index settings and the content of the concepts and the normalizer (lowercase,
    punctuation, spelling corrections). A cached index is checked against them again when it is read.
    Runs that build the same key at once take turns (a lock file beside it): the later one reads the index
    the first one wrote, and neither removes the chunks the other is writing. `vocabulary`: vocabulary_hash(KnowledgeBase(concepts))
    when the caller has it already. With a cache, encoding goes through a `ChunkStore` beside the cache
    folder (`KEY.chunks`, `chunk_size` names a chunk), so an evaluation killed while encoding a large
    vocabulary resumes from its finished chunks.
    """
    settings = {**encoder_settings(encoder), **normalizer.settings(), "normalize": EVAL_INDEX["normalize"]}
    merged: List[KnowledgeBase] = []

    def knowledge_base() -> KnowledgeBase:
        """The concepts merged by id, once for both the vocabulary hash and the build."""
        if not merged:
            merged.append(KnowledgeBase(concepts))
        return merged[0]

    def build(chunk_dir: Optional[Path] = None) -> ConceptIndex:
        return ConceptIndex.build(
            knowledge_base(), lambda names: encoder.encode(names, progress=chunk_dir is None), encoder=settings,
            normalizer=normalizer, chunk_dir=chunk_dir, chunk_size=chunk_size, progress=True, batch_size=encoder.batch_size,
            **EVAL_INDEX
        )

    if not cache_dir:
        return build()
    vocabulary = vocabulary or vocabulary_hash(knowledge_base())
    path = Path(cache_dir) / index_cache_key({**settings, "batch_size": encoder.batch_size}, vocabulary)
    with key_lock(path):
        if not (path / META_FILE).exists():
            chunks = path.with_name(path.name + CHUNKS_SUFFIX)
            index = build(chunks)
            index.to_disk(path)
            remove_chunks(chunks)
            return index
    index = ConceptIndex.from_disk(path)
    rebuild = f"delete {path} to encode it again"
    check_vector_settings(
        index.settings, settings, what=f"the cached index in {path}", rebuild=rebuild,
        current_source="this run uses", encoder_source="this run's encoder has",
    )
    if index.vocabulary_hash != vocabulary or index.index_type != EVAL_INDEX["index_type"]:
        from ..errors import IndexFormatError

        raise IndexFormatError(
            f"the cached index in {path} was built from the vocabulary {index.vocabulary_hash!r} "
            f"({index.index_type}) but this run's is {vocabulary!r} ({EVAL_INDEX['index_type']}); {rebuild}"
        )
    return index


def key_lock(path: Path):
    """An exclusive lock on `path`'s lock file (PATH.lock, beside it) while inside (`io.held_lock`)."""
    return held_lock(path.with_name(path.name + ".lock"))


@contextlib.contextmanager
def index_cache(cache_dir: Optional[Path]) -> Iterator[Path]:
    """`cache_dir`, or without one a temporary folder for one run, so that no strict index of a run
    (the encoder's, the memory system's, the tuning's) is encoded twice."""
    if cache_dir is not None:
        yield Path(cache_dir)
        return
    with tempfile.TemporaryDirectory(prefix="sapbert-eval-index-") as tmp:
        yield Path(tmp)


def index_cache_key(settings: Mapping, vocabulary: str) -> str:
    """The cache folder name of an index: a hash of its VECTOR_SETTINGS (encoder fingerprint, pooling,
    max_length, the normalizer's settings, normalize) and the encoder's batch size, the index type, the
    vocabulary_hash and the index format."""
    blob = json.dumps([CACHE_INDEX_FORMAT, dict(settings), EVAL_INDEX, vocabulary], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf8")).hexdigest()[:16]
