"""A knowledge-graph embedding of the vocabularies' concepts, for MS loss v3 (`train --loss ms-v3`).

MS loss v3 (the Italian medical-embeddings paper) sets each pair's margins from how similar the two
concepts are in a knowledge-graph embedding space. This module trains that space with PyKEEN, the
field's library for it (TransE or RotatE, sLCWA negative sampling, checkpoints), on the triples of
`readers.relations`: OBO is_a and cross-references, MeSH tree positions and mapped-to descriptors, and
UMLS MRREL where the user has it. Entities are named as the vocabulary readers name concepts, so the
ids of a pairs file find their vectors.

Output folder (a training run, like `train`'s)::

    kge_config.json        the settings
    checkpoints/kge.pt     PyKEEN's checkpoint: a run started again with --resume continues from it
    train_log.jsonl        one line per epoch: epoch, loss
    model/                 entities.txt (one id per row), embeddings.npy (float32), kge.json (settings,
                           triple counts per relation, entity count); what `--kge` reads
"""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import numpy
import torch

from ..errors import SapbertError
from ..extras import require
from ..readers.relations import Triple, concept_relations, distinct, obo_is_a, read_mrrel, relation_counts
from .options import setting

__all__ = ["KGE_CONFIG_FILE", "KGE_MODELS", "KgeConfig", "KgeEmbeddings", "collect_triples", "train_kge"]

KGE_CONFIG_FILE = "kge_config.json"
KGE_MODELS = ("TransE", "RotatE")
MODEL_FILES = ("entities.txt", "embeddings.npy", "kge.json")
CHECKPOINT = "kge.pt"  # PyKEEN's checkpoint file in output/checkpoints


@dataclass
class KgeConfig:
    """Settings of a knowledge-graph embedding run; each field's help is its `train-kge` option's."""

    output: str = setting(help="Output folder: model/ (entities.txt, embeddings.npy, kge.json), checkpoints/, train_log.jsonl.")
    vocab: List[str] = setting([], help="Vocabulary file (repeatable; format told from the content): OBO is_a and "
                                        "xrefs, MeSH tree positions and mapped-to descriptors, alternative ids.")
    mrrel: List[str] = setting([], help="UMLS MRREL.RRF (repeatable): its relations, RELA where given, else REL.")
    model: str = setting("TransE", help="PyKEEN interaction model: TransE or RotatE.")
    dim: int = setting(128, help="Embedding dimension (RotatE: complex, so vectors of 2 x dim reals).")
    epochs: int = setting(20, help="Passes over the triples.")
    batch_size: int = setting(4096, help="Triples per batch.")
    lr: float = setting(0.01, help="Adam learning rate.")
    negatives: int = setting(4, help="Corrupted triples per true triple (sLCWA).")
    seed: int = setting(42, help="Seed of the initialisation and the negative sampling.")
    device: str = setting("auto", help="auto (CUDA when present), cpu or cuda[:N].")
    progress: bool = setting(True, help="Show PyKEEN's progress bar.")

    def validate(self) -> None:
        if self.model not in KGE_MODELS:
            raise SapbertError(f"kge setting model={self.model!r}: choose one of {list(KGE_MODELS)}")
        for key in ("dim", "epochs", "batch_size", "negatives"):
            if getattr(self, key) < 1:
                raise SapbertError(f"kge setting {key}={getattr(self, key)} must be at least 1")
        if self.lr <= 0:
            raise SapbertError(f"kge setting lr={self.lr} must be > 0")
        if not self.vocab and not self.mrrel:
            raise SapbertError("kge settings vocab and mrrel: give at least one file with relations")


def collect_triples(vocab: Sequence[str], mrrel: Sequence[str] = ()) -> List[Triple]:
    """The distinct triples of the vocabulary files (their concepts' relations, and is_a for OBO files)
    and of the MRREL files, in input order."""
    from ..readers import read_vocabulary, resolve_format

    triples: List[Triple] = []
    for path in vocab:
        format = resolve_format(path, "auto")
        triples.extend(concept_relations(read_vocabulary(path, format)))
        if format in ("obo", "obo-json"):
            triples.extend(obo_is_a(path, format))
    for path in mrrel:
        triples.extend(read_mrrel(path))
    return distinct(triples)


