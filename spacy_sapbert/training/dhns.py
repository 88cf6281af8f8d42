"""Fine-tuning on annotated mentions with dynamic hard negatives (kNN-BioEL, Lin et al., ICASSP 2024).

Each training mention is pulled towards its gold concept and pushed away from others by an InfoNCE
loss (temperature 0.01). For every mention of a batch the candidates are:

* its positive: the gold concept's name nearest to the mention;
* `hard_negatives` (p) hard negatives: the nearest names of other concepts, one per concept;
* in-batch negatives: the positives and hard negatives of the batch's other mentions (candidates of
  the mention's own concept are masked out, so another mention's positive is never a negative).

Positives and hard negatives are mined at the start of every epoch from a faiss index of all the
vocabulary's names encoded by the current model, so the negatives follow the model ("dynamic").
Mentions and names are preprocessed as in the evaluation (abbreviations resolved from the document,
then the `Normalizer`: lowercase, punctuation to spaces unless `remove_punctuation` is off, optional
spell-check list); build the pipeline with the same normalization (`build-index --remove-punctuation
--spell-check ...`) so that it serves what was trained. Each
distinct (mention, concept) pair is one training example (BioSyn also drops duplicate queries).

Output folder: ``model/`` (Hugging Face folder for the linker), ``train_log.jsonl`` (loss per logged
step; per epoch how often the gold concept's name was the nearest name), ``loss.png``,
``dhns_config.json``, ``checkpoints/last`` (after every epoch; ``resume`` continues from it).
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import faiss
import numpy
import torch
import torch.nn.functional as F

from ..encoder import POOLINGS, embed_texts, infer_vectors, load_pretrained, resolve_device
from ..errors import SapbertError
from ..extras import require
from ..index import NameLinks, name_table
from ..io import atomic_write_text
from ..kb import Concept
from ..normalizer import Normalizer
from .checkpoints import (
    STATE_FILE, MixedPrecision, append_log, find_checkpoint, plot_loss, require_at_least_one, restart_log, rng_state, save_model,
    seed_everything, set_rng_state, write_dir,
)

__all__ = ["DhnsConfig", "MinedExample", "info_nce_loss", "load_examples", "mine_examples", "train_dhns"]

LOG_FILE, LOSS_PLOT, CONFIG_FILE = "train_log.jsonl", "loss.png", "dhns_config.json"


@dataclass
class DhnsConfig:
    """Settings of a DHNS fine-tuning run (defaults: the kNN-BioEL paper where it gives them).

    corpora: annotated PubTator training corpora; vocab: vocabulary files (`vocab_format`,
    `mesh_trees` as in `evaluate`); labels: only mentions of these types; spell_check: a
    misspelling||correction file and remove_punctuation: the Normalizer of mentions and names
    (build the pipeline with the same). batch_size: mentions per step;
    hard_negatives: p; temperature: InfoNCE tau; encode_chunk: texts per forward pass.
    """

    model: str
    output: str
    corpora: List[str]
    vocab: List[str]
    vocab_format: str = "auto"
    mesh_trees: List[str] = field(default_factory=list)
    labels: List[str] = field(default_factory=list)
    spell_check: Optional[str] = None
    remove_punctuation: bool = True
    pooling: str = "cls"
    max_length: int = 25
    batch_size: int = 32
    hard_negatives: int = 4
    temperature: float = 0.01
    lr: float = 2e-5
    weight_decay: float = 0.01
    epochs: int = 3
    encode_chunk: int = 64
    seed: int = 42
    log_every: int = 10
    device: str = "auto"
    amp: bool = True
    progress: bool = True

    def validate(self) -> None:
        """Raise SapbertError naming the setting for an impossible value."""
        require_at_least_one(self, ("batch_size", "epochs", "encode_chunk", "log_every"))
        if self.hard_negatives < 0:
            raise SapbertError(f"training setting hard_negatives={self.hard_negatives} must be >= 0")
        if self.temperature <= 0 or self.lr <= 0:
            raise SapbertError("training settings temperature and lr must be > 0")
        if self.pooling not in POOLINGS:
            raise SapbertError(f"training setting pooling={self.pooling!r}: choose one of {list(POOLINGS)}")
        if not self.corpora or not self.vocab:
            raise SapbertError("training settings corpora and vocab need at least one file each")


@dataclass
class MinedExample:
    """One training mention with its candidates for an epoch (texts, and concept rows for masking)."""

    query: str
    concept: int
    positive: str
    negatives: List[str]
    negative_concepts: List[int]


# data ---------------------------------------------------------------------------------------------


def load_examples(config: DhnsConfig) -> Tuple[List[Concept], List[Tuple[str, str]]]:
    """The preprocessed vocabulary and the distinct (mention, concept id) examples of the corpora."""
    from ..evaluation import Preprocessing, normalized_concepts, read_corpus, training_names
    from ..kb import KnowledgeBase
    from ..readers import detect_corpus_format, read_spell_check, read_vocabularies, vocabulary_specs

    prep = Preprocessing(
        remove_punctuation=config.remove_punctuation,
        spell_check=read_spell_check(config.spell_check) if config.spell_check else {},
    )
    normalizer = prep.normalizer
    vocabulary = read_vocabularies(vocabulary_specs(config.vocab, config.vocab_format, config.mesh_trees))
    concepts = normalized_concepts(vocabulary, normalizer)
    kb = KnowledgeBase(concepts)
    examples: Dict[Tuple[str, str], None] = {}
    for corpus in config.corpora:
        mentions, _, _ = read_corpus(Path(corpus), detect_corpus_format(Path(corpus)), prep, config.labels or None)
        for concept_id, text in training_names(mentions, kb):
            query = normalizer.query(text)
            if query:
                examples[query, concept_id] = None
    if not examples:
        raise SapbertError(f"no training mention of {config.corpora} has a gold id in the vocabulary {config.vocab}")
    return concepts, list(examples)


class NameSpace:
    """The vocabulary's distinct names, which concepts own each name, and which names each concept has."""

    def __init__(self, concepts: Sequence[Concept]):
        self.concepts = list(concepts)
        self.names, pair_names, pair_concepts = name_table(self.concepts, Normalizer(lowercase=False))
        self.links = NameLinks(pair_names, pair_concepts, len(self.names))
        self.rows = {concept.id: row for row, concept in enumerate(self.concepts)}
        self.names_of: Dict[int, List[int]] = {}
        for name_row, concept_row in zip(pair_names.tolist(), pair_concepts.tolist()):
            self.names_of.setdefault(concept_row, []).append(name_row)

    def owners(self, name_row: int) -> List[int]:
        return self.links.pair_concepts[self.links.offsets[name_row] : self.links.offsets[name_row + 1]].tolist()


