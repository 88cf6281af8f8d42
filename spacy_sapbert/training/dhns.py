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

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import faiss
import numpy
import torch
import torch.nn.functional as F

from ..context import MIN_WINDOW, MentionInContext, context_vectors, infer_context_vectors
from ..encoder import POOLINGS, embed_texts, infer_vectors
from ..errors import SapbertError
from ..extras import require
from ..index import name_table
from ..kb import Concept
from ..normalizer import Normalizer
from .checkpoints import CPU_BF16_HELP, require_at_least_one
from ..io import file_digest
from .loop import LossWindow, TrainingRun
from .options import setting

__all__ = ["DhnsConfig", "MinedExample", "info_nce_loss", "load_examples", "mine_examples", "train_dhns"]

CONFIG_FILE = "dhns_config.json"
# resuming with another value of these warns; with another context_window (marker rows in the embeddings) is an error
TRAJECTORY_KEYS = (
    "corpora", "vocab", "vocab_format", "mesh_trees", "labels", "spell_check", "remove_punctuation", "batch_size",
    "hard_negatives", "temperature", "lr", "weight_decay", "encode_chunk", "seed",
)
FIXED_KEYS = ("model", "pooling", "max_length", "context_window")  # what the model is: a resume may not change them
Query = Union[str, MentionInContext]  # a training mention: normalized text, or the mention in its document


@dataclass
class DhnsConfig:
    """Settings of a DHNS fine-tuning run (defaults: the kNN-BioEL paper where it gives them); each
    field's help text is also its `train-dhns` command-line option's. `spell_check` and
    `remove_punctuation` make the Normalizer of mentions and names: build the pipeline with the same.
    """

    model: str = setting(help="Encoder to fine-tune: local Hugging Face folder (e.g. a SAP model) or hub name.")
    output: str = setting(help="Output folder: model/, checkpoints/last/, train_log.jsonl, loss.png.")
    corpora: List[str] = setting(help="Annotated PubTator training corpora (e.g. NCBItrainset_corpus.txt).", argument=True)
    vocab: List[str] = setting(help="Vocabulary file(s) of the gold ids (MEDIC, MeSH TSV, OBO, ...).")
    vocab_format: str = setting("auto", help="Format of every --vocab.")
    mesh_trees: List[str] = setting([], help="Keep only MeSH descriptors under these tree letters.")
    labels: List[str] = setting([], help="Only mentions with these corpus labels (e.g. Disease).", flags=("--label",))
    spell_check: Optional[str] = setting(None, help="misspelling||correction file applied to mentions (BioSyn's NCBI list).")
    remove_punctuation: bool = setting(
        True, help="Punctuation to spaces in mentions and names (BioSyn); build the pipeline with the same.",
        flags=("--remove-punctuation/--keep-punctuation",),
    )
    pooling: str = setting("cls", help="cls (SapBERT) or mean.")
    max_length: int = setting(25, help="Word pieces per mention or name.")
    context_window: int = setting(0, help="Encode each training mention inside its document, marked [Ms] ... [Me] in a "
                                          "window of this many word pieces and mean-pooled over its own pieces (names "
                                          "stay context-free; link with the same `context_window`); 0: mentions alone.")
    batch_size: int = setting(32, help="Mentions per step.")
    hard_negatives: int = setting(4, help="Hard negatives per mention (p), mined every epoch.")
    temperature: float = setting(0.01, help="InfoNCE temperature (tau).")
    lr: float = setting(2e-5, help="AdamW learning rate.")
    weight_decay: float = setting(0.01, help="AdamW weight decay.")
    epochs: int = setting(3, help="Epochs; the name index and the hard negatives are rebuilt at the start of each.")
    encode_chunk: int = setting(64, help="Texts per forward pass, sorted by length to cut padding.")
    seed: int = setting(42, help="Seed of the data order and of dropout.")
    log_every: int = setting(10, help="Append to train_log.jsonl every N steps.")
    device: str = setting("auto", help="auto (CUDA when present), cpu or cuda[:N].")
    amp: bool = setting(True, help="Mixed precision (CUDA only).")
    cpu_bf16: bool = setting(False, help=CPU_BF16_HELP)
    progress: bool = setting(True, help="Show progress bars.")

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
        if self.context_window and self.context_window < MIN_WINDOW:
            raise SapbertError(f"training setting context_window={self.context_window}: 0 (off) or at least {MIN_WINDOW} word pieces")


@dataclass
class MinedExample:
    """One training mention with its candidates for an epoch (texts, and concept rows for masking)."""

    query: Query
    concept: int
    positive: str
    negatives: List[str]
    negative_owners: List[List[int]]  # every concept that has each negative name (a name two concepts share has two)
    positive_owners: List[int]  # every concept that has the positive name: the gold concept, and any that shares it


