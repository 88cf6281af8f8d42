"""The faiss index types behind a ConceptIndex, and how each is made, trained and filled.

- `flat`: exact inner product over float32 vectors (4 bytes a dimension).
- `hnsw`: an HNSW graph over float32 vectors, approximate, for fast search at large sizes.
- `fp16`, `sq8`: exact scans over scalar-quantized codes (2 or 1 byte a dimension); `sq8` learns each
  dimension's range from a sample.
- `ivfpq`: an inverted file of product-quantized codes (dim / 8 bytes a name at most): `nprobe` of its
  lists are scanned, and a shortlist of the best codes is re-scored exactly against float16 copies of
  the vectors (saved beside the index and memory-mapped at load), so recall stays near exact.
- `ivfopq`: `ivfpq` behind an OPQ rotation learnt from the sample, which spreads the variance evenly over
  the sub-quantizers (better codes for the same bytes, a longer training).
- `auto` (a config value, never recorded): `flat` below AUTO_IVFPQ_NAMES names, `ivfpq` from there.

Quantizers are trained on a seeded sample of at most TRAIN_SAMPLE vectors.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Optional, Tuple

import faiss
import numpy

from .errors import IndexFormatError

INDEX_TYPES = ("flat", "hnsw", "fp16", "sq8", "ivfpq", "ivfopq")
CONFIG_INDEX_TYPES = INDEX_TYPES + ("auto",)
TRAINED = ("sq8", "ivfpq", "ivfopq")  # index types whose quantizers learn from a sample of the vectors
RERANKED = ("ivfpq", "ivfopq")  # index types that keep float16 vectors for an exact re-scoring of their shortlist
AUTO_IVFPQ_NAMES = 1_000_000
TRAIN_SAMPLE = 200_000
TRAIN_SEED = 0
DEFAULT_NPROBE = 64
DEFAULT_SHORTLIST = 400  # 100 kept recall@1 at 0.948 at 10M names with ~139 near-copies a name (BENCHMARKS.md, issue 14)
OPQ_MIN_NAMES = 256  # faiss trains the OPQ rotation with 8-bit product codes: 256 centroids per sub-vector

Blocks = Callable[[], Iterable[numpy.ndarray]]


def choose_index_type(index_type: str, n_names: int) -> str:
    """The concrete index type for `n_names` names (resolves `auto`)."""
    if index_type == "auto":
        return "ivfpq" if n_names >= AUTO_IVFPQ_NAMES else "flat"
    if index_type not in INDEX_TYPES:
        raise IndexFormatError(f"index_type={index_type!r} is not supported; choose one of {list(CONFIG_INDEX_TYPES)}")
    return index_type


def ivfpq_layout(dim: int, n_names: int) -> Tuple[int, int, int]:
    """(lists, sub-quantizers, bits per code) of an IVF-PQ index: about 4 sqrt(n) lists with at least 39
    training vectors each, sub-vectors of 8 dimensions or more (the largest divisor of `dim` up to dim / 8),
    and 8-bit codes unless the vocabulary has fewer than 256 names to train them on."""
    lists = max(1, min(int(4 * math.sqrt(n_names)), n_names // 39))
    subquantizers = max(m for m in range(1, max(1, dim // 8) + 1) if dim % m == 0)
    bits = max(1, min(8, int(math.log2(max(2, n_names)))))
    return lists, subquantizers, bits


def make_faiss_index(dim: int, index_type: str = "flat", n_names: int = 0) -> faiss.Index:
    """An empty inner-product faiss index of a concrete type (`n_names` sizes an `ivfpq` index)."""
    if index_type == "flat":
        return faiss.IndexFlatIP(dim)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = 128
        return index
    if index_type in ("fp16", "sq8"):
        kind = faiss.ScalarQuantizer.QT_fp16 if index_type == "fp16" else faiss.ScalarQuantizer.QT_8bit
        return faiss.IndexScalarQuantizer(dim, kind, faiss.METRIC_INNER_PRODUCT)
    if index_type == "ivfpq":
        if n_names < 2:  # faiss's raw error: 1 training point for the codes' 2 clusters
            raise IndexFormatError(f"index_type=ivfpq needs at least 2 names to learn its codes, the vocabulary has {n_names}; choose flat")
        lists, subquantizers, bits = ivfpq_layout(dim, n_names)
        return faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, lists, subquantizers, bits, faiss.METRIC_INNER_PRODUCT)
    if index_type == "ivfopq":  # the factory owns the rotation, the coarse quantizer and the IVF-PQ it chains
        if n_names < OPQ_MIN_NAMES:
            raise IndexFormatError(
                f"index_type=ivfopq needs at least {OPQ_MIN_NAMES} names to learn its rotation (8-bit codes), the "
                f"vocabulary has {n_names}; choose flat or ivfpq"
            )
        lists, subquantizers, bits = ivfpq_layout(dim, n_names)
        return faiss.index_factory(dim, f"OPQ{subquantizers},IVF{lists},PQ{subquantizers}x{bits}", faiss.METRIC_INNER_PRODUCT)
    raise IndexFormatError(f"index_type={index_type!r} is not supported; choose one of {list(INDEX_TYPES)}")


def training_sample(blocks: Iterable[numpy.ndarray], n_rows: int, size: int = TRAIN_SAMPLE, seed: int = TRAIN_SEED) -> numpy.ndarray:
    """A seeded sample of at most `size` rows of the vectors given block by block, in row order."""
    chosen = numpy.sort(numpy.random.default_rng(seed).choice(n_rows, size=min(size, n_rows), replace=False))
    parts, start = [], 0
    for block in blocks:
        stop = start + len(block)
        lo, hi = numpy.searchsorted(chosen, [start, stop])
        parts.append(block[chosen[lo:hi] - start])
        start = stop
    return numpy.ascontiguousarray(numpy.concatenate(parts), dtype="float32")


def fill_index(
    blocks: Blocks, n_rows: int, index_type: str, rows: Callable[[numpy.ndarray], numpy.ndarray],
    rerank_file: Optional[str] = None,
) -> Tuple[faiss.Index, Optional[numpy.ndarray]]:
    """A faiss index of `index_type` over the vectors of `blocks()` (called twice for trained types),
    each block passed through `rows` (unit length, float32) first, and the float16 re-scoring vectors of a
    RERANKED type: in memory, or written to `rerank_file` (a .npy, memory-mapped; a new file: ChunkStore.new_rerank_file)
    for large builds."""
    faiss_index = rerank = None
    if index_type in TRAINED:
        sample = rows(training_sample(blocks(), n_rows))
        faiss_index = make_faiss_index(sample.shape[1], index_type, n_rows)
        faiss_index.train(sample)
    start = 0
    for block in blocks():
        vectors = rows(block)
        if faiss_index is None:
            faiss_index = make_faiss_index(vectors.shape[1], index_type, n_rows)
        faiss_index.add(vectors)
        if index_type in RERANKED:
            if rerank is None:
                shape = (n_rows, vectors.shape[1])
                rerank = (numpy.lib.format.open_memmap(rerank_file, mode="w+", dtype="float16", shape=shape)
                          if rerank_file else numpy.empty(shape, dtype="float16"))
            rerank[start : start + len(vectors)] = vectors
        start += len(vectors)
    if faiss_index is None:
        raise IndexFormatError("the vocabulary gave no names to index; check the vocabulary file and its format")
    if isinstance(rerank, numpy.memmap):
        rerank.flush()
    return faiss_index, rerank


def inverted_lists(faiss_index: faiss.Index) -> int:
    """The number of lists of an inverted-file index; 0 for other types."""
    try:
        return int(faiss.extract_index_ivf(faiss_index).nlist)
    except RuntimeError:  # not an IVF index
        return 0


def set_search_params(faiss_index: faiss.Index, nprobe: int) -> None:
    """Scan `nprobe` lists of an inverted-file index (no effect on other types)."""
    try:
        faiss.extract_index_ivf(faiss_index).nprobe = nprobe
    except RuntimeError:  # not an IVF index
        pass


def rescored(queries: numpy.ndarray, rows: numpy.ndarray, rerank: numpy.ndarray, depth: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """The `depth` best of each query's shortlist `rows` by exact inner product with the float16 vectors
    `rerank` (rows of -1, faiss's padding, score -inf and come last)."""
    valid = rows >= 0
    vectors = rerank[numpy.where(valid, rows, 0).ravel()].astype("float32").reshape(*rows.shape, -1)
    scores = numpy.einsum("qnd,qd->qn", vectors, queries)
    scores[~valid] = -numpy.inf
    order = numpy.argsort(-scores, axis=1, kind="stable")[:, :depth]
    return numpy.take_along_axis(scores, order, axis=1), numpy.take_along_axis(rows, order, axis=1)