def mine_examples(
    space: NameSpace,
    name_vectors: numpy.ndarray,
    examples: Sequence[Tuple[str, str]],
    query_vectors: numpy.ndarray,
    hard_negatives: int,
) -> Tuple[List[MinedExample], float]:
    """Each example's positive and hard negatives under the current vectors (unit rows, inner product).

    Returns the mined examples and the share of examples whose nearest name is one of the gold
    concept's names (a training-set acc@1 at the name level, logged per epoch).
    """
    index = faiss.IndexFlatIP(name_vectors.shape[1])
    index.add(name_vectors)
    depth = min(index.ntotal, 8 * hard_negatives + 32)
    _, nearest = index.search(query_vectors, depth)
    mined = []
    top1 = 0
    for (query, concept_id), vector, rows in zip(examples, query_vectors, nearest.tolist()):
        gold = space.rows[concept_id]
        gold_names = space.names_of[gold]
        positive = gold_names[int(numpy.argmax(name_vectors[gold_names] @ vector))]
        top1 += int(gold in space.owners(rows[0]))
        negatives: List[str] = []
        negative_concepts: List[int] = []
        used = {gold}
        for name_row in rows:
            if len(negatives) == hard_negatives or name_row < 0:
                break
            owners = space.owners(name_row)
            if gold in owners or all(o in used for o in owners):
                continue
            used.update(owners)
            negatives.append(space.names[name_row])
            negative_concepts.append(next(o for o in owners if o != gold))
        mined.append(MinedExample(query, gold, space.names[positive], negatives, negative_concepts))
    return mined, top1 / max(len(examples), 1)


