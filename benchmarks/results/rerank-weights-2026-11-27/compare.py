"""Check that one `evaluate` with every --rerank-weight gives each weight's rows exactly as one `evaluate` per weight,
and print the memory + re-ranker rows (strict / biosyn acc@1) and the wall times of run.out.

Usage: python compare.py [TAG] (in the folder of run.sh's reports; TAG s42 by default)"""
import json
import re
import sys
from pathlib import Path

tag = sys.argv[1] if len(sys.argv) > 1 else "s42"
several = json.loads(Path(f"{tag}-all.json").read_text())
weights = several["rerank_weights"]
mismatches = 0
print("| rerank_weight | re-ranker, no memory | memory + re-ranker |\n|---|---|---|")
for weight in weights:
    single = json.loads(Path(f"{tag}-w{weight:.1f}.json").read_text())["results"]
    cells = []
    for with_memory in (False, True):
        [name] = [n for n in single if n.endswith(" + re-ranker") and (" + memory" in n) == with_memory]
        same = several["results"][f"{name} (weight {weight:g})"] == single[name]
        mismatches += not same
        cells.append(" / ".join(f"{100 * single[name][p]['acc@1']:.1f}" for p in ("strict", "biosyn")) + ("" if same else " (differs)"))
    print(f"| {weight:g} | {cells[0]} | {cells[1]} |")
print(f"\nrows that differ between the one run and the runs per weight: {mismatches} of {2 * len(weights)}")
times = re.findall(r"^(one run|weight [\d.]+): ([\d.]+) s wall, (\d+) KB peak", Path("run.out").read_text(), re.M)
per_weight = sum(float(s) for name, s, _ in times if name != "one run")
for name, seconds, kb in times:
    print(f"{name}: {float(seconds):.0f} s, {int(kb) / 1024:.0f} MB peak")
print(f"one run per weight, together: {per_weight:.0f} s")
