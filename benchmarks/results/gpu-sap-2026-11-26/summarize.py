"""Print one row per timed SAP run: median pairs/s over the log windows after the first, peak GPU
memory (nvidia-smi, CUDA context included) and mean GPU utilisation.

    python summarize.py RUNS_DIR            (each run: RUNS_DIR/NAME/train_log.jsonl and RUNS_DIR/NAME.smi.csv)
"""
import json
import statistics
import sys
from pathlib import Path


def smi_figures(path: Path):
    used, util = [], []
    if path.exists():
        for line in path.read_text().splitlines():
            parts = [p.strip().split()[0] for p in line.split(",")[1:3]]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                used.append(int(parts[0]))
                util.append(int(parts[1]))
    return (max(used) if used else None), (round(statistics.mean(util)) if util else None)


def main(runs_dir: str) -> None:
    print(f"{'run':<22} {'steps':>5} {'pairs/s':>9} {'s/step':>7} {'peak MiB':>9} {'util %':>6}")
    for log in sorted(Path(runs_dir).glob("*/train_log.jsonl")):
        entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        rates = [e["pairs_per_s"] for e in entries[1:]] or [e["pairs_per_s"] for e in entries]
        rate = statistics.median(rates)
        peak, util = smi_figures(log.parent.parent / f"{log.parent.name}.smi.csv")
        batch = json.loads((log.parent / "train_config.json").read_text())["batch_size"]
        print(f"{log.parent.name:<22} {entries[-1]['step']:>5} {rate:>9.1f} {batch / rate:>7.3f} {str(peak):>9} {str(util):>6}")


if __name__ == "__main__":
    main(sys.argv[1])
