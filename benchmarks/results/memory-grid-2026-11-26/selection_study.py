"""How well does a rule for choosing the memory's settings on dev carry to mentions it was not chosen on?

Dev-only: for each captured grid (capture_grid.py: the gold's rank under every setting for every NCBI-disease dev
mention), split dev's documents at random into two halves, choose a setting on one half by each rule, score acc@1
on the other half, and average over splits and both directions (with --tune-fraction other than 0.5: choose on
that share of the documents, score on the rest). No test mention is read.

    python selection_study.py grids/*.npz --splits 100   (output: selection-study.txt)
    python selection_study.py grids/*.npz --splits 200 --tune-fraction 0.75   (output: selection-study-75.txt)
"""
import argparse
import itertools
import json

import numpy as np

AXES = ("memory_mixture", "memory_k", "memory_weight", "concept_temperature", "memory_temperature")
PAPER = {"memory_mixture": "published", "memory_k": 4, "memory_weight": 0.1, "concept_temperature": 0.01, "memory_temperature": 1.0}


def load(path):
    data = np.load(path)
    settings = json.loads(str(data["settings"]))
    return data["ranks"].astype(np.int32), data["docs"], settings


def neighbours(settings):
    """For each setting, the indexes of the settings one grid step away on one numeric axis (same mixture), itself included."""
    values = {axis: sorted({s[axis] for s in settings}, key=str if axis == "memory_mixture" else float) for axis in AXES}
    position = {tuple(values[a].index(s[a]) for a in AXES): i for i, s in enumerate(settings)}
    out = []
    for s in settings:
        here = [values[a].index(s[a]) for a in AXES]
        group = [position[tuple(here)]]
        for axis in range(1, len(AXES)):
            for step in (-1, 1):
                there = list(here)
                there[axis] += step
                if tuple(there) in position:
                    group.append(position[tuple(there)])
        out.append(group)
    return out


def choose(rule, ranks, mask, settings, groups):
    """Index of the setting a rule picks from the mentions in `mask`."""
    r = ranks[:, mask]
    hit1 = (r == 1).mean(1)
    hit5 = ((r >= 1) & (r <= 5)).mean(1)
    mrr = np.where(r > 0, 1.0 / np.maximum(r, 1), 0.0).mean(1)
    if rule == "paper":
        return next(i for i, s in enumerate(settings) if all(s[a] == PAPER[a] for a in AXES))
    if rule == "argmax acc@1":  # tune_memory's order: acc@1, then acc@5, then MRR, then grid order
        return int(np.lexsort((np.arange(len(settings)), -mrr, -hit5, -hit1))[0])
    if rule.startswith("argmax over "):  # the grid cut to the paper's values on every axis but these
        free = rule[len("argmax over "):].split("+")
        keep = np.array([all(s[a] == PAPER[a] for a in AXES if a not in free) for s in settings])
        order = np.lexsort((np.arange(len(settings)), -mrr, -hit5, -hit1, ~keep))
        return int(order[0])
    if rule == "argmax mrr":
        return int(np.lexsort((np.arange(len(settings)), -hit1, -mrr))[0])
    if rule == "neighbourhood acc@1":  # the mean acc@1 of the setting and its grid neighbours
        smooth = np.array([hit1[g].mean() for g in groups])
        return int(np.lexsort((np.arange(len(settings)), -mrr, -hit1, -smooth))[0])
    raise ValueError(rule)


RULES = (
    "paper", "argmax acc@1", "argmax mrr", "neighbourhood acc@1", "argmax over memory_weight",
    "argmax over memory_k+memory_weight", "argmax over memory_k+memory_weight+memory_mixture",
)


def study(path, splits, seed=0, tune_fraction=0.5):
    ranks, docs, settings = load(path)
    groups = neighbours(settings)
    unique = np.unique(docs)
    rng = np.random.default_rng(seed)
    held = {rule: [] for rule in RULES}
    for _ in range(splits):
        chosen = set(rng.permutation(unique)[: round(len(unique) * tune_fraction)])
        a = np.array([d in chosen for d in docs])
        for tune, score in ((a, ~a), (~a, a)) if tune_fraction == 0.5 else ((a, ~a),):
            for rule in RULES:
                i = choose(rule, ranks, tune, settings, groups)
                held[rule].append((ranks[i, score] == 1).mean())
    full = {rule: choose(rule, ranks, np.ones(len(docs), bool), settings, groups) for rule in RULES}
    best_possible = (ranks == 1).mean(1).max()
    return {
        rule: {"held_out_acc@1": 100 * float(np.mean(v)), "sd": 100 * float(np.std(v)),
               "full_dev_acc@1": 100 * float((ranks[full[rule]] == 1).mean()), "full_dev_choice": settings[full[rule]]}
        for rule, v in held.items()
    } | {"grid_max_full_dev": 100 * float(best_possible), "n_mentions": int(len(docs)), "n_docs": int(len(unique))}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("npz", nargs="+")
    parser.add_argument("--splits", type=int, default=200)
    parser.add_argument("--tune-fraction", type=float, default=0.5, help="share of dev's documents the rules choose on")
    args = parser.parse_args()
    table = {}
    for path in args.npz:
        table[path] = study(path, args.splits, tune_fraction=args.tune_fraction)
        r = table[path]
        print(f"{path}: {r['n_mentions']} mentions in {r['n_docs']} documents; grid maximum on all of dev {r['grid_max_full_dev']:.1f}")
        for rule in RULES:
            x = r[rule]
            print(f"  {rule:22s} held-out acc@1 {x['held_out_acc@1']:.2f} (sd {x['sd']:.2f}); on all of dev {x['full_dev_acc@1']:.1f} with {x['full_dev_choice']}")
    for protocol in ("strict", "biosyn"):
        paths = [p for p in table if p.endswith(f"-{protocol}.npz")]
        means = {rule: round(float(np.mean([table[p][rule]["held_out_acc@1"] for p in paths])), 2) for rule in RULES}
        wins = {rule: sum(table[p][rule]["held_out_acc@1"] > table[p]["argmax acc@1"]["held_out_acc@1"] for p in paths) for rule in RULES}
        print(f"{protocol} ({len(paths)} grids): mean held-out acc@1 {means}; grids where the rule beats argmax acc@1 {wins}")
    print("mean held-out acc@1 over the grids:", {rule: round(float(np.mean([table[p][rule]['held_out_acc@1'] for p in table])), 2) for rule in RULES})
    print("mean held-out gain over argmax acc@1:", {rule: round(float(np.mean([table[p][rule]['held_out_acc@1'] - table[p]['argmax acc@1']['held_out_acc@1'] for p in table])), 2) for rule in RULES})


if __name__ == "__main__":
    main()