def info_nce_loss(
    queries: torch.Tensor,
    candidates: torch.Tensor,
    query_concepts: torch.Tensor,
    candidate_concepts: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """InfoNCE of B queries over C candidates whose first B rows are the queries' positives.

    Cosine similarities divided by `temperature`; a candidate of the query's own concept other than
    its positive is masked out (it is no negative). Mean over the queries.
    """
    batch = queries.shape[0]
    logits = F.normalize(queries.float(), dim=-1) @ F.normalize(candidates.float(), dim=-1).T / temperature
    targets = torch.arange(batch, device=queries.device)
    same = query_concepts[:, None] == candidate_concepts[None, :]
    same[targets, targets] = False
    return F.cross_entropy(logits.masked_fill(same, float("-inf")), targets)


# training -----------------------------------------------------------------------------------------


MINING_CHUNK = 256  # texts per forward pass when all names and mentions are encoded for mining


def _encode_all(model, tokenizer, texts: Sequence[str], config: DhnsConfig, device, desc: str) -> numpy.ndarray:
    """Unit vectors of `texts` under the current model, without gradients (`infer_vectors`)."""
    model.eval()
    try:
        return infer_vectors(
            model, tokenizer, texts, max_length=config.max_length, pooling=config.pooling, device=device,
            chunk_size=MINING_CHUNK, normalize=True, progress=desc if config.progress else None,
        )
    finally:
        model.train()


def _batch_loss(model, tokenizer, batch: Sequence[MinedExample], config: DhnsConfig, device) -> torch.Tensor:
    negatives = [text for example in batch for text in example.negatives]
    texts = [e.query for e in batch] + [e.positive for e in batch] + negatives
    vectors = embed_texts(
        model, tokenizer, texts, max_length=config.max_length, pooling=config.pooling, device=device,
        chunk_size=config.encode_chunk,
    )
    size = len(batch)
    query_concepts = torch.tensor([e.concept for e in batch], device=device)
    candidate_concepts = torch.tensor(
        [e.concept for e in batch] + [c for e in batch for c in e.negative_concepts], device=device
    )
    return info_nce_loss(vectors[:size], vectors[size:], query_concepts, candidate_concepts, config.temperature)


def train_dhns(config: DhnsConfig, resume: bool = False) -> Path:
    """Fine-tune `config.model` with DHNS; returns the output model folder.

    resume=True continues after the last finished epoch (output/checkpoints/last); an epoch that was
    interrupted is run again from its start.
    """
    from tqdm import tqdm

    config.validate()
    require("matplotlib")  # the loss plot is drawn at the end: fail before training, not after
    output = Path(config.output)
    log_path = output / LOG_FILE
    device = resolve_device(config.device)
    concepts, examples = load_examples(config)
    space = NameSpace(concepts)

    checkpoint = find_checkpoint(output) if resume else None
    seed_everything(config.seed)
    tokenizer, model = load_pretrained(str(checkpoint) if checkpoint is not None else config.model)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    precision = MixedPrecision(device, config.amp)
    first_epoch, step, elapsed_before = 0, 0, 0.0
    if checkpoint is not None:
        state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf8"))
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=True))
        set_rng_state(torch.load(checkpoint / "rng.pt", weights_only=True))
        precision.load(checkpoint)
        first_epoch, step, elapsed_before = state["epoch"], state["step"], state["elapsed"]
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_text(output / CONFIG_FILE, json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    restart_log(log_path, step if checkpoint is not None else None)

    started = time.perf_counter()
    queries = [query for query, _ in examples]
    for epoch in range(first_epoch, config.epochs):
        name_vectors = _encode_all(model, tokenizer, space.names, config, device, f"epoch {epoch + 1}: encoding names")
        query_vectors = _encode_all(model, tokenizer, queries, config, device, f"epoch {epoch + 1}: encoding mentions")
        mined, top1 = mine_examples(space, name_vectors, examples, query_vectors, config.hard_negatives)
        del name_vectors
        append_log(log_path, {"step": step, "epoch": epoch, "mined": len(mined), "train_name_top1": round(top1, 4)})
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
        order = torch.randperm(len(mined), generator=generator).tolist()
        batches = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
        window, window_start = [], time.perf_counter()
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{config.epochs}", unit="step", disable=not config.progress, file=sys.stderr)
        for position, rows in enumerate(bar):
            optimizer.zero_grad(set_to_none=True)
            with precision.autocast():
                loss = _batch_loss(model, tokenizer, [mined[i] for i in rows], config, device)
            precision.backward(loss)
            precision.step(optimizer)
            step += 1
            window.append((float(loss.detach()), len(rows)))
            bar.set_postfix(loss=f"{window[-1][0]:.4f}")
            if step % config.log_every == 0 or position == len(batches) - 1:
                now = time.perf_counter()
                append_log(log_path, {
                    "step": step,
                    "epoch": epoch,
                    "loss": round(sum(v for v, _ in window) / len(window), 6),
                    "mentions_per_s": round(sum(n for _, n in window) / max(now - window_start, 1e-9), 2),
                    "elapsed": round(elapsed_before + now - started, 3),
                })
                window, window_start = [], now
        bar.close()
        elapsed = elapsed_before + time.perf_counter() - started
        _save_checkpoint(output, model, tokenizer, optimizer, precision, config, epoch + 1, step, elapsed)

    write_dir(output / "model", lambda folder: save_model(folder, model, tokenizer, config.pooling, config.max_length))
    plot_loss(log_path, output / LOSS_PLOT, title="DHNS fine-tuning", ylabel="InfoNCE loss")
    return output / "model"


def _save_checkpoint(
    output: Path, model, tokenizer, optimizer, precision: MixedPrecision, config: DhnsConfig, epoch: int, step: int, elapsed: float
) -> None:
    record = {"epoch": epoch, "step": step, "elapsed": elapsed, "config": dataclasses.asdict(config)}
    states = rng_state()

    def fill(folder: Path) -> None:
        save_model(folder, model, tokenizer, config.pooling, config.max_length)
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        precision.save(folder)
        torch.save(states, folder / "rng.pt")
        (folder / STATE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")

    write_dir(output / "checkpoints" / "last", fill)
