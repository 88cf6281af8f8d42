"""Speed and peak memory of synonym extraction from a (synthetic) UMLS MRCONSO.RRF.

Runs ``umls_concepts`` (language/suppression filters, MRSTY types, MRREL trade names) ->
``extract_synonyms`` -> ``write_synonyms`` -> ``write_pairs`` on an MRCONSO of N rows and prints rows/s
of the extraction and the peak resident memory of the process (resource.getrusage). The target is a
full-size MRCONSO (about 15 million rows) in under 4 GB.

Usage:
    python benchmarks/bench_extract.py --rows 200000            # generates the files in a temp folder
    python benchmarks/bench_extract.py --rows 15000000 --dir /scratch/umls-synth
    python benchmarks/bench_extract.py --umls-dir /path/to/META  # real MRCONSO.RRF / MRSTY.RRF / MRREL.RRF
"""
from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_synthetic_mrconso import write as make_synthetic  # noqa: E402

from spacy_sapbert.training.extract import extract_synonyms, read_synonyms, umls_concepts, write_synonyms  # noqa: E402
from spacy_sapbert.training.pairs import write_pairs  # noqa: E402


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 24), b""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the synthetic MRCONSO")
    parser.add_argument("--dir", type=Path, default=None, help="folder for the synthetic files (default: a temp folder)")
    parser.add_argument("--umls-dir", type=Path, default=None, help="folder with real MRCONSO.RRF (+ MRSTY.RRF, MRREL.RRF)")
    parser.add_argument("--no-mrrel", action="store_true", help="leave out the MRREL trade names")
    parser.add_argument("--no-mrsty", action="store_true", help="leave out the MRSTY types")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.umls_dir or args.dir or Path(tmp)
        if args.umls_dir is None:
            start = time.perf_counter()
            stats = make_synthetic(folder, args.rows)
            print(f"generated {stats['rows']:,} rows / {stats['cuis']:,} CUIs in {time.perf_counter() - start:.1f} s "
                  f"(peak RSS so far {peak_rss_mb():.0f} MB)")
        mrconso = folder / "MRCONSO.RRF"
        mrsty = None if args.no_mrsty or not (folder / "MRSTY.RRF").exists() else folder / "MRSTY.RRF"
        mrrel = None if args.no_mrrel or not (folder / "MRREL.RRF").exists() else folder / "MRREL.RRF"
        rows = count_lines(mrconso)
        out = Path(tmp) / "synonyms.txt"

        start = time.perf_counter()
        concepts = write_synonyms(out, extract_synonyms(umls_concepts(mrconso, mrsty=mrsty, mrrel=mrrel)))
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        pairs = write_pairs(Path(tmp) / "pairs.txt", read_synonyms(out), max_pairs=50, seed=0)
        pair_seconds = time.perf_counter() - start

        print(f"python {platform.python_version()}, {platform.machine()}, mrsty={'yes' if mrsty else 'no'}, mrrel={'yes' if mrrel else 'no'}")
        print(f"extract: {rows:,} MRCONSO rows -> {concepts:,} concepts in {seconds:.1f} s = {rows / seconds:,.0f} rows/s")
        print(f"pairs:   {pairs:,} pairs in {pair_seconds:.1f} s = {concepts / pair_seconds:,.0f} concepts/s")
        print(f"peak RSS: {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
