"""The index build's encoding on Ray beside the single-process build, on the same chunks, in one run.

    python benchmarks/bench_ray.py [--model MODEL] [--pooling mean] [--names 20000] [--chunk-size 2000]
        [--workers 2] [--dir /tmp/bench-ray]

The first --names distinct MEDIC names (normalized as `build-index` does) are cut into the same chunks
three times and encoded:
1. single process, torch on every core (what `build-index` does without --ray);
2. single process on 1 thread (the thread count of a 1-CPU Ray worker, the bit-for-bit reference);
3. `distributed.encode_chunks` on a local Ray cluster of --workers actors with 1 CPU each (the
   path of `build-index --ray local`), cluster start-up timed apart from the encoding.
It prints names/s of each, whether the Ray chunks equal the 1-thread chunks bit for bit, the largest
difference from the all-core chunks, and a projection of a full UMLS build (10M names) from the rates.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from spacy_sapbert.chunk_store import ChunkStore  # noqa: E402
from spacy_sapbert.distributed import RaySettings, encode_chunks  # noqa: E402
from spacy_sapbert.encoder import Encoder, offline_default_model  # noqa: E402
from spacy_sapbert.extras import require  # noqa: E402
from spacy_sapbert.index import encoder_settings, name_table  # noqa: E402
from spacy_sapbert.kb import KnowledgeBase  # noqa: E402
from spacy_sapbert.normalizer import Normalizer  # noqa: E402
from spacy_sapbert.readers import read_vocabulary  # noqa: E402

MEDIC = REPO.parent / "shared" / "data" / "medic" / "medic_06Jul2012.txt"
UMLS_NAMES = 10_000_000


def timed_store(folder: Path, names, settings, chunk_size: int, fill) -> tuple:
    """Seconds to fill a new chunk store in `folder` (a path not yet there) with `fill(store)`, and its vectors in order."""
    store = ChunkStore(folder, names, settings, chunk_size)
    started = time.perf_counter()
    fill(store)
    seconds = time.perf_counter() - started
    return seconds, numpy.concatenate(list(store.vectors(lambda rows: None)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the offline all-MiniLM-L6-v2")
    parser.add_argument("--pooling", default="mean")
    parser.add_argument("--names", type=int, default=20000)
    parser.add_argument("--chunk-size", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-ray"), help="The chunk stores go into a temporary folder made here and removed at the end.")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-ray-", dir=args.dir) as work:
        run(args, Path(work))


def run(args: argparse.Namespace, work: Path) -> None:
    import torch

    ray = require("ray")

    model = args.model or offline_default_model()
    options = {"pooling": args.pooling, "max_length": 25, "batch_size": 128, "device": "cpu", "backend": "torch"}
    names = list(name_table(list(KnowledgeBase(read_vocabulary(str(MEDIC), "medic"))), Normalizer())[0])[: args.names]
    encoder = Encoder(model, **options)
    settings = encoder_settings(encoder)
    cores = os.cpu_count()
    print(f"{len(names)} MEDIC names, chunks of {args.chunk_size}, model {model}, {cores} cores, torch {torch.__version__}, ray {ray.__version__}")

    rows = []
    torch.set_num_threads(cores)
    seconds, all_cores = timed_store(work / "single", names, settings, args.chunk_size, lambda s: s.encode_missing(encoder.encode))
    rows.append((f"single process, {cores} threads", seconds))
    torch.set_num_threads(1)
    seconds, one_thread = timed_store(work / "single-1", names, settings, args.chunk_size, lambda s: s.encode_missing(encoder.encode))
    rows.append(("single process, 1 thread", seconds))
    torch.set_num_threads(cores)

    started = time.perf_counter()
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, configure_logging=False)
    startup = time.perf_counter() - started
    ray_settings = RaySettings(workers=args.workers, cpus_per_worker=1)
    seconds, on_ray = timed_store(
        work / "ray", names, settings, args.chunk_size,
        lambda s: encode_chunks(s, model, options, encoder.fingerprint, ray_settings),
    )
    rows.append((f"Ray, {args.workers} actors x 1 CPU (actor start included; cluster start {startup:.1f} s apart)", seconds))
    ray.shutdown()

    print("| encoding | seconds | names/s |")
    print("|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.1f} | {len(names) / seconds:.0f} |")
    print(f"Ray chunks equal to the 1-thread chunks bit for bit: {bool((on_ray == one_thread).all())}")
    print(f"largest |difference| Ray - {cores}-thread chunks: {float(abs(on_ray - all_cores).max()):.2e}")
    single_rate, ray_rate = len(names) / rows[0][1], len(names) / rows[2][1]
    print(f"projection, {UMLS_NAMES:,} names with this model: single process {UMLS_NAMES / single_rate / 3600:.1f} h; "
          f"Ray on these {cores} cores {UMLS_NAMES / ray_rate / 3600:.1f} h; "
          f"N such Ray nodes {UMLS_NAMES / ray_rate / 3600:.1f}/N h if the rate scales with nodes")


if __name__ == "__main__":
    main()