def safe_checkpoints(loop_class):
    """A subclass of a PyKEEN training loop class whose checkpoint is written to a temporary file and renamed into
    place (PyKEEN writes it in place: a kill while saving left a truncated kge.pt, the run's only checkpoint), and
    whose damaged checkpoint is a SapbertError naming the file, not torch's zip-reader error."""
    from ..io import atomic_write

    class SafeCheckpoints(loop_class):
        def _save_state(self, path, *args, **kwargs):
            if not isinstance(path, (str, os.PathLike)):  # a buffer: nothing to replace
                return super()._save_state(path, *args, **kwargs)
            atomic_write(Path(path), lambda tmp: super(SafeCheckpoints, self)._save_state(tmp, *args, **kwargs))

        def _load_state(self, path, *args, **kwargs):
            try:
                return super()._load_state(path, *args, **kwargs)
            except UNREADABLE as err:
                raise unreadable_checkpoint(path, err) from err

    return SafeCheckpoints


# what torch.load of a truncated or foreign file raises, and a checkpoint dict without PyKEEN's keys
UNREADABLE = (RuntimeError, EOFError, OSError, pickle.UnpicklingError, KeyError, TypeError)


def unreadable_checkpoint(path, err: BaseException) -> SapbertError:
    return SapbertError(
        f"{path}: not a readable checkpoint ({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
        "start the run again with --overwrite"
    )


def checkpoint_epochs(path: Path) -> int:
    """The epochs PyKEEN's checkpoint at `path` has finished (read memory-mapped: its embedding can be large)."""
    try:
        return int(torch.load(path, map_location="cpu", weights_only=False, mmap=True)["epoch"])
    except UNREADABLE as err:
        raise unreadable_checkpoint(path, err) from err


