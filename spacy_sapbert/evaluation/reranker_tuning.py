"""Choosing a pipeline's `rerank_weight` on a dev set: how far the re-ranker's logit moves the linker's order.

The re-ranker learned to correct the linker's scores as they were in training; a pipeline with a mention
memory mixes the memory's votes into those scores, so the balance that serves it best is measured, not
assumed. Each weight links the dev corpus's gold mentions through the whole pipeline (as `choose-pipeline`
scores pipelines), with each (mention, candidate) pair scored by the re-ranker once for the whole grid.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..readers.corpora import Document
from .end_to_end import evaluate_end_to_end

DEFAULT_RERANK_WEIGHTS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5)


def tune_rerank_weight(
    nlp, linker, documents: Sequence[Document], weights: Sequence[float] = DEFAULT_RERANK_WEIGHTS,
    labels: Optional[Iterable[str]] = None,
) -> Tuple[float, List[Dict[str, Any]]]:
    """(the weight whose pipeline links the most gold mentions of `documents` right, every weight's row).
    A tie goes to the smaller weight, which keeps more of the linker's own order. `linker` (a component of
    `nlp` with a re-ranker) is left with the chosen weight."""
    if linker.reranker is None:
        raise ValueError(f"{linker.name} has no re-ranker to weigh")
    rows: List[Dict[str, Any]] = []
    with linker.reranker.memoized():
        for weight in sorted(set(weights)):
            linker.rerank_weight = weight
            gold = evaluate_end_to_end(nlp, documents, labels, gold_mentions=True)
            rows.append({"rerank_weight": weight, "accuracy": gold["recall"], "right": gold["tp"], "linked": gold["tp"] + gold["fn"]})
    best = max(rows, key=lambda row: row["accuracy"])  # the first of the best: the smallest weight
    linker.rerank_weight = best["rerank_weight"]
    return best["rerank_weight"], rows
