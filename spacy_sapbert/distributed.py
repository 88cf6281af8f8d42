"""Index builds and corpus linking spread over a Ray cluster (`build-index --ray`, `link --ray`).

Both keep the single-process code path and only move the expensive part to Ray workers:
- an index build: the chunks of a `ChunkStore` are encoded by a pool of encoder actors (Ray Data
  `map_batches`); the driver saves each chunk as it arrives, so a build that is killed resumes from the
  finished chunks as before, and the index is assembled from the chunk files exactly as a
  single-process build assembles it;
- corpus linking: batches of documents go to a pool of actors that each hold the loaded pipeline; at
  most a few batches per actor are in flight, and results come back in input order, so the output is
  the single-process output and memory does not grow with the corpus.

Workers load the encoder or pipeline by the name the driver uses, so a model folder or pipeline must
be at the same path on every node (or be a hub name or an installed package). An encoder actor checks
that its weights have the driver's fingerprint, so a node with another copy at that path is an error,
not silently different vectors.
"""
from __future__ import annotations

import re
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping

import numpy

from .errors import SapbertError
from .extras import require

LOCAL = "local"


@dataclass(frozen=True)
class RaySettings:
    """Where and how wide: `address` ('local' starts a cluster on this machine, 'auto' joins the one
    running here, host:port or ray://host:port a remote one), the number of worker actors and the
    CPUs and GPUs each of them reserves."""

    address: str = LOCAL
    workers: int = 2
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise SapbertError(f"--ray-workers={self.workers} must be at least 1")
        if self.cpus_per_worker <= 0 or self.gpus_per_worker < 0:
            raise SapbertError("--ray-cpus must be above 0 and --ray-gpus at least 0")


def connect(settings: RaySettings) -> Any:
    """Start or join the Ray cluster of `settings.address` (once per process); returns the `ray` module."""
    ray = require("ray")
    address = settings.address
    check_address(address)
    if ray.is_initialized():
        return ray
    options: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    try:
        ray.init(**options) if address == LOCAL else ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise SapbertError(f"--ray {address}: could not start or join a Ray cluster there ({err})") from err
    return ray


def check_address(address: str, timeout: float = 5.0) -> None:
    """Refuse, naming --ray, a malformed address or one where nothing listens (ray.init would wait for minutes)."""
    if address in (LOCAL, "auto"):
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise SapbertError(f"--ray {address}: not a Ray address; give local, auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise SapbertError(f"--ray {address}: no Ray cluster reachable at {host}:{port} ({err})") from err


def _worker_options(ray: Any, settings: RaySettings) -> Dict[str, Any]:
    """Resources of one worker actor; a request that the cluster cannot meet is refused up front."""
    resources = ray.cluster_resources()
    for key, wanted, name in (("CPU", settings.cpus_per_worker, "--ray-cpus"), ("GPU", settings.gpus_per_worker, "--ray-gpus")):
        if wanted > resources.get(key, 0):
            raise SapbertError(f"{name}={wanted:g}: the Ray cluster has {resources.get(key, 0):g} {key}s in all")
    return {"num_cpus": settings.cpus_per_worker, "num_gpus": settings.gpus_per_worker}


# index builds ---------------------------------------------------------------------------------------


class ChunkEncoder:
    """A Ray Data actor: one encoder, loaded once, that encodes whole chunks of names.

    It runs torch on `threads` intra-op threads: float32 results can differ in the last bit between
    thread counts, so a build matches a single-process build bit for bit where both use the same count."""

    def __init__(self, model: str, options: Mapping[str, Any], fingerprint: str, threads: int = 1):
        import torch

        from .encoder import Encoder

        torch.set_num_threads(threads)
        self.encoder = Encoder(model, **options)
        if self.encoder.fingerprint != fingerprint:
            raise SapbertError(
                f"the encoder {model!r} on Ray node {socket.gethostname()} has the fingerprint {self.encoder.fingerprint}, "
                f"the driver's has {fingerprint}: give every node the same model (a hub name or a shared folder)"
            )

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        vectors = [self.encoder.encode([str(name) for name in names]) for names in batch["names"]]
        return {"chunk": numpy.asarray(batch["chunk"]), "vectors": numpy.stack(vectors)}


def encode_chunks(store, model: str, options: Mapping[str, Any], fingerprint: str, settings: RaySettings) -> int:
    """Encode the unfinished chunks of `store` (a ChunkStore) on Ray and save each as it arrives;
    returns how many were encoded. Each chunk is one encoder call, as in a single-process build."""
    missing = store.missing()
    if not missing:
        return 0
    ray = connect(settings)
    worker = _worker_options(ray, settings)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    items = [{"chunk": number, "names": list(store.rows(number))} for number in missing]
    dataset = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        ChunkEncoder,
        fn_constructor_args=(model, dict(options), fingerprint, max(1, int(settings.cpus_per_worker))),
        batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=min(settings.workers, len(items))),
        **worker,
    )
    from tqdm import tqdm

    with tqdm(total=sum(len(item["names"]) for item in items), unit="name", desc="encoding names on Ray", unit_scale=True) as bar:
        with worker_errors(ray):
            for row in dataset.iter_rows():
                number = int(row["chunk"])
                store.save(number, numpy.asarray(row["vectors"], dtype="float32"), what="a Ray worker's vectors")
                bar.update(len(store.rows(number)))
    return len(missing)


