"""Prepare the next micro-batch (read its pairs, tokenize, pad) in a worker thread while the current one trains.

On CUDA a SAP step is bound by the host: the H100 was busy a median 26% of a MiniLM epoch (BENCHMARKS.md,
"SAP on a GPU"), and tokenizing and padding 512 names takes tens of milliseconds of a step of about 70. The
worker overlaps that with the GPU's work; the tokenizer's Rust half runs without the GIL. The batches are the
same either way, so the weights are too.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, Hashable, Optional, Tuple, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Prefetcher(Generic[K, V]):
    """`get(key, next_key)` returns `prepare(key)` and, with `ahead`, starts `prepare(next_key)` in one worker
    thread, so that the next `get` finds it ready. Without `ahead` (or when the keys do not follow the
    prediction) `prepare` runs in the caller's thread. An exception in the worker is raised by the `get`
    that takes its result."""

    def __init__(self, prepare: Callable[[K], V], ahead: bool):
        self.prepare = prepare
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch") if ahead else None
        self.pending: Optional[Tuple[K, Future]] = None

    def get(self, key: K, next_key: Optional[K]) -> V:
        if self.pending is not None and self.pending[0] == key:
            value = self.pending[1].result()
            self.pending = None
        else:
            self.wait()
            self.pending = None
            value = self.prepare(key)
        if self.pool is not None and next_key is not None:
            self.pending = (next_key, self.pool.submit(self.prepare, next_key))
        return value

    def wait(self) -> None:
        """Let a started preparation finish (it may use the tokenizer, which must not be saved meanwhile);
        its result stays for the `get` that asks for it, its exception too."""
        if self.pending is not None:
            self.pending[1].exception()

    def close(self) -> None:
        self.wait()
        self.pending = None
        if self.pool is not None:
            self.pool.shutdown(wait=True)
