"""What a resumable, chunked index build costs beside the one-call build, in one run.

    python benchmarks/bench_chunked_build.py --dir /tmp/bench-chunks [--synthetic-names 1000000] [--dims 384 768]
        [--medic-names 20000] [--chunk-size 10000]

1. Memory and the cost of writing chunks, without an encoder: `ConceptIndex.build` over N synthetic
   concepts (one name each) with an `encode` that returns seeded random float32 vectors at no cost,
   one call beside `chunk_dir` (chunks saved to DIR). Each build runs in its own subprocess; peak
   resident memory is that process's VmHWM minus its VmRSS before the build.
2. With the real encoder: the first --medic-names MEDIC names encoded by the offline MiniLM through
   `build-index`'s path (`build_pipeline`), one call beside chunked, names/s of each.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from spacy_sapbert.chunk_store import remove_chunks  # noqa: E402

MEDIC = str(REPO.parent / "shared" / "data" / "medic" / "medic_06Jul2012.txt")

SYNTHETIC = """
import json, sys, time
import numpy
from spacy_sapbert.index import ConceptIndex
from spacy_sapbert.kb import Concept

def status(key):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key)) / 1024

n, dim, chunk_dir, chunk_size = {n}, {dim}, {chunk_dir!r}, {chunk_size}
concepts = [Concept(f"C{{i:08d}}", f"name {{i}}") for i in range(n)]

def encode(texts):
    rng = numpy.random.default_rng(len(texts) + int(texts[0].split()[1]))
    return rng.standard_normal((len(texts), dim), dtype="float32")

settings = {{"encoder_fingerprint": "synthetic", "backend": "torch", "pooling": "mean", "max_length": 25}}
before = status("VmRSS:")
start = time.perf_counter()
index = ConceptIndex.build(concepts, encode, encoder=settings, chunk_dir=chunk_dir, chunk_size=chunk_size)
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "peak_mb": status("VmHWM:") - before, "names": index.vectors.ntotal}}))
"""

REAL = """
import json, time
from spacy_sapbert.encoder import offline_default_model
from spacy_sapbert.pipeline import build_pipeline
from spacy_sapbert.readers import read_vocabulary

concepts, names = [], 0
for concept in read_vocabulary({medic!r}, "medic"):
    concepts.append(concept)
    names += len(concept.names)
    if names >= {limit}:
        break
start = time.perf_counter()
nlp = build_pipeline(concepts, offline_default_model(), label=None, linker_config={{"pooling": "mean"}},
                     chunk_dir={chunk_dir!r}, chunk_size={chunk_size})
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "names": len(nlp.get_pipe("sapbert_linker").index.names)}}))
"""


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.glob("*")) / 2**20 if folder.exists() else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="Where this run makes its own scratch folder for the chunks (deleted at the end).")
    parser.add_argument("--synthetic-names", type=int, default=1_000_000, help="0: skip the synthetic part")
    parser.add_argument("--dims", type=int, nargs="+", default=[384, 768])
    parser.add_argument("--medic-names", type=int, default=20000, help="0: skip the real-encoder part")
    parser.add_argument("--chunk-size", type=int, default=10000)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    # everything this run writes goes into a folder it creates, so deleting it never touches other files in --dir
    with tempfile.TemporaryDirectory(prefix="bench-chunked-build-", dir=args.dir) as work:
        run_all(args, Path(work))


def run_all(args: argparse.Namespace, work: Path) -> None:

    if args.synthetic_names:
        print(f"1. ConceptIndex.build, {args.synthetic_names:,} synthetic names, free encoder, flat index, chunk_size {args.chunk_size:,}\n")
        print("| dim | build | seconds | peak resident MB above start | chunk files MB |")
        print("|---|---|---|---|---|")
    for dim in args.dims if args.synthetic_names else []:
        for label, chunk_dir in (("one call", None), ("chunked", str(work / f"synthetic-{dim}"))):
            report = run(SYNTHETIC.format(n=args.synthetic_names, dim=dim, chunk_dir=chunk_dir, chunk_size=args.chunk_size))
            size = disk_mb(Path(chunk_dir)) if chunk_dir else 0.0
            print(f"| {dim} | {label} | {report['seconds']:.1f} | {report['peak_mb']:,.0f} | {size:,.0f} |", flush=True)
            if chunk_dir:
                remove_chunks(chunk_dir)

    if args.medic_names:
        print(f"\n2. build_pipeline with the offline MiniLM, first {args.medic_names:,} MEDIC names\n")
        print("| build | seconds | names | names/s |")
        print("|---|---|---|---|")
        for label, chunk_dir in (("one call", None), ("chunked", str(work / "medic"))):
            report = run(REAL.format(medic=MEDIC, limit=args.medic_names, chunk_dir=chunk_dir, chunk_size=args.chunk_size))
            print(f"| {label} | {report['seconds']:.1f} | {report['names']:,} | {report['names'] / report['seconds']:.0f} |", flush=True)
            if chunk_dir:
                remove_chunks(chunk_dir)


if __name__ == "__main__":
    main()
