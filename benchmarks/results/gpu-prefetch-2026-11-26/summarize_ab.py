"""One row per timed SAP run of call_ab.sh: median pairs/s over the log windows after the first (the first
holds the warm-up), seconds per step, peak GPU memory (nvidia-smi, CUDA context included) and the GPU's
median utilisation over the samples while the model was on it (memory above half its peak).

    python summarize_ab.py RUNS_DIR
"""
import json
import statistics
import sys
from pathlib import Path


def smi_figures(path: Path):
    samples = []
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = [p.strip().split()[0] for p in line.split(",")[1:3]]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            samples.append((int(parts[0]), int(parts[1])))
    if not samples:
        return None, None
    peak = max(used for used, _ in samples)
    busy = [util for used, util in samples if used > peak / 2]
    return peak, statistics.median(busy)


def main(runs_dir: str) -> None:
    print(f"{'run':<18} {'steps':>5} {'pairs/s':>9} {'s/step':>7} {'peak MiB':>9} {'util % (median)':>15}")
    for log in sorted(Path(runs_dir).glob("*/train_log.jsonl")):
        entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        rates = [e["pairs_per_s"] for e in entries[1:]] or [e["pairs_per_s"] for e in entries]
        rate = statistics.median(rates)
        batch = json.loads((log.parent / "train_config.json").read_text())["batch_size"]
        peak, util = smi_figures(log.parent.parent / f"{log.parent.name}.smi.csv")
        print(f"{log.parent.name:<18} {entries[-1]['step']:>5} {rate:>9.1f} {batch / rate:>7.3f} {peak!s:>9} {util!s:>15}")


if __name__ == "__main__":
    main(sys.argv[1])
