"""Index types side by side at a million names and more: memory, disk, build, load, speed and recall.

    python benchmarks/bench_index_types.py --base-index INDEX_DIR --dir /tmp/bench-types [--names 1000000]
        [--queries 2000] [--types flat fp16 sq8 ivfpq ivfopq hnsw] [--nprobe 16 64] [--shortlist 100 400] [--warm-up]

Vectors with the structure of real name embeddings: the base set is the vectors of a saved concept
index (e.g. MEDIC encoded by an offline encoder: the `index` folder of a `build-index` pipeline, or an
`evaluate --cache-dir` entry). The i-th synthetic name is base vector (i mod B) plus Gaussian noise
of norm --noise (0.5: cosine about 0.89 with its base vector, about the similarity of a real name and its
nearest other name), then scaled to unit length; queries are further noisy copies of random base
vectors, not in the index. The synthetic vectors are made 100,000 at a time whenever they are read
(seeded, rounded to float16), so 10M x 768 never sits in memory or on disk; the exact ground truth
(top-10 by inner product) is a brute-force pass over those blocks. Everything the run writes (chunks,
indexes) goes into a temporary folder it creates inside DIR and deletes at the end: a 10M x 768
ivfpq build needs about 46 GB there (float32 chunks and float16 re-scoring vectors).

Each type is built by `ConceptIndex.build` (chunked, one concept per name) and saved; then a fresh
process loads it and reports resident memory added by the load (codes, name and concept tables;
memory-mapped pages count once touched), the same after the searches and the private (anonymous,
not file-backed) part of it, load time, queries per second (batches of 256, concept-level top-10 search) and recall@1/@10 against
the exact ground truth. `ivfpq` and `ivfopq` are measured at every --nprobe and --shortlist. Without
--warm-up the first measured run of a type reads the index from disk (cold page cache).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Tuple

import numpy

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHUNK = 100_000

LOAD_AND_SEARCH = """
import json, sys, time
import numpy
from spacy_sapbert.index import ConceptIndex

def rss_mb(field="VmRSS"):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field + ":")) / 1024

folder, queries_path, truth_path, nprobe, shortlist = sys.argv[1:6]
queries = numpy.load(queries_path)
truth = numpy.load(truth_path)
before, before_anon = rss_mb(), rss_mb("RssAnon")
start = time.perf_counter()
index = ConceptIndex.from_disk(folder)
load_s = time.perf_counter() - start
loaded_mb = rss_mb() - before
index.set_search_params(int(nprobe), int(shortlist))
hits = []
start = time.perf_counter()
for first in range(0, len(queries), 256):
    hits.extend(index.search(queries[first : first + 256], 10))
search_s = time.perf_counter() - start
rows = [[int(cid[1:]) for cid, _ in h] for h in hits]
recall1 = numpy.mean([bool(r) and r[0] == t[0] for r, t in zip(rows, truth.tolist())])
recall10 = numpy.mean([len(set(r) & set(t)) / 10 for r, t in zip(rows, truth.tolist())])
print(json.dumps({"load_s": load_s, "loaded_mb": loaded_mb, "after_search_mb": rss_mb() - before, "private_mb": rss_mb("RssAnon") - before_anon,
                  "qps": len(queries) / search_s, "recall1": recall1, "recall10": recall10}))
