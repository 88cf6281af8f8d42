"""The SapBERT paper's Figure 1 for your own run: names of a few concepts before and after training, in 2-D.

`plot-embeddings` samples concepts with several names, encodes every name with two encoders (before
and after SAP, or any two), projects each set of vectors to 2-D with scikit-learn's t-SNE, and draws
the two panels side by side, one colour per concept. Beside the picture it gives a number that does
not depend on the projection: the share of names whose nearest other name (cosine, in the encoder's
own space) belongs to the same concept.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy

from .extras import require
from .io import atomic_write
from .kb import Concept


def sample_concepts(concepts: Sequence[Concept], n: int, min_names: int = 4, max_names: int = 12, seed: int = 0) -> List[Concept]:
    """`n` concepts with at least `min_names` distinct lowercased names, drawn with `seed`; each keeps at most
    `max_names` names (its first ones), so no concept fills the picture."""
    eligible = [c for c in concepts if len({name.lower() for name in c.names}) >= min_names]
    chosen = random.Random(seed).sample(eligible, min(n, len(eligible)))
    out = []
    for concept in chosen:
        names = list(dict.fromkeys(name.lower() for name in concept.names))[:max_names]
        out.append(Concept(concept.id, names[0], names[1:]))
    return out


def same_concept_neighbour_rate(vectors: numpy.ndarray, labels: Sequence[int]) -> float:
    """The share of rows whose nearest other row (cosine) has the same label."""
    unit = vectors / numpy.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
    similarity = unit @ unit.T
    numpy.fill_diagonal(similarity, -numpy.inf)
    nearest = similarity.argmax(axis=1)
    labels = numpy.asarray(labels)
    return float((labels[nearest] == labels).mean())


def project_2d(vectors: numpy.ndarray, seed: int = 0) -> numpy.ndarray:
    """t-SNE of `vectors` to 2-D (cosine distances, perplexity below the number of points)."""
    TSNE = require("sklearn.manifold").TSNE
    perplexity = float(min(30, max(2, len(vectors) // 4)))
    return TSNE(n_components=2, metric="cosine", perplexity=perplexity, init="random", random_state=seed).fit_transform(vectors)


def names_and_labels(concepts: Sequence[Concept]) -> Tuple[List[str], List[int]]:
    """Every name of every concept, and the index of its concept."""
    names, labels = [], []
    for i, concept in enumerate(concepts):
        names.extend(concept.names)
        labels.extend([i] * len(concept.names))
    return names, labels


def plot_embeddings(
    panels: Dict[str, numpy.ndarray], labels: Sequence[int], legend: Sequence[str], output: Path, seed: int = 0
) -> None:
    """One t-SNE panel per {title: vectors}, points coloured by label, written as a PNG (atomically)."""
    FigureCanvasAgg = require("matplotlib.backends.backend_agg").FigureCanvasAgg
    Figure = require("matplotlib.figure").Figure
    cmap = require("matplotlib").colormaps["tab20"]
    figure = Figure(figsize=(6 * len(panels), 6.5), dpi=100)
    FigureCanvasAgg(figure)
    labels = numpy.asarray(labels)
    for i, (title, vectors) in enumerate(panels.items(), 1):
        points = project_2d(vectors, seed)
        axes = figure.add_subplot(1, len(panels), i)
        for label, name in enumerate(legend):
            rows = labels == label
            axes.scatter(points[rows, 0], points[rows, 1], s=18, color=cmap(label % 20), label=name[:32])
        axes.set_title(title)
        axes.set_xticks([])
        axes.set_yticks([])
    if len(legend) <= 20:  # more concepts than colours: a legend would not tell them apart
        figure.axes[-1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False)
    figure.tight_layout()
    atomic_write(output, lambda tmp: figure.savefig(str(tmp), format="png", bbox_inches="tight"))
