"""SapBERT's training objective: online hard triplet mining + multi-similarity loss.

Both parts come from pytorch-metric-learning (Musgrave et al.), a maintained library that implements
exactly these two pieces and is what the SapBERT reference code uses; nothing is reimplemented here.
The reference code (``Sap_Metric_Learning.forward``) does::

    hard_pairs = miners.TripletMarginMiner(margin=0.2, type_of_triplets="all")(embeddings, labels)
    loss = losses.MultiSimilarityLoss(alpha, beta, base)(embeddings, labels, hard_pairs)

i.e. the mined triplets (anchor, positive, negative) are passed as ``indices_tuple``: the loss uses the
(anchor, positive) pairs as positives and the (anchor, negative) pairs as negatives, each distinct pair
once, and for every embedding i computes (Wang et al., CVPR 2019)::

    1/alpha * log(1 + sum_p exp(-alpha (S_ip - base))) + 1/beta * log(1 + sum_n exp(beta (S_in - base)))

with S the cosine similarity (the loss's default distance), averaged over all embeddings of the batch
(embeddings without mined pairs contribute 0). The paper uses alpha=2, beta=50, base=0.5 (the defaults
here); the released code used alpha=1, beta=60.

Mining distance: the reference miner keeps the library default, the Euclidean distance between
L2-normalised embeddings (``LpDistance(normalize_embeddings=True)``), for which
``||a - b|| = sqrt(2 - 2 cos(a, b))``: a triplet is mined when ``d(a, n) - d(a, p) <= margin``.
``distance="cosine"`` mines on cosine similarity instead (``S_ap - S_an <= margin``). Both rank
pairs the same way but the margin of 0.2 means different things; "euclidean" is the default because it
is what SapBERT was trained with.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ..extras import require

__all__ = [
    "LOSSES", "MINER_DISTANCES", "KgeMarginLoss", "kge_margins", "make_loss", "make_miner", "multi_similarity_v2", "sap_loss",
]

MINER_DISTANCES = ("euclidean", "cosine")
LOSSES = ("ms", "ms-v2", "ms-v3")


def make_miner(margin: float = 0.2, type_of_triplets: str = "all", distance: str = "euclidean"):
    """pytorch-metric-learning ``TripletMarginMiner``: the triplets of a batch that violate the margin."""
    distances = require("pytorch_metric_learning.distances")
    miners = require("pytorch_metric_learning.miners")

    if distance == "euclidean":
        measure = distances.LpDistance(normalize_embeddings=True, p=2)
    elif distance == "cosine":
        measure = distances.CosineSimilarity()
    else:
        raise ValueError(f"miner distance {distance!r} is not supported; choose one of {list(MINER_DISTANCES)}")
    return miners.TripletMarginMiner(margin=margin, type_of_triplets=type_of_triplets, distance=measure)


def make_loss(
    alpha: float = 2.0, beta: float = 50.0, base: float = 0.5, kind: str = "ms", pos_margin: float = 1.0, neg_margin: float = 0.5
):
    """The loss of `kind`: "ms", pytorch-metric-learning's ``MultiSimilarityLoss`` (cosine similarity, one
    `base`, mean over the batch); "ms-v2", `multi_similarity_v2` with `pos_margin` and `neg_margin`;
    "ms-v3", a `KgeMarginLoss` (v2's margins where a pair has no knowledge-graph similarity)."""
    if kind == "ms-v2":
        return lambda embeddings, labels, indices_tuple=None: multi_similarity_v2(
            embeddings, labels, indices_tuple, alpha=alpha, beta=beta, pos_margin=pos_margin, neg_margin=neg_margin
        )
    if kind == "ms-v3":
        return KgeMarginLoss(alpha, beta, pos_margin, neg_margin)
    if kind != "ms":
        raise ValueError(f"loss {kind!r} is not supported; choose one of {list(LOSSES)}")
    losses = require("pytorch_metric_learning.losses")

    return losses.MultiSimilarityLoss(alpha=alpha, beta=beta, base=base)


def kge_margins(
    similarity: torch.Tensor, kge_similarity: torch.Tensor, pos_margin: float, neg_margin: float
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MS loss v3's per-pair margins (positives |S - S_kge|, negatives 1 - |S - S_kge|) from the
    similarities of the batch `similarity` (treated as constants: margins carry no gradient) and of the
    concepts in the knowledge-graph embedding `kge_similarity` (NaN: no vector); such pairs keep v2's
    `pos_margin` / `neg_margin`. Returns (positive margins, negative margins, fallback mask)."""
    gap = (similarity.detach() - kge_similarity).abs()
    fallback = torch.isnan(kge_similarity)
    positive = torch.where(fallback, torch.full_like(gap, pos_margin), gap)
    negative = torch.where(fallback, torch.full_like(gap, neg_margin), 1.0 - gap)
    return positive, negative, fallback


class KgeMarginLoss:
    """MS loss v3: `multi_similarity_v2` with margins from a knowledge-graph embedding (`kge_margins`).

    Called with ``kge_similarity``, the (2B, 2B) similarities of the batch's concepts in the embedding;
    counts the scored pairs that had one (`kge_pairs`) and those that fell back to v2 (`fallback_pairs`).
    """

    def __init__(self, alpha: float, beta: float, pos_margin: float, neg_margin: float):
        self.alpha, self.beta, self.pos_margin, self.neg_margin = alpha, beta, pos_margin, neg_margin
        self.kge_pairs = self.fallback_pairs = 0

    def __call__(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple=None, kge_similarity=None) -> torch.Tensor:
        if kge_similarity is None:
            raise ValueError("loss ms-v3 needs the knowledge-graph similarities of the batch (train --kge)")
        kge_similarity = kge_similarity.to(embeddings.device, torch.float32)
        return multi_similarity_v2(
            embeddings, labels, indices_tuple, alpha=self.alpha, beta=self.beta, pos_margin=self.pos_margin,
            neg_margin=self.neg_margin, kge_similarity=kge_similarity, counts=self,
        )


def multi_similarity_v2(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    indices_tuple: Optional[tuple] = None,
    *,
    alpha: float = 2.0,
    beta: float = 50.0,
    pos_margin: float = 1.0,
    neg_margin: float = 0.5,
    kge_similarity: Optional[torch.Tensor] = None,
    counts: Optional["KgeMarginLoss"] = None,
) -> torch.Tensor:
    """The multi-similarity loss with separate margins for positives and negatives (MS loss v2 of the
    Italian medical-embeddings paper: lambda_p = 1, lambda_n = 0.5), per embedding i::

        1/alpha * log(1 + sum_p exp(-alpha (S_ip - pos_margin))) + 1/beta * log(1 + sum_n exp(beta (S_in - neg_margin)))

    averaged over the batch, on the same pairs as ``MultiSimilarityLoss``: those of the mined triplets
    `indices_tuple` (anchors, positives, negatives; each distinct pair once), else every pair of the
    batch. With pos_margin = neg_margin = base it equals pytorch-metric-learning's loss (tested);
    the library has one base for both, hence this function. With `kge_similarity` the margins are
    v3's, per pair (`kge_margins`), and `counts` (a KgeMarginLoss) adds up the pairs scored each way.
    """
    vectors = torch.nn.functional.normalize(embeddings.float(), dim=1)
    similarity = vectors @ vectors.T
    n = len(vectors)
    if indices_tuple is None:
        same = labels[:, None] == labels[None, :]
        pos_mask = same & ~torch.eye(n, dtype=torch.bool, device=vectors.device)
        neg_mask = ~same
    else:
        anchors, positives, negatives = indices_tuple
        pos_mask = torch.zeros(n, n, dtype=torch.bool, device=vectors.device)
        neg_mask = torch.zeros(n, n, dtype=torch.bool, device=vectors.device)
        pos_mask[anchors, positives] = True
        neg_mask[anchors, negatives] = True
    positive_margin, negative_margin = pos_margin, neg_margin
    if kge_similarity is not None:
        positive_margin, negative_margin, fallback = kge_margins(similarity, kge_similarity, pos_margin, neg_margin)
        if counts is not None:
            scored = pos_mask | neg_mask
            counts.fallback_pairs += int((fallback & scored).sum())
            counts.kge_pairs += int((~fallback & scored).sum())
    pos_term = _log_one_plus_sum_exp(-alpha * (similarity - positive_margin), pos_mask) / alpha
    neg_term = _log_one_plus_sum_exp(beta * (similarity - negative_margin), neg_mask) / beta
    return (pos_term + neg_term).mean()


def _log_one_plus_sum_exp(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log(1 + sum of exp(values) over each row's masked entries), computed stably (0 for an empty row)."""
    masked = values.masked_fill(~mask, float("-inf"))
    return torch.logsumexp(torch.cat([torch.zeros(len(values), 1, dtype=values.dtype, device=values.device), masked], dim=1), dim=1)


def sap_loss(embeddings: torch.Tensor, labels: torch.Tensor, miner, loss, kge_similarity: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Multi-similarity loss of a batch over the miner's hard triplets (all pairs when miner is None).

    `embeddings` are (2B, dim): both names of B pairs; `labels` (2B,) their concept labels. Computed in
    float32 (also under CUDA autocast). The result is always connected to `embeddings` in the autograd
    graph, also when nothing was mined, so that backward() and DistributedDataParallel work every step.
    `kge_similarity` (2B, 2B) goes to an ms-v3 loss.
    """
    embeddings = embeddings.float()
    hard: Optional[tuple] = miner(embeddings, labels) if miner is not None else None
    extra = {"kge_similarity": kge_similarity} if kge_similarity is not None else {}
    value = loss(embeddings, labels, hard, **extra) if hard is not None else loss(embeddings, labels, **extra)
    return value + 0.0 * embeddings.sum()
