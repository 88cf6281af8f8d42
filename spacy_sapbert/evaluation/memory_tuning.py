"""Choosing the mention memory's settings by a grid search on a dev set (kNN-BioEL)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..kb import KnowledgeBase
from ..linker import is_linkable
from ..memory import MIXTURES, MemorySettings
from .queries import EvalMention
from .ranks import KS, gold_rank, mention_rank, metrics_from_ranks
from .retrievers import LinkerRetriever


# memory_mixture first: the published mixture comes first in grid order, so it wins ties
FULL_GRID: Dict[str, Sequence[Any]] = {
    "memory_mixture": MIXTURES,
    "memory_k": (1, 2, 4, 8, 16),
    "memory_weight": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9),
    "concept_temperature": (0.01, 0.02, 0.05, 0.1),
    "memory_temperature": (0.01, 0.05, 0.1, 0.5, 1.0),
}
# A setting a grid leaves out keeps the paper's value (MemorySettings' defaults). "weight" searches lambda alone.
# Chosen on half of NCBI-disease dev and scored on the other half it carried a little better than the whole grid
# (+0.2 acc@1 over 14 grids), but on other corpora it lost strict accuracy (BC5CDR-disease dev -2.6 to -4.3 in four
# models): the published mixture cannot add the concepts that only the memory finds. So the whole grid stays the
# default (BENCHMARKS.md, "Memory settings that carry").
MEMORY_GRIDS: Dict[str, Dict[str, Sequence[Any]]] = {
    "weight": {"memory_weight": FULL_GRID["memory_weight"]},
    "full": FULL_GRID,
}
DEFAULT_MEMORY_GRID = "full"


def memory_grid(name: str) -> Dict[str, Sequence[Any]]:
    """The grid of that name; a SapbertError naming the option for another."""
    if name not in MEMORY_GRIDS:
        from ..errors import SapbertError

        raise SapbertError(f"--memory-grid is {name!r}; choose one of {list(MEMORY_GRIDS)}")
    return MEMORY_GRIDS[name]


def grid_ranks(
    retriever: LinkerRetriever,
    mentions: Sequence[EvalMention],
    kb: KnowledgeBase,
    grid: Mapping[str, Sequence[Any]],
    k: int = max(KS),
) -> List[Tuple[MemorySettings, List[Optional[int]]]]:
    """Each combination of the grid's settings (in grid order) with the gold's rank for every mention (None: not in
    the top k); a setting the grid leaves out keeps the paper's value.

    A query without a letter or digit ranks nothing, as the component does not link it (`is_linkable`). Each
    query is encoded once and searched once per memory_k (faiss orders exact ties in the memory, one string
    stored under several ids, differently for each k: a k-prefix of a deeper search is not what that k finds); only
    the mixture is recomputed per combination.
    """
    import itertools

    linker = retriever.linker
    if not linker.memory_active:
        from ..errors import SapbertError

        raise SapbertError("tune_memory needs a linker whose mention memory has entries")
    normalized = {q: linker.normalizer.query(q) for m in mentions for q in m.queries}
    distinct = sorted({key for key in normalized.values() if is_linkable(key)})
    votes_by_k = {}
    for memory_k in sorted(set(grid.get("memory_k", (MemorySettings().memory_k,)))):
        concepts, votes_by_k[memory_k] = linker.retrieve(distinct, memory_k) if distinct else ([], [])
    keys = list(grid)
    out = []
    for values in itertools.product(*(grid[key] for key in keys)):
        settings = MemorySettings(**dict(zip(keys, values)))
        votes = votes_by_k[settings.memory_k]
        ranked = {q: settings.mix(hits, near)[:k] for q, hits, near in zip(distinct, concepts, votes)}
        out.append((settings, [mention_rank([gold_rank(ranked.get(normalized[q], []), m.gold_set, kb) for q in m.queries])
                               for m in mentions]))
    return out


def tune_memory(
    retriever: LinkerRetriever,
    mentions: Sequence[EvalMention],
    kb: KnowledgeBase,
    grid: Mapping[str, Sequence[Any]] = MEMORY_GRIDS[DEFAULT_MEMORY_GRID],
    k: int = max(KS),
) -> List[Dict[str, Any]]:
    """Every combination of the grid's settings with its acc@1, acc@5 and MRR, best first (`grid_ranks`).

    Best means highest acc@1, then acc@5, then MRR; ties keep grid order. Run it on a dev set only.
    """
    rows = []
    for settings, ranks in grid_ranks(retriever, mentions, kb, grid, k):
        metrics = metrics_from_ranks(ranks)
        rows.append({**settings.to_dict(), "acc@1": metrics["acc@1"], "acc@5": metrics["acc@5"], "mrr": metrics["mrr"]})
    # the MRR rounded: one sum of the same ranks in another order differs in its last bit, and a tie keeps grid order
    return sorted(rows, key=lambda row: (-row["acc@1"], -row["acc@5"], -round(row["mrr"], 12)))
