"""A bounded LRU cache of mention vectors, so a mention string that recurs across `nlp.pipe` batches
and calls (biomedical corpora repeat the same mentions constantly) is encoded once.

Entries are keyed by the normalized mention text; the cache belongs to one encoder and its settings
(fingerprint of weights and tokenizer, pooling, max_length): when those change, it empties itself, so a
vector is never served for another encoder than the one that made it.
"""
from __future__ import annotations

import threading
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
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def __getstate__(self) -> Dict[str, Any]:  # a lock does not pickle (spawned nlp.pipe workers, deepcopy)
        return {key: value for key, value in self.__dict__.items() if key != "_lock"}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

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
        the rest (added to the cache). `encoder`: the settings the vectors depend on (`encoder_settings`).

        Safe for threads that share a pipeline: the cached rows are taken under a lock, so another thread's
        eviction between the look-up and the answer cannot lose one; encoding runs outside the lock."""
        owner = dict(encoder)
        with self._lock:
            if self._owner != owner:
                self.clear()
                self._owner = owner
            cached = {}
            for key in keys:
                row = self._vectors.get(key)
                if row is not None:
                    self._vectors.move_to_end(key)
                    cached[key] = row
            missing = [key for key in keys if key not in cached]
            self.misses += len(missing)
            self.hits += len(cached)
        fresh = encode(missing) if missing else None
        if fresh is not None and len(fresh) == len(keys):
            rows = fresh
        else:
            found = dict(zip(missing, fresh)) if fresh is not None else {}
            rows = numpy.stack([cached[key] if key in cached else found[key] for key in keys]).astype("float32", copy=False)
        if self.size and fresh is not None:
            with self._lock:
                if self._owner == owner:
                    for key, row in zip(missing, fresh):
                        self._vectors[key] = row.copy()  # a copy: not a view that keeps the whole batch alive
                        if len(self._vectors) > self.size:
                            self._vectors.popitem(last=False)
        return rows