# data ---------------------------------------------------------------------------------------------


def no_examples_error(config: DhnsConfig) -> SapbertError:
    """The error for training corpora none of whose mentions (of the labels) has a gold id in the vocabulary."""
    labels = f" with the labels {config.labels}" if config.labels else ""
    return SapbertError(f"no training mention of {config.corpora}{labels} has a gold id in the vocabulary {config.vocab}")


def load_examples(config: DhnsConfig) -> Tuple[List[Concept], List[Tuple[Query, str]]]:
    """The preprocessed vocabulary and the distinct (mention, concept id) examples of the corpora: the
    normalized mention string, or with `context_window` the mention in its document (`context_examples`)."""
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
    if config.context_window:
        return concepts, context_examples(config, kb)
    examples: Dict[Tuple[Query, str], None] = {}
    for corpus in config.corpora:
        mentions, _, _ = read_corpus(Path(corpus), detect_corpus_format(Path(corpus)), prep, config.labels or None)
        for concept_id, text in training_names(mentions, kb):
            query = normalizer.query(text)
            if query:
                examples[query, concept_id] = None
    if not examples:
        raise no_examples_error(config)
    return concepts, list(examples)


def context_examples(config: DhnsConfig, kb) -> List[Tuple[Query, str]]:
    """(mention in its document, primary concept id) for every annotated mention of the corpora whose gold
    resolves to one concept (`resolve_gold_id`); the text is left as written (the context carries what
    normalization and abbreviation resolution would add)."""
    from ..preprocess import resolve_gold_id
    from ..readers.corpora import read_pubtator

    def primary_id(concept_id: str) -> Optional[str]:
        concept = kb.get(concept_id)
        return concept.id if concept is not None else None

    examples: Dict[Tuple[Query, str], None] = {}
    for corpus in config.corpora:
        for document in read_pubtator(corpus):
            for mention in document.mentions:
                if config.labels and mention.label not in config.labels:
                    continue
                concept_id, _ = resolve_gold_id(mention.gold, primary_id)
                if concept_id is not None:
                    examples[MentionInContext(document.text, mention.start, mention.end), concept_id] = None
    if not examples:
        raise no_examples_error(config)
    return list(examples)


class NameSpace:
    """The vocabulary's distinct names, which concepts own each name, and which names each concept has."""

    def __init__(self, concepts: Sequence[Concept]):
        self.concepts = list(concepts)
        self.names, self.links = name_table(self.concepts, Normalizer(lowercase=False))
        self.rows = {concept.id: row for row, concept in enumerate(self.concepts)}
        self.names_of: Dict[int, List[int]] = {}
        for name_row, concept_row in zip(*(pairs.tolist() for pairs in self.links.pairs())):
            self.names_of.setdefault(concept_row, []).append(name_row)

    def owners(self, name_row: int) -> List[int]:
        return self.links.concepts_of(name_row)


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
        negative_owners: List[List[int]] = []
        used = {gold}
        for name_row in rows:
            if len(negatives) == hard_negatives or name_row < 0:
                break
            owners = space.owners(name_row)
            if gold in owners or all(o in used for o in owners):
                continue
            used.update(owners)
            negatives.append(space.names[name_row])
            negative_owners.append(list(owners))
        mined.append(MinedExample(query, gold, space.names[positive], negatives, negative_owners, list(space.owners(positive))))
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
    its positive is masked out (it is no negative). `candidate_concepts`: (C,) concept rows, or (C, m) rows of
    every concept that has the candidate's name, padded with -1 (a name shared by two concepts is no negative
    for either). Mean over the queries.
    """
    batch = queries.shape[0]
    logits = F.normalize(queries.float(), dim=-1) @ F.normalize(candidates.float(), dim=-1).T / temperature
    targets = torch.arange(batch, device=queries.device)
    owners = candidate_concepts if candidate_concepts.dim() == 2 else candidate_concepts[:, None]
    same = (query_concepts[:, None, None] == owners[None, :, :]).any(dim=-1)
    same[targets, targets] = False
    return F.cross_entropy(logits.masked_fill(same, float("-inf")), targets)


# training -----------------------------------------------------------------------------------------


MINING_CHUNK = 256  # texts per forward pass when all names and mentions are encoded for mining


def _encode_all(model, tokenizer, texts: Sequence[Query], config: DhnsConfig, device, desc: str) -> numpy.ndarray:
    """Unit vectors of `texts` (names, or mentions in context) under the current model, without gradients."""
    model.eval()
    try:
        if texts and isinstance(texts[0], MentionInContext):
            return infer_context_vectors(model, tokenizer, texts, window=config.context_window, device=device,
                                         chunk_size=MINING_CHUNK, normalize=True)
        return infer_vectors(
            model, tokenizer, texts, max_length=config.max_length, pooling=config.pooling, device=device,
            chunk_size=MINING_CHUNK, normalize=True, progress=desc if config.progress else None,
        )
    finally:
        model.train()


def _encode_batch(model, tokenizer, batch: Sequence[MinedExample], config: DhnsConfig, device) -> torch.Tensor:
    """Vectors of a batch's queries, then their positives, then all hard negatives (the forward pass);
    queries in context go through `context_vectors`, names always alone."""
    names = [e.positive for e in batch] + [text for example in batch for text in example.negatives]
    queries = [e.query for e in batch]

    def alone(texts: Sequence[str]) -> torch.Tensor:
        return embed_texts(model, tokenizer, texts, max_length=config.max_length, pooling=config.pooling, device=device,
                           chunk_size=config.encode_chunk)

    if isinstance(queries[0], MentionInContext):
        return torch.cat([context_vectors(model, tokenizer, queries, window=config.context_window, device=device), alone(names)])
    return alone(queries + names)


def _batch_loss(vectors: torch.Tensor, batch: Sequence[MinedExample], temperature: float, device) -> torch.Tensor:
    """InfoNCE of a batch from `_encode_batch`'s vectors, in float32 (outside autocast)."""
    size = len(batch)
    query_concepts = torch.tensor([e.concept for e in batch], device=device)
    owners = [e.positive_owners for e in batch] + [o for e in batch for o in e.negative_owners]
    width = max(len(row) for row in owners)
    candidate_concepts = torch.tensor([row + [-1] * (width - len(row)) for row in owners], device=device)
    return info_nce_loss(vectors[:size], vectors[size:], query_concepts, candidate_concepts, temperature)


