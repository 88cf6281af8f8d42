"""Inference speed of Encoder.encode, an older checkout beside this one, in one run.

The first `--names` distinct names of a vocabulary (MEDIC by default) are encoded by the offline
all-MiniLM-L6-v2 (mean pooling) with `Encoder.encode` of each checkout. Each checkout runs in its own
subprocess (PYTHONPATH=<checkout>), the two alternating `--rounds` times so that both see the same
machine load. Prints names/s (median and best) of each and the largest difference between their vectors.

Usage: python benchmarks/bench_encode.py --old-src /tmp/base [--vocab medic_06Jul2012.txt] [--names 20000]
(make the old checkout with `git worktree add --detach /tmp/base <commit>`)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VOCAB = ROOT.parent / "shared" / "data" / "medic" / "medic_06Jul2012.txt"


def distinct_names(path: str, limit: int) -> List[str]:
    """The first `limit` distinct names (canonical names and synonyms) of a MEDIC vocabulary file."""
    from spacy_sapbert.readers import read_vocabulary

    names: Dict[str, None] = {}
    for concept in read_vocabulary(path, "medic"):
        for name in [concept.name, *concept.synonyms]:
            names[name] = None
            if len(names) == limit:
                return list(names)
    return list(names)


def worker(names_file: str, vectors_file: str, threads: int, batch_size: int) -> None:
    """Encode the names once to warm up, then once timed; print the seconds as JSON, save the vectors."""
    import numpy
    import torch

    from spacy_sapbert.encoder import Encoder, offline_default_model

    torch.set_num_threads(threads)
    names = json.loads(Path(names_file).read_text(encoding="utf8"))
    encoder = Encoder(offline_default_model(), pooling="mean", device="cpu", batch_size=batch_size)
    encoder.encode(names[:1024])
    start = time.perf_counter()
    vectors = encoder.encode(names)
    seconds = time.perf_counter() - start
    numpy.save(vectors_file, vectors)
    print(json.dumps({"seconds": seconds}))


def run_worker(src: str, names_file: str, vectors_file: str, args: argparse.Namespace) -> float:
    """Seconds to encode all names with the checkout at `src`, in a fresh subprocess."""
    env = dict(os.environ, PYTHONPATH=src)
    command = [sys.executable, __file__, "--worker", names_file, vectors_file, "--threads", str(args.threads),
               "--batch-size", str(args.batch_size)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old-src", help="folder of the older checkout (its spacy_sapbert is imported)")
    parser.add_argument("--new-src", default=str(ROOT))
    parser.add_argument("--vocab", default=str(DEFAULT_VOCAB))
    parser.add_argument("--names", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--worker", nargs=2, metavar=("NAMES_JSON", "VECTORS_NPY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, threads=args.threads, batch_size=args.batch_size)
        return
    if not args.old_src:
        parser.error("--old-src is required")
    import numpy

    names = distinct_names(args.vocab, args.names)
    with tempfile.TemporaryDirectory() as tmp:
        names_file = str(Path(tmp) / "names.json")
        Path(names_file).write_text(json.dumps(names), encoding="utf8")
        sources = {"old": args.old_src, "new": args.new_src}
        seconds: Dict[str, List[float]] = {label: [] for label in sources}
        for _ in range(args.rounds):
            for label, src in sources.items():
                seconds[label].append(run_worker(src, names_file, str(Path(tmp) / f"{label}.npy"), args))
        old, new = (numpy.load(Path(tmp) / f"{label}.npy") for label in sources)
    print(f"{len(names)} MEDIC names, all-MiniLM-L6-v2 (mean pooling), batch {args.batch_size}, "
          f"{args.threads} threads, {args.rounds} rounds each (alternating)")
    print("| Encoder.encode | names/s (median) | names/s (best) |")
    print("|---|---|---|")
    for label, src in sources.items():
        values = seconds[label]
        print(f"| {label} ({src}) | {len(names) / statistics.median(values):.0f} | {len(names) / min(values):.0f} |")
    print(f"largest |old - new| over all vectors: {float(numpy.abs(old - new).max()):.3g}")


if __name__ == "__main__":
    main()
