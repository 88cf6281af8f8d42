"""`python -m spacy_sapbert evaluate ... --tune-memory` that also saves, for each protocol, the gold's rank under every
setting of the memory grid for every dev mention: CAPTURE-{strict,biosyn}.npz (ranks [settings x mentions], 0 for a
miss; the mentions' document ids; the settings as JSON), by wrapping memory_tuning.grid_ranks, which tune_memory calls.
For a dev-only study of how tuned memory settings carry to mentions they were not tuned on.

The grids of ../memory-grid-2026-11-26/grids/ were captured with commit d1df632, before grid_ranks existed, by a copy
of tune_memory's loop that saved the same ranks; this version does the same through grid_ranks (checked by capturing
the MiniLM chain of seed 42 again: identical ranks)."""
import json
import os
import sys

import numpy as np

from spacy_sapbert.cli import main
from spacy_sapbert.evaluation import memory_tuning

PROTOCOLS = iter(["strict", "biosyn"])  # run_benchmark tunes strict first, then biosyn
ranks_of_grid = memory_tuning.grid_ranks


def capturing_grid_ranks(*args, **kwargs):
    out = ranks_of_grid(*args, **kwargs)
    np.savez_compressed(
        f"{os.environ['CAPTURE']}-{next(PROTOCOLS)}.npz",
        ranks=np.array([[r or 0 for r in ranks] for _, ranks in out], dtype=np.int16),
        docs=np.array([m.doc_id for m in args[1]]), settings=json.dumps([s.to_dict() for s, _ in out]),
    )
    return out


memory_tuning.grid_ranks = capturing_grid_ranks
sys.argv = ["spacy_sapbert"] + sys.argv[1:]
main()
