"""`python -m spacy_sapbert evaluate ... --tune-memory` that also saves, for each protocol, the gold's rank under every
setting of the memory grid for every dev mention: CAPTURE-{strict,biosyn}.npz (ranks [settings x mentions], 0 for a
miss; the mentions' document ids; the settings as JSON). The grid rows it returns are tune_memory's, computed from the
same ranks in one pass. It ran with commit d1df632, whose one grid is today's `--memory-grid full` (the default).
For a dev-only study of how tuned memory settings carry to mentions they were not tuned on."""
import itertools
import json
import os
import sys

import numpy as np

from spacy_sapbert.cli import main
from spacy_sapbert.evaluation import benchmark
from spacy_sapbert.evaluation.ranks import KS, gold_rank, mention_rank, metrics_from_ranks
from spacy_sapbert.memory import MemorySettings

PROTOCOLS = iter(["strict", "biosyn"])  # run_benchmark tunes strict first, then biosyn


def tune_and_capture(retriever, mentions, kb, grid=None, k=max(KS)):
    grid = grid or benchmark.MEMORY_GRID  # d1df632 passed no grid: its one grid, MEMORY_GRID
    linker = retriever.linker
    normalized = {q: linker.normalizer.query(q) for m in mentions for q in m.queries}
    distinct = sorted(set(normalized.values()))
    concepts, votes = linker.retrieve(distinct, max(grid.get("memory_k", (MemorySettings().memory_k,))))
    keys = list(grid)
    settings, all_ranks, rows = [], [], []
    for values in itertools.product(*(grid[key] for key in keys)):
        s = MemorySettings(**dict(zip(keys, values)))
        ranked = {q: s.mix(h, n)[:k] for q, h, n in zip(distinct, concepts, votes)}
        ranks = [mention_rank([gold_rank(ranked[normalized[q]], m.gold_set, kb) for q in m.queries]) for m in mentions]
        metrics = metrics_from_ranks(ranks)
        rows.append({**s.to_dict(), "acc@1": metrics["acc@1"], "acc@5": metrics["acc@5"], "mrr": metrics["mrr"]})
        settings.append(s.to_dict())
        all_ranks.append([r or 0 for r in ranks])
    np.savez_compressed(
        f"{os.environ['CAPTURE']}-{next(PROTOCOLS)}.npz", ranks=np.array(all_ranks, dtype=np.int16),
        docs=np.array([m.doc_id for m in mentions]), settings=json.dumps(settings),
    )
    return sorted(rows, key=lambda row: (-row["acc@1"], -row["acc@5"], -row["mrr"]))


benchmark.tune_memory = tune_and_capture
sys.argv = ["spacy_sapbert"] + sys.argv[1:]
main()
