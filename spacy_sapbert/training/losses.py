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

from typing import Optional

import torch

from ..extras import require

__all__ = ["MINER_DISTANCES", "make_loss", "make_miner", "sap_loss"]

MINER_DISTANCES = ("euclidean", "cosine")


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


def make_loss(alpha: float = 2.0, beta: float = 50.0, base: float = 0.5):
    """pytorch-metric-learning ``MultiSimilarityLoss`` (cosine similarity, mean over the batch)."""
    losses = require("pytorch_metric_learning.losses")

    return losses.MultiSimilarityLoss(alpha=alpha, beta=beta, base=base)


def sap_loss(embeddings: torch.Tensor, labels: torch.Tensor, miner, loss) -> torch.Tensor:
    """Multi-similarity loss of a batch over the miner's hard triplets (all pairs when miner is None).

    `embeddings` are (2B, dim): both names of B pairs; `labels` (2B,) their concept labels. Computed in
    float32 (also under CUDA autocast). The result is always connected to `embeddings` in the autograd
    graph, also when nothing was mined, so that backward() and DistributedDataParallel work every step.
    """
    embeddings = embeddings.float()
    hard: Optional[tuple] = miner(embeddings, labels) if miner is not None else None
    value = loss(embeddings, labels, hard) if hard is not None else loss(embeddings, labels)
    return value + 0.0 * embeddings.sum()