"""


def base_vectors(index_dir: Path) -> numpy.ndarray:
    import faiss

    index = faiss.read_index(str(index_dir / "vectors.faiss"))
    vectors = index.reconstruct_n(0, index.ntotal)
    faiss.normalize_L2(vectors)
    return vectors


def noisy_copies(base: numpy.ndarray, rows: numpy.ndarray, noise: float, seed: int) -> numpy.ndarray:
    """Unit vectors: base[rows] plus Gaussian noise of norm about `noise`."""
    rng = numpy.random.default_rng(seed)
    vectors = base[rows] + rng.standard_normal((len(rows), base.shape[1]), dtype="float32") * (noise / numpy.sqrt(base.shape[1]))
    return vectors / numpy.linalg.norm(vectors, axis=1, keepdims=True)


class SyntheticNames:
    """The n synthetic name vectors, made CHUNK rows at a time when asked for, so 10M x 768 never sits in
    memory or on disk: block k is the noisy copies of its base rows with noise seeded by its first row,
    rounded to float16 (the set earlier runs of this script wrote to a float16 file, row for row)."""

    def __init__(self, base: numpy.ndarray, n: int, noise: float):
        self.base, self.n, self.noise = base, n, noise

    def __len__(self) -> int:
        return self.n

    def block(self, first: int) -> numpy.ndarray:
        """Rows first .. first + CHUNK (fewer at the end) as float32; `first` is a multiple of CHUNK."""
        if first % CHUNK:
            raise ValueError(f"blocks start at multiples of {CHUNK}, not {first}")
        rows = numpy.arange(first, min(self.n, first + CHUNK)) % len(self.base)
        return noisy_copies(self.base, rows, self.noise, seed=first).astype("float16").astype("float32")

    def blocks(self) -> Iterator[Tuple[int, numpy.ndarray]]:
        for first in range(0, self.n, CHUNK):
            yield first, self.block(first)


def exact_top10(vectors: SyntheticNames, queries: numpy.ndarray) -> numpy.ndarray:
    """Row numbers of the 10 best inner products of each query, by a pass over the blocks of `vectors`."""
    best_scores = numpy.full((len(queries), 10), -numpy.inf, dtype="float32")
    best_rows = numpy.zeros((len(queries), 10), dtype="int64")
    for first, block in vectors.blocks():
        scores = queries @ block.T
        rows = numpy.broadcast_to(numpy.arange(first, first + len(block)), scores.shape)
        keep = min(10, scores.shape[1])
        top = numpy.argpartition(-scores, keep - 1, axis=1)[:, :keep]  # this block's best, unordered
        scores = numpy.concatenate([best_scores, numpy.take_along_axis(scores, top, axis=1)], axis=1)
        rows = numpy.concatenate([best_rows, numpy.take_along_axis(rows, top, axis=1)], axis=1)
        order = numpy.argsort(-scores, axis=1, kind="stable")[:, :10]
        best_scores = numpy.take_along_axis(scores, order, axis=1)
        best_rows = numpy.take_along_axis(rows, order, axis=1)
    return best_rows


def build(index_type: str, vectors: SyntheticNames, folder: Path, scratch: Path) -> float:
    from spacy_sapbert.chunk_store import remove_chunks
    from spacy_sapbert.index import ConceptIndex
    from spacy_sapbert.kb import Concept

    concepts = [Concept(f"C{i}", f"n{i}") for i in range(len(vectors))]

    def encode(names):  # the build asks for chunks of CHUNK names, in row order
        first = int(names[0][1:])
        block = vectors.block(first)
        if len(block) != len(names) or int(names[-1][1:]) != first + len(names) - 1:
            raise ValueError("the build asked for names out of row order")
        return block

    settings = {"encoder_fingerprint": "synthetic", "backend": "torch", "pooling": "mean", "max_length": 25}
    start = time.perf_counter()
    index = ConceptIndex.build(concepts, encode, encoder=settings, index_type=index_type, chunk_dir=scratch, chunk_size=CHUNK)
    index.to_disk(folder)
    seconds = time.perf_counter() - start
    remove_chunks(scratch)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-index", type=Path, required=True, help="A saved concept index whose vectors are the base set.")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--types", nargs="+", default=["flat", "fp16", "sq8", "ivfpq", "hnsw"])
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--shortlist", type=int, nargs="+", default=[100])
    parser.add_argument("--warm-up", action="store_true", help="Load and search each index once, unrecorded, before the measured runs (warm page cache).")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    # the run's files (queries, truth, chunks, indexes) go into a folder it creates and deletes at the end
    with tempfile.TemporaryDirectory(prefix="bench-index-types-", dir=args.dir) as work:
        run_all(args, Path(work))


def run_all(args: argparse.Namespace, work: Path) -> None:
    base = base_vectors(args.base_index)
    dim = base.shape[1]
    vectors = SyntheticNames(base, args.names, args.noise)
    queries = noisy_copies(base, numpy.random.default_rng(1).integers(0, len(base), args.queries), args.noise, seed=10**9)
    queries = queries.astype("float32")
    start = time.perf_counter()
    truth = exact_top10(vectors, queries)
    print(f"{args.names:,} names x {dim} from {len(base):,} base vectors of {args.base_index}; {args.queries:,} queries; "
          f"exact ground truth in {time.perf_counter() - start:.0f} s", flush=True)
    numpy.save(work / "queries.npy", queries)
    numpy.save(work / "truth.npy", truth)

    print("\n| type | build s | disk bytes/name | resident bytes/name after load | after search | of which private | load s | queries/s | recall@1 | recall@10 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for index_type in args.types:
        # each index in a folder of its own, made and removed here (frees its disk before the next type)
        with tempfile.TemporaryDirectory(prefix=f"index-{index_type}-", dir=work) as scratch:
            measure_type(args, index_type, vectors, Path(scratch), work)


def measure_type(args: argparse.Namespace, index_type: str, vectors: SyntheticNames, scratch: Path, work: Path) -> None:
    """Build, save, load and search one index type in `scratch`, printing its table rows."""
    folder = scratch / "index"
    seconds = build(index_type, vectors, folder, scratch / "chunks")
    disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    from spacy_sapbert.index_types import RERANKED

    settings = [(n, k) for n in args.nprobe for k in args.shortlist] if index_type in RERANKED else [(args.nprobe[0], args.shortlist[0])]
    if args.warm_up:
        load_and_search(folder, work, *settings[0])  # unrecorded: reads the index into the page cache
    for nprobe, shortlist in settings:
        r = load_and_search(folder, work, nprobe, shortlist)
        label = f"{index_type} (nprobe {nprobe}, shortlist {shortlist})" if index_type in RERANKED else index_type
        mb = 2**20 / args.names
        print(f"| {label} | {seconds:.0f} | {disk / args.names:.0f} | {r['loaded_mb'] * mb:.0f} | {r['after_search_mb'] * mb:.0f} | {r['private_mb'] * mb:.0f} | "
              f"{r['load_s']:.2f} | {r['qps']:.0f} | {r['recall1']:.3f} | {r['recall10']:.3f} |", flush=True)


def load_and_search(folder: Path, work: Path, nprobe: int, shortlist: int) -> dict:
    """LOAD_AND_SEARCH in a fresh process: its figures as a dict."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_SEARCH, str(folder), str(work / "queries.npy"), str(work / "truth.npy"), str(nprobe), str(shortlist)],
        capture_output=True, text=True, cwd=REPO,
    )
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