def train_kge(config: KgeConfig, resume: bool = False) -> Path:
    """Train the embedding; the path of output/model. resume=True continues from PyKEEN's checkpoint; without
    it an existing checkpoint is refused (never deleted: `train-kge --overwrite` clears a run of ours)."""
    from ..encoder import resolve_device
    from ..io import atomic_write_text
    from .checkpoints import write_dir
    from .loop import check_resumed_settings

    config.validate()
    output = Path(config.output)
    checkpoints = output / "checkpoints"
    checkpoint = checkpoints / CHECKPOINT
    if checkpoint.exists() and not resume:  # PyKEEN would quietly continue from it
        raise SapbertError(
            f"{checkpoint}: an earlier run's checkpoint; continue it with resume (--resume), or start again with --overwrite"
        )
    if checkpoint.exists() and (output / KGE_CONFIG_FILE).exists():  # PyKEEN's checkpoint has the entities and shapes
        recorded = {"config": json.loads((output / KGE_CONFIG_FILE).read_text(encoding="utf8"))}
        check_resumed_settings(
            config, recorded, checkpoint, ("batch_size", "lr", "negatives", "seed"), ("model", "dim", "vocab", "mrrel"),
            progress=lambda state: (checkpoint_epochs(checkpoint), config.epochs, "epochs"),
        )
    models, training, triples_module = (require(f"pykeen.{name}") for name in ("models", "training", "triples"))

    triples = collect_triples(config.vocab, config.mrrel)
    if not triples:
        raise SapbertError(f"kge: no relations in {', '.join(list(config.vocab) + list(config.mrrel))}")
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_text(output / KGE_CONFIG_FILE, json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    factory = triples_module.TriplesFactory.from_labeled_triples(numpy.array(triples, dtype=str))
    model_class = getattr(models, config.model)  # TransE or RotatE (validated)
    device = resolve_device(config.device)
    model = model_class(triples_factory=factory, embedding_dim=config.dim, random_seed=config.seed).to(device)
    loop = safe_checkpoints(training.SLCWATrainingLoop)(
        model=model, triples_factory=factory, optimizer="Adam", optimizer_kwargs={"lr": config.lr},
        negative_sampler_kwargs={"num_negs_per_pos": config.negatives},
    )
    losses = loop.train(
        triples_factory=factory, num_epochs=config.epochs, batch_size=config.batch_size, use_tqdm=config.progress,
        checkpoint_name=CHECKPOINT, checkpoint_directory=str(checkpoints), checkpoint_frequency=0, checkpoint_on_failure=True,
    ) or []
    atomic_write_text(output / "train_log.jsonl", "".join(
        json.dumps({"epoch": epoch, "loss": round(float(loss), 6)}) + "\n" for epoch, loss in enumerate(losses, 1)
    ))
    vectors = model.entity_representations[0](indices=None).detach().cpu()
    if vectors.is_complex():
        vectors = torch.view_as_real(vectors).reshape(len(vectors), -1)
    entities = sorted(factory.entity_to_id, key=factory.entity_to_id.__getitem__)
    record = {
        "settings": dataclasses.asdict(config), "entities": len(entities), "triples": len(triples),
        "relations": relation_counts(triples), "final_loss": round(float(losses[-1]), 6) if losses else None,
    }

    def fill(folder: Path) -> None:
        (folder / "entities.txt").write_text("".join(f"{entity}\n" for entity in entities), encoding="utf8")
        numpy.save(folder / "embeddings.npy", vectors.numpy().astype(numpy.float32))
        (folder / "kge.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")

    write_dir(output / "model", fill)
    return output / "model"


class KgeEmbeddings:
    """The unit vectors of a trained knowledge-graph embedding (output/model of `train-kge`), looked up by
    concept id; `similarity` gives NaN for a concept without one (the loss then keeps v2's margins)."""

    def __init__(self, folder: str):
        self.folder = Path(folder)
        missing = [name for name in MODEL_FILES if not (self.folder / name).is_file()]
        if missing:
            raise SapbertError(f"{self.folder}: not a knowledge-graph embedding from train-kge (missing {', '.join(missing)})")
        entities = (self.folder / "entities.txt").read_text(encoding="utf8").splitlines()
        try:
            vectors = numpy.load(self.folder / "embeddings.npy")
        except (ValueError, OSError, EOFError) as err:
            raise SapbertError(f"{self.folder / 'embeddings.npy'}: not a numpy array file ({err}); train-kge writes it") from err
        if vectors.ndim != 2 or len(vectors) != len(entities):
            raise SapbertError(
                f"{self.folder / 'embeddings.npy'}: {vectors.shape} does not fit the {len(entities)} rows of entities.txt"
            )
        norms = numpy.linalg.norm(vectors, axis=1, keepdims=True)
        self.vectors = torch.from_numpy(vectors / numpy.maximum(norms, 1e-12))
        self.row = {entity: row for row, entity in enumerate(entities)}
        self.meta: Dict[str, Any] = json.loads((self.folder / "kge.json").read_text(encoding="utf8"))

    def similarity(self, concept_ids: Sequence[str]) -> torch.Tensor:
        """(m, m) cosine similarities of the concepts' vectors; NaN where a concept has no vector."""
        rows = [self.row.get(concept_id, -1) for concept_id in concept_ids]
        known = torch.tensor([row >= 0 for row in rows])
        vectors = self.vectors[torch.tensor([max(row, 0) for row in rows], dtype=torch.long)]
        similarity = vectors @ vectors.T
        return similarity.masked_fill(~(known[:, None] & known[None, :]), float("nan"))

    def coverage(self, concept_ids: Iterable[str]) -> Tuple[int, int]:
        """(ids with a vector, distinct ids) of `concept_ids`."""
        distinct_ids = set(concept_ids)
        return sum(1 for concept_id in distinct_ids if concept_id in self.row), len(distinct_ids)

