"""A bounded LRU cache of mention vectors, so a mention string that recurs across `nlp.pipe` batches
and calls (biomedical corpora repeat the same mentions constantly) is encoded once.

Entries are keyed by the normalized mention text; the cache belongs to one encoder and its settings
(fingerprint of weights and tokenizer, pooling, max_length): when those change, it empties itself, so a
vector is never served for another encoder than the one that made it.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

import numpy

__all__ = ["VectorCache"]


class VectorCache:
    """At most `size` vectors (0: no caching), least recently used evicted first; hits and misses counted."""

    def __init__(self, size: int):
        if size < 0:
            raise ValueError(f"vector_cache_size={size} must be >= 0")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._vectors: "OrderedDict[str, numpy.ndarray]" = OrderedDict()
        self._owner: Optional[Dict[str, Any]] = None

    def __len__(self) -> int:
        return len(self._vectors)

    def clear(self) -> None:
        """Drop every vector (the counters are kept)."""
        self._vectors.clear()
        self._owner = None

    def info(self) -> Dict[str, int]:
        """hits, misses, entries and size, like functools' cache_info."""
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._vectors), "size": self.size}

    def vectors(
        self, keys: Sequence[str], encoder: Mapping[str, Any], encode: Callable[[Sequence[str]], numpy.ndarray]
    ) -> numpy.ndarray:
        """float32 (len(keys), dim) vectors of distinct `keys`: cached rows, and `encode(missing keys)` for
        the rest (added to the cache). `encoder`: the settings the vectors depend on (`encoder_settings`)."""
        if self._owner != dict(encoder):
            self.clear()
            self._owner = dict(encoder)
        missing = [key for key in keys if key not in self._vectors]
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        fresh = encode(missing) if missing else None
        found = {key: row for key, row in zip(missing, fresh)} if fresh is not None else {}
        rows = []
        for key in keys:
            row = found.get(key)
            if row is None:
                row = self._vectors[key]
                self._vectors.move_to_end(key)
            rows.append(row)
        if self.size:
            for key, row in found.items():
                self._vectors[key] = row.copy()  # a copy: not a view that keeps the whole batch alive
                if len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        if fresh is not None and len(fresh) == len(keys):
            return fresh
        return numpy.stack(rows).astype("float32", copy=False)
