"""A cross-encoder re-ranker: reads a mention and a candidate concept's names together and scores the pair.

The bi-encoder (the linker's index) ranks concepts by the cosine of separately encoded vectors; the
right concept is often in its top 10 without being first. The re-ranker is a transformer with one
output (transformers' `AutoModelForSequenceClassification`, `num_labels=1`) over the pair
``[CLS] mention [SEP] candidate text [SEP]``, trained (`train-reranker`) to give the gold candidate
the highest score among the bi-encoder's candidates.

The candidate text is the concept's canonical name, then the synonyms most like the mention (by
character-trigram overlap), ``" ; "``-joined, up to `max_names` names: the name that matched is
usually among them and the pair stays short. Mention and names are normalized by the linker's
normalizer, as the index stores them.

The re-ranker's logit is added to the bi-encoder's score divided by `bi_temperature` (when set; 0.1
by default in training, chosen on NCBI-disease dev), so it learns a correction of the bi-encoder's ranking rather than a ranking
from nothing: an untrained head leaves the bi-encoder's order, and a few thousand training mentions
(all a CPU affords) do not have to relearn what the bi-encoder knows. None: the cross-encoder alone.

A re-ranker folder holds the Hugging Face model and tokenizer and ``reranker.json``: how pairs are
built (`max_length`, `max_names`), `bi_temperature`, and what it was trained on: the fingerprint of the bi-encoder whose
candidates it learned to re-order and the normalizer's settings. A pipeline with another encoder or
normalizer refuses it at load.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy
import torch

from .encoder import load_pretrained, resolve_device, save_pretrained
from .errors import IndexFormatError, SapbertError
from .io import atomic_write_text
from .kb import Concept

META_FILE = "reranker.json"
FORMAT_VERSION = 1
NAME_SEPARATOR = " ; "


def trigrams(text: str) -> set:
    """The character trigrams of a string padded with spaces (a short string still has some)."""
    padded = f"  {text} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def candidate_text(query: str, concept: Concept, normalize=str, max_names: int = 4) -> str:
    """The candidate side of a pair: the canonical name, then the synonyms with the most trigrams in
    common with `query` (ties: in vocabulary order), `max_names` names in all, each normalized."""
    names = [normalize(name) for name in concept.names]
    canonical, synonyms = names[0], list(dict.fromkeys(n for n in names[1:] if n and n != names[0]))
    query_grams = trigrams(query)
    scored = sorted(range(len(synonyms)), key=lambda i: -len(query_grams & trigrams(synonyms[i])))
    return NAME_SEPARATOR.join([canonical] + [synonyms[i] for i in scored[: max_names - 1]])


def pair_truncation(tokenizer, queries: Sequence[str], max_length: int) -> str:
    """How a batch of pairs is cut to `max_length` word pieces: the candidate texts only ("only_second"), unless a
    query alone leaves its text no room (a long chemical name), which "only_second" cannot cut: then "longest_first"."""
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    longest = max((len(ids) for ids in tokenizer(sorted(set(queries)), add_special_tokens=False)["input_ids"]), default=0)
    return "only_second" if longest < room else "longest_first"


def pair_logits(model, tokenizer, queries: Sequence[str], texts: Sequence[str], max_length: int, device) -> torch.Tensor:
    """One logit per (query, text) pair through `model` (a re-ranker's, or one being trained)."""
    truncation = pair_truncation(tokenizer, queries, max_length)
    batch = tokenizer(list(queries), list(texts), truncation=truncation, max_length=max_length, padding=True, return_tensors="pt").to(device)
    return model(**batch).logits.squeeze(-1)


class Reranker:
    """A cross-encoder from a folder or hub name; `score` gives one logit per (query, candidate text) pair."""

    def __init__(
        self,
        model: Union[str, Path],
        *,
        device: str = "auto",
        batch_size: int = 64,
        max_length: Optional[int] = None,
        max_names: Optional[int] = None,
        local_files_only: bool = False,
    ):
        from transformers import AutoModelForSequenceClassification

        self.name = str(model)
        self.meta: Dict[str, Any] = read_meta(Path(self.name)) if Path(self.name).is_dir() else {}
        self.max_length = int(max_length or self.meta.get("max_length", 64))
        self.max_names = int(max_names or self.meta.get("max_names", 4))
        self.bi_temperature: Optional[float] = self.meta.get("bi_temperature")
        self.batch_size = batch_size
        self.device = resolve_device(device)
        self.tokenizer, self.model = load_pretrained(
            self.name, local_files_only=local_files_only, model_class=AutoModelForSequenceClassification, num_labels=1
        )
        self.model.to(self.device)
        self.model.eval()

    @property
    def trained_on(self) -> Dict[str, Any]:
        """The bi-encoder fingerprint and normalizer settings it was trained with (empty: untrained)."""
        return dict(self.meta.get("trained_on", {}))

    def score(self, pairs: Sequence[Tuple[str, str]]) -> numpy.ndarray:
        """float32 logits, one per (query, candidate text) pair, in order (longest pairs batched together)."""
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        scores = numpy.zeros(len(pairs), dtype="float32")
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                queries, texts = [pairs[i][0] for i in rows], [pairs[i][1] for i in rows]
                logits = pair_logits(self.model, self.tokenizer, queries, texts, self.max_length, self.device)
                scores[rows] = logits.float().cpu().numpy()
        return scores

    def save(self, folder: Union[str, Path], trained_on: Optional[Mapping[str, Any]] = None) -> None:
        """The Hugging Face folder and reranker.json (`trained_on` replaces the recorded one when given)."""
        folder = Path(folder)
        save_pretrained(folder, self.model, self.tokenizer)
        write_meta(folder, self.max_length, self.max_names, trained_on if trained_on is not None else self.trained_on, self.bi_temperature)


def write_meta(folder: Path, max_length: int, max_names: int, trained_on: Mapping[str, Any], bi_temperature: Optional[float] = None) -> None:
    meta = {
        "format_version": FORMAT_VERSION, "max_length": max_length, "max_names": max_names,
        "bi_temperature": bi_temperature, "trained_on": dict(trained_on),
    }
    atomic_write_text(folder / META_FILE, json.dumps(meta, indent=2) + "\n")


def read_meta(folder: Path) -> Dict[str, Any]:
    """reranker.json of a folder ({} for a plain Hugging Face folder, e.g. the base model to train from)."""
    path = folder / META_FILE
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise IndexFormatError(f"{path}: not a JSON file ({err})") from err
    if meta.get("format_version") != FORMAT_VERSION:
        raise IndexFormatError(f"{path}: format_version {meta.get('format_version')!r}, this spacy-sapbert reads {FORMAT_VERSION}")
    return meta


def check_trained_on(reranker: Reranker, encoder_fingerprint: str, normalizer: Mapping[str, Any], where: str) -> None:
    """SapbertError when the re-ranker was trained on another bi-encoder's candidates or other normalized text."""
    trained = reranker.trained_on
    if not trained:
        return
    if trained.get("encoder_fingerprint") != encoder_fingerprint:
        raise SapbertError(
            f"{where}: the re-ranker {reranker.name} was trained on the candidates of encoder {trained.get('encoder_fingerprint')}, "
            f"but this linker's encoder is {encoder_fingerprint}; train one for this pipeline (train-reranker)"
        )
    mismatched = {key: (trained.get("normalizer", {}).get(key), value) for key, value in normalizer.items() if trained.get("normalizer", {}).get(key) != value}
    if mismatched:
        raise SapbertError(f"{where}: the re-ranker {reranker.name} was trained on text normalized otherwise: (trained, here) {mismatched}")


def combined_logits(logits, bi_scores, bi_temperature: Optional[float]):
    """The re-ranker's logits plus the bi-encoder's scores / bi_temperature (the logits alone for None);
    numpy arrays or torch tensors."""
    return logits if bi_temperature is None else logits + bi_scores / bi_temperature


def rerank_hits(
    reranker: Reranker, queries: Sequence[str], hits: Sequence[List[Tuple[str, float]]], concept_of, normalize, k: int
) -> List[List[Tuple[str, float]]]:
    """Each query's first `k` hits re-ordered by the re-ranker's score (sigmoid of `combined_logits`, in
    [0, 1]); hits below the first `k` are left out. `concept_of(id)` gives the Concept of a hit."""
    pairs, owners, bi_scores = [], [], []
    for q, (query, query_hits) in enumerate(zip(queries, hits)):
        for concept_id, bi_score in query_hits[:k]:
            pairs.append((query, candidate_text(query, concept_of(concept_id), normalize, reranker.max_names)))
            owners.append((q, concept_id))
            bi_scores.append(bi_score)
    logits = combined_logits(reranker.score(pairs), numpy.asarray(bi_scores, dtype="float32"), reranker.bi_temperature)
    scores = 1.0 / (1.0 + numpy.exp(-logits)) if pairs else numpy.zeros(0)
    result: List[List[Tuple[str, float]]] = [[] for _ in queries]
    for (q, concept_id), score in zip(owners, scores.tolist()):
        result[q].append((concept_id, float(score)))
    return [sorted(query_hits, key=lambda hit: -hit[1]) for query_hits in result]