def train_dhns(config: DhnsConfig, resume: bool = False) -> Path:
    """Fine-tune `config.model` with DHNS; returns the output model folder.

    resume=True continues after the last finished epoch (output/checkpoints/last); an epoch that was
    interrupted is run again from its start. Resuming with another context_window is an error, with other
    data or optimization settings a TrainingWarning.
    """
    from tqdm import tqdm

    config.validate()
    require("matplotlib")  # the loss plot is drawn at the end: fail before training, not after
    concepts, examples = load_examples(config)
    space = NameSpace(concepts)
    # 0.2's DHNS optimizer held every parameter, the unused pooler's too: keep it so its checkpoints resume
    run = TrainingRun.start(
        config, config_file=CONFIG_FILE, resume=resume, freeze_pooler=False, trajectory_keys=TRAJECTORY_KEYS, fixed_keys=FIXED_KEYS,
        inputs={
            **{key: [file_digest(path) for path in getattr(config, key)] for key in ("corpora", "vocab")},
            **({"spell_check": file_digest(config.spell_check)} if config.spell_check else {}),
        },
        progress=lambda state: (state.get("epoch", 0), config.epochs, "epochs"),
    )
    model, tokenizer, device = run.model, run.tokenizer, run.device
    step = run.state.get("step", 0)
    queries = [query for query, _ in examples]
    for epoch in range(run.state.get("epoch", 0), config.epochs):
        with run.autocast():  # mining reads only the ranking of names, so it runs at the forward pass's precision
            name_vectors = _encode_all(model, tokenizer, space.names, config, device, f"epoch {epoch + 1}: encoding names")
            query_vectors = _encode_all(model, tokenizer, queries, config, device, f"epoch {epoch + 1}: encoding mentions")
        mined, top1 = mine_examples(space, name_vectors, examples, query_vectors, config.hard_negatives)
        del name_vectors
        run.log({"step": step, "epoch": epoch, "mined": len(mined), "train_name_top1": round(top1, 4)})
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
        order = torch.randperm(len(mined), generator=generator).tolist()
        batches = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
        window = LossWindow()
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{config.epochs}", unit="step", disable=not config.progress, file=sys.stderr)
        for position, rows in enumerate(bar):
            batch = [mined[i] for i in rows]
            with run.autocast():
                vectors = _encode_batch(model, tokenizer, batch, config, device)
            loss = _batch_loss(vectors, batch, config.temperature, device)
            run.backward(loss)
            run.update()
            step += 1
            window.add(float(loss.detach()), len(rows))
            bar.set_postfix(loss=f"{window.losses[-1]:.4f}")
            if step % config.log_every == 0 or position == len(batches) - 1:
                run.log(window.entry(step, epoch, run.elapsed()))
        bar.close()
        run.save_checkpoint({"epoch": epoch + 1, "step": step})
    return run.finish(title="DHNS fine-tuning", ylabel="InfoNCE loss")
