"""Scoring ranked candidates: the gold's rank per mention (composites: the worst part) and acc@k / MRR."""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..index import Candidate
from ..kb import KnowledgeBase
from .queries import EvalMention

KS = tuple(range(1, 11))


def gold_position(candidates: Sequence[Candidate], gold: set, kb: KnowledgeBase) -> Optional[int]:
    """0-based position of the first candidate sharing an id (primary or alternative) with `gold`, else None."""
    for position, (cid, _) in enumerate(candidates):
        concept = kb.get(cid)
        ids = concept.all_ids if concept is not None else [cid]
        if gold.intersection(ids):
            return position
    return None


def tied_rank(candidates: Sequence[Candidate], position: int) -> int:
    """The rank of the candidate at `position` when exact ties share the best of their ranks: 1 + the candidates
    scored strictly higher. Concepts tie exactly when their best name is the same name, and BioSyn's
    `check_label` counts such a name, one dictionary entry of several cuis, as a hit for each of them."""
    score = candidates[position][1]
    return 1 + sum(1 for _, other in candidates[:position] if other > score)


def gold_rank(candidates: Sequence[Candidate], gold: set, kb: KnowledgeBase, shared: bool = False) -> Optional[int]:
    """1-based rank of the first candidate sharing an id (primary or alternative) with `gold`, else None;
    `shared`: its `tied_rank`."""
    position = gold_position(candidates, gold, kb)
    if position is None:
        return None
    return tied_rank(candidates, position) if shared else position + 1


def mention_rank(part_ranks: Sequence[Optional[int]]) -> Optional[int]:
    """A composite mention ranks as its worst part; None when any part was not found."""
    if any(r is None for r in part_ranks):
        return None
    return max(part_ranks)  # type: ignore[type-var]


def metrics_from_ranks(ranks: Sequence[Optional[int]], ks: Sequence[int] = KS) -> Dict[str, float]:
    """acc@k for every k in `ks` and the mean reciprocal rank (0 for a miss)."""
    n = len(ranks)
    if n == 0:
        return {**{f"acc@{k}": 0.0 for k in ks}, "mrr": 0.0}
    out = {f"acc@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in ks}
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n
    return out


def miss_record(
    mention: EvalMention, rank: Optional[int], ranked: Mapping[str, Sequence[Candidate]], kb: KnowledgeBase, top: int = 5
) -> dict:
    """A mention not ranked first, for error analysis: its gold (with names), the gold's rank (None: not in
    the top k) and each query's first `top` candidates (`ranked`: this mention's, by query) with their
    canonical names and scores."""

    def name_of(concept_id: str) -> str:
        concept = kb.get(concept_id)
        return concept.name if concept is not None else ""

    return {
        "doc_id": mention.doc_id,
        "text": mention.text,
        "gold": mention.gold,
        "gold_names": [name_of(i) for i in sorted(mention.gold_set)],
        "rank": rank,
        "queries": [
            {"query": q, "candidates": [[cid, name_of(cid), round(float(score), 4)] for cid, score in ranked[q][:top]]}
            for q in mention.queries
        ],
    }


def score_retriever(
    retriever, mentions: Sequence[EvalMention], kb: KnowledgeBase, k: int = max(KS), misses: Optional[list] = None
) -> Tuple[Dict[str, float], List[Optional[int]]]:
    """Metrics and per-mention ranks; every distinct query string is searched once (once per distinct place in
    its text when the retriever `reads_context`: a re-ranker with context words). With `misses` (a list),
    a `miss_record` is appended for every mention whose gold is not ranked first. `shared_acc@1` counts a
    gold that ties exactly with the first candidate as a hit (`gold_rank(shared=True)`), as BioSyn's
    evaluation counts a name shared by several concepts; the other metrics rank one concept per place."""
    reads_context = bool(getattr(retriever, "reads_context", False))
    units = [{q: (q, m.where if reads_context else None) for q in m.queries} for m in mentions]
    distinct = sorted(dict.fromkeys(unit for by_query in units for unit in by_query.values()), key=lambda unit: unit[0])
    ranked_units: Dict = {}
    if distinct:  # a retriever is never asked for nothing
        queries = [q for q, _ in distinct]
        candidates = retriever.rank(queries, k, contexts=[where for _, where in distinct]) if reads_context else retriever.rank(queries, k)
        ranked_units = dict(zip(distinct, candidates))
    ranked = [{q: ranked_units[unit] for q, unit in by_query.items()} for by_query in units]  # per mention, by query
    positions = [[gold_position(found[q], m.gold_set, kb) for q in m.queries] for m, found in zip(mentions, ranked)]
    ranks = [mention_rank([None if p is None else p + 1 for p in parts]) for parts in positions]
    shared = [
        mention_rank([None if p is None else tied_rank(found[q], p) for q, p in zip(m.queries, parts)])
        for m, found, parts in zip(mentions, ranked, positions)
    ]
    if misses is not None:
        misses += [miss_record(m, r, found, kb) for m, r, found in zip(mentions, ranks, ranked) if r != 1]
    metrics = metrics_from_ranks(ranks)
    metrics["shared_acc@1"] = metrics_from_ranks(shared, ks=(1,))["acc@1"]
    return metrics, ranks