@contextmanager
def worker_errors(ray: Any) -> Iterator[None]:
    """A failed Ray worker as one SapbertError line: the worker's own error message where it raised one
    of ours (Ray wraps it in a traceback of its own), else the first line of Ray's error."""
    try:
        yield
    except ray.exceptions.RayError as err:
        raise SapbertError(worker_error_message(str(err))) from err


def worker_error_message(text: str) -> str:
    """The message of the last spacy-sapbert error in a Ray error's text, else its first line."""
    ours = re.findall(r"spacy_sapbert\.\w+(?:\.\w+)*\.\w*Error: (.+)", text)
    return ours[-1].strip() if ours else "a Ray worker failed: " + text.strip().splitlines()[0]


# corpus linking -------------------------------------------------------------------------------------


class PipelineWorker:
    """A Ray actor holding a loaded pipeline; links batches of texts to plain data (`doc_to_json`)."""

    def __init__(self, pipeline: str, batch_size: int, threads: int = 1):
        import spacy
        import torch

        from .pipeline import require_linkers

        torch.set_num_threads(threads)
        self.nlp = spacy.load(pipeline)
        self.linkers = [linker for _, linker in require_linkers(self.nlp)]
        self.batch_size = batch_size

    def link(self, texts: List[str]) -> List[dict]:
        from .pipeline import doc_to_json

        return [doc_to_json(doc, self.linkers) for doc in self.nlp.pipe(texts, batch_size=self.batch_size)]


def link_on_ray(
    pipeline: str, texts: Iterable[str], settings: RaySettings, batch_size: int = 64, in_flight_per_worker: int = 2
) -> Iterator[dict]:
    """`doc_to_json` of every text, in input order, linked by `settings.workers` pipeline actors.

    Reads `texts` lazily: at most `in_flight_per_worker` batches per actor are sent ahead of the output."""
    ray = connect(settings)
    actor = ray.remote(**_worker_options(ray, settings))(PipelineWorker)
    pool = ray.util.ActorPool([actor.remote(str(pipeline), batch_size, max(1, int(settings.cpus_per_worker))) for _ in range(settings.workers)])
    with worker_errors(ray):
        yield from ordered_map(pool, _batches(texts, batch_size), settings.workers * in_flight_per_worker)


def ordered_map(pool, batches: Iterable[List[str]], window: int) -> Iterator[dict]:
    """Results of `pool` over `batches` in order, with at most `window` batches submitted and unread."""
    pending = 0
    for batch in batches:
        if pending == window:
            yield from pool.get_next()
            pending -= 1
        pool.submit(lambda worker, texts: worker.link.remote(texts), batch)
        pending += 1
    while pending:
        yield from pool.get_next()
        pending -= 1


def _batches(items: Iterable[str], size: int) -> Iterator[List[str]]:
    batch: List[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
