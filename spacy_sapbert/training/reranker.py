"""Training the cross-encoder re-ranker (`train-reranker`) on the candidates a saved pipeline's linker gives.

Each distinct (mention, gold concept) of the annotated corpora becomes one group: the gold concept
first, then the linker's other top candidates (`candidates` in all), as `sapbert_linker` would hand
them to the re-ranker in the pipeline (same index, normalizer, filters and memory). The gold concept is
put in even when the linker missed it, so every group has its positive; its hard negatives are the
concepts the bi-encoder ranked nearest. The loss is the cross-entropy of the gold candidate among its
group (softmax over the group's logits). Mentions whose gold concept is not in the vocabulary, and
combinations "A+B", are counted and left out, never used as negatives.

With `context_words`, a group keeps where each of its mentions was written, and each epoch reads the
group's mention in one of those places (drawn by the seed and the epoch): the candidates do not depend
on the context, and a string written 40 times stays one group, not 40.

Output folder: ``model/`` (the re-ranker: Hugging Face folder + reranker.json, recording the linker's
encoder fingerprint and normalizer), ``train_log.jsonl``, ``loss.png``, ``reranker_config.json``,
``checkpoints/last`` (after every epoch; ``resume`` continues from it).
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..context import MentionInContext
from ..errors import SapbertError
from ..extras import require
from ..preprocess import gold_ids, resolve_gold_id
from ..reranker import bi_encoder_record, candidate_text, combined_logits, default_max_length, mention_side, pair_logits, write_meta
from .checkpoints import CPU_BF16_HELP, require_at_least_one
from ..io import file_digest
from .loop import LossWindow, TrainingRun
from .options import setting

__all__ = ["Group", "RerankerConfig", "concept_score", "group_loss", "mine_groups", "train_reranker"]

CONFIG_FILE = "reranker_config.json"
# resuming with another value of these warns (context_words and the pair length: an error, RerankerRun._load_model)
TRAJECTORY_KEYS = ("corpora", "labels", "candidates", "max_names", "bi_temperature", "batch_size", "lr", "weight_decay", "seed")
FIXED_KEYS = ("model", "pipeline", "component")  # the checkpoint's weights and the candidates it learned: an error


@dataclass
class RerankerConfig:
    """Settings of a re-ranker training run; each field's help is its `train-reranker` option's."""

    model: str = setting(help="Model to start from: a Hugging Face folder or hub name (e.g. the pipeline's encoder).")
    pipeline: str = setting(help="Saved pipeline whose sapbert_linker gives the candidates (the pipeline the re-ranker will join).")
    output: str = setting(help="Output folder: model/, checkpoints/last/, train_log.jsonl, loss.png.")
    corpora: List[str] = setting(help="Annotated PubTator training corpora (e.g. NCBItrainset_corpus.txt).", argument=True)
    component: Optional[str] = setting(None, help="The sapbert_linker of the pipeline, when it has several.")
    labels: List[str] = setting([], help="Only mentions with these corpus labels.", flags=("--label",))
    candidates: int = setting(10, help="Candidates per mention (the gold one included); use the pipeline's rerank_k.")
    max_length: Optional[int] = setting(None, help="Word pieces per (mention, candidate) pair (default: 64, or 128 with --context-words).")
    context_words: int = setting(0, help="Words of the mention's document read on each side of it, in training and in the pipeline (0: the mention alone).")
    max_names: int = setting(4, help="Names of a candidate in its text: canonical name, then the synonyms most like the mention.")
    bi_temperature: Optional[float] = setting(
        0.1, help="Add the linker's score / this to the re-ranker's logit, in training and in the pipeline (a learned correction); 0: the cross-encoder alone."
    )
    batch_size: int = setting(8, help="Mentions (groups of candidates) per step.")
    lr: float = setting(5e-5, help="AdamW learning rate.")
    weight_decay: float = setting(0.01, help="AdamW weight decay.")
    epochs: int = setting(2, help="Passes over the groups.")
    seed: int = setting(42, help="Seed of the data order, the new head and dropout.")
    log_every: int = setting(10, help="Append to train_log.jsonl every N steps.")
    device: str = setting("auto", help="auto (CUDA when present), cpu or cuda[:N].")
    amp: bool = setting(True, help="Mixed precision (CUDA only).")
    cpu_bf16: bool = setting(False, help=CPU_BF16_HELP)
    progress: bool = setting(True, help="Show progress bars.")

    def validate(self) -> None:
        require_at_least_one(self, ("batch_size", "epochs", "log_every", "max_names"))
        if self.candidates < 2:
            raise SapbertError(f"training setting candidates={self.candidates} must be at least 2 (the gold one and a negative)")
        if self.bi_temperature is not None and self.bi_temperature < 0:
            raise SapbertError(f"training setting bi_temperature={self.bi_temperature} must be >= 0 (0: the cross-encoder alone)")
        if self.lr <= 0:
            raise SapbertError("training setting lr must be > 0")
        if not self.corpora:
            raise SapbertError("training setting corpora needs at least one file")
        if self.context_words < 0:
            raise SapbertError(f"training setting context_words={self.context_words} must be >= 0 (0: the mention alone)")
        if self.max_length is not None and self.max_length < 8:
            raise SapbertError(f"training setting max_length={self.max_length} must be at least 8 word pieces")

    @property
    def pair_length(self) -> int:
        """max_length, or its default for context_words."""
        return self.max_length or default_max_length(self.context_words)


@dataclass
class Group:
    """One distinct training mention: its query text and its candidates (ids, texts, the linker's scores), the gold
    one first, and where it was written (`contexts`, one per occurrence; empty when the mentions came without)."""

    query: str
    concept_ids: List[str]
    texts: List[str]
    bi_scores: List[float]
    contexts: List[MentionInContext] = field(default_factory=list)


def mine_groups(
    linker, mentions: List[Tuple[str, str, Optional[MentionInContext], Optional[str]]], candidates: int, max_names: int
) -> Tuple[List[Group], Dict[str, int]]:
    """Groups of the distinct (query, gold) `mentions` (raw text, raw gold id, where it was written or None, the NER
    label it would have or None) and counts of what happened to the golds (`resolve_gold_id`'s outcomes) and
    gold_missed (kept, with the gold put in).

    The candidates are those the linker hands its re-ranker for that label: its allowed types, its threshold, the
    memory mixed in; every id the gold names ("A|B") is right, so none is a negative. A gold the search missed is
    put in, its group scored on one scale (`scores_with_missed_gold`)."""
    counts = {"kept": 0, "alternative": 0, "combination": 0, "no_concept": 0, "unknown": 0, "gold_missed": 0}
    wanted: Dict[Tuple[str, str, Tuple[str, ...]], List[MentionInContext]] = {}
    right: Dict[Tuple[str, str, Tuple[str, ...]], set] = {}
    for text, gold, where, label in mentions:
        concept_id, outcome = resolve_gold_id(gold, linker.known_primary_id)
        counts[outcome] += 1
        if concept_id is not None:
            key = (linker.normalizer.query(text), concept_id, tuple(linker.allowed_types(label)))
            contexts = wanted.setdefault(key, [])
            if where is not None:
                contexts.append(where)
            right.setdefault(key, set()).update(
                primary for primary in map(linker.known_primary_id, gold_ids(gold)) if primary is not None
            )
    hits_by_key: Dict[Tuple[str, Tuple[str, ...]], List] = {}
    for types in sorted({types for _, _, types in wanted}):
        queries = sorted({query for query, _, of_types in wanted if of_types == types})
        hits_by_key.update(((query, types), hits) for query, hits in zip(queries, linker.ranked(queries, types, threshold=True)))
    groups = []
    for (query, concept_id, types), contexts in wanted.items():
        ranked = hits_by_key[(query, types)]
        scores = dict(ranked)
        others = [cid for cid, _ in ranked if cid not in right[(query, concept_id, types)]][: candidates - 1]
        counts["gold_missed"] += 0 if concept_id in dict(ranked[:candidates]) else 1
        if concept_id not in scores:
            scores = scores_with_missed_gold(linker, query, concept_id, types)
        ids = [concept_id, *others]
        texts = [candidate_text(query, linker.concept(cid), linker.normalizer, max_names) for cid in ids]
        groups.append(Group(query, ids, texts, [scores[cid] for cid in ids], contexts))
    counts["groups"] = len(groups)
    return groups, counts


def scores_with_missed_gold(linker, query: str, concept_id: str, types: Sequence[str] = ()) -> Dict[str, float]:
    """The linker's scores of its candidates for `query` with a gold concept its search did not return put among
    them, all on one scale: the gold's best-name similarity (`concept_score`) beside the search's, and, while the
    memory is active, every share of the mixture taken again over them all (the search's own summed to 1 without it)."""
    [hits] = linker.ranked([query], types, threshold=True, also=[(concept_id, concept_score(linker, query, concept_id))])
    return dict(hits)


def concept_score(linker, query: str, concept_id: str) -> float:
    """The bi-encoder's score of a concept the search did not return: its best name's similarity with the query, as
    the index scores it (cosine for a normalized index, else inner product). The query is encoded as the pipeline
    encodes a mention (alone under onnx-int8; it was batched with the names, off the search's scale), the names as
    names."""
    import numpy

    names = [linker.normalizer(name) for name in linker.concept(concept_id).names]
    query_vector = linker.encoder.encode([query], mentions=True)[0]
    vectors = linker.encoder.encode(names)
    if linker.index.normalize:
        query_vector = query_vector / numpy.linalg.norm(query_vector)
        vectors = vectors / numpy.linalg.norm(vectors, axis=1, keepdims=True)
    return float((vectors @ query_vector).max())


class RerankerRun(TrainingRun):
    """A TrainingRun whose model is a one-output sequence classifier, saved with reranker.json."""

    trained_on: Dict = {}

    def _load_model(self) -> None:
        from transformers import AutoModelForSequenceClassification

        from ..encoder import check_max_length, load_pretrained
        from ..reranker import read_meta

        if self.checkpoint is not None:  # a checkpoint read its mentions one way: resuming may not change it
            trained = read_meta(Path(self.checkpoint))
            recorded = {"context_words": trained.get("context_words", 0), "max_length": trained.get("max_length")}
            for key, value in (("context_words", self.config.context_words), ("max_length", self.config.pair_length)):
                if recorded[key] != value:
                    raise SapbertError(f"{self.checkpoint}: trained with {key}={recorded[key]}, this run has {key}={value}; resume with the same setting")
        self.tokenizer, self.model = load_pretrained(
            str(self.checkpoint or self.config.model), model_class=AutoModelForSequenceClassification, num_labels=1
        )
        check_max_length(self.model, self.config.pair_length, f"the model {self.config.model}")
        self.model.to(self.device)
        self.model.train()
        self.net = self.model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: 1.0)

    def _save_model(self, folder: Path) -> None:
        from ..encoder import encoder_fingerprint, save_pretrained

        save_pretrained(folder, self.model, self.tokenizer)
        config = self.config
        write_meta(Path(folder), config.pair_length, config.max_names, self.trained_on, config.bi_temperature or None, config.context_words,
                   weights=[encoder_fingerprint(self.model, self.tokenizer)])


def group_loss(logits: torch.Tensor, sizes: List[int]) -> torch.Tensor:
    """Mean over groups of -log softmax(gold) within each group; `logits` is the groups' pairs, flat, gold first."""
    losses = [torch.logsumexp(part, 0) - part[0] for part in torch.split(logits, sizes)]
    return torch.stack(losses).mean()


def epoch_mention_sides(groups: List[Group], linker, context_words: int, seed: int, epoch: int) -> List[str]:
    """Each group's mention side for one epoch: its query, or with `context_words` the query in one of its
    contexts, drawn by (seed, epoch), so a resumed run reads the same ones."""
    if not context_words:
        return [group.query for group in groups]
    draw = random.Random(seed * 1_000_003 + epoch)
    return [
        mention_side(group.query, group.contexts[draw.randrange(len(group.contexts))] if group.contexts else None, context_words, linker.normalizer)
        for group in groups
    ]


def mined_from(linker) -> Dict[str, Any]:
    """What the mined groups depend on besides the encoder and normalizer: the vocabulary, the memory's entries and the
    search settings (a pipeline rebuilt in place with other ones mines other groups, which a resumed run must not mix)."""
    memory = sorted(zip(linker.memory.texts, linker.memory.ids)) if linker.memory_active else []
    settings = {key: getattr(linker, key) for key in ("k", "threshold", "types", "sources")}
    return {
        "vocabulary": linker.index.vocabulary_hash,
        "memory": hashlib.sha256(json.dumps(memory).encode("utf8")).hexdigest()[:16],
        "settings": json.loads(json.dumps({**settings, "types_by_label": linker.types_by_label, **linker.memory_settings.to_dict()})),
    }


def train_reranker(config: RerankerConfig, resume: bool = False) -> Path:
    """Train a re-ranker for `config.pipeline`'s linker; returns the output model folder."""
    import spacy
    from tqdm import tqdm

    from ..ner_corpus import DEFAULT_LABEL_MAP
    from ..pipeline import the_linker
    from ..readers.corpora import read_pubtator

    config.validate()
    require("matplotlib")
    linker = the_linker(spacy.load(config.pipeline), config.component)
    mentions = [  # each with the label the NER gives its type, which picks the linker's allowed types
        (m.text, m.gold, MentionInContext(doc.text, m.start, m.end), DEFAULT_LABEL_MAP.get(m.label, m.label))
        for path in config.corpora for doc in read_pubtator(path)
        for m in doc.mentions if not config.labels or m.label in config.labels
    ]
    if not mentions:
        from ..evaluation.queries import no_mentions_error

        raise no_mentions_error(", ".join(config.corpora), config.labels)
    groups, counts = mine_groups(linker, mentions, config.candidates, config.max_names)
    if not groups:
        raise SapbertError(f"no training mention has its gold concept in {config.pipeline}'s vocabulary: {counts}")
    trained_on = {**bi_encoder_record(linker.encoder), "normalizer": linker.normalizer.settings()}
    run = RerankerRun.start(
        config, config_file=CONFIG_FILE, resume=resume, trajectory_keys=TRAJECTORY_KEYS, fixed_keys=FIXED_KEYS,
        inputs={"corpora": [file_digest(path) for path in config.corpora], "linker": trained_on, "mined_from": mined_from(linker)},
        progress=lambda state: (state.get("epoch", 0), config.epochs, "epochs"),
    )
    run.trained_on = trained_on
    if run.checkpoint is None:  # a resumed run logged its mining already
        run.log({"step": 0, "mentions": len(mentions), **counts})
    step = run.state.get("step", 0)
    for epoch in range(run.state.get("epoch", 0), config.epochs):
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
        order = torch.randperm(len(groups), generator=generator).tolist()
        batches = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
        sides = epoch_mention_sides(groups, linker, config.context_words, config.seed, epoch)
        window = LossWindow()
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{config.epochs}", unit="step", disable=not config.progress, file=sys.stderr)
        for position, rows in enumerate(bar):
            batch = [groups[i] for i in rows]
            queries = [sides[i] for i in rows for _ in groups[i].texts]
            texts = [t for g in batch for t in g.texts]
            bi_scores = torch.tensor([s for g in batch for s in g.bi_scores], device=run.device)
            with run.autocast():
                logits = pair_logits(run.net, run.tokenizer, queries, texts, config.pair_length, run.device)
            logits = combined_logits(logits.float(), bi_scores, config.bi_temperature or None)
            loss = group_loss(logits, [len(g.texts) for g in batch])
            run.backward(loss)
            run.update()
            step += 1
            window.add(float(loss.detach()), len(rows))
            bar.set_postfix(loss=f"{window.losses[-1]:.4f}")
            if step % config.log_every == 0 or position == len(batches) - 1:
                run.log(window.entry(step, epoch, run.elapsed()))
        bar.close()
        run.save_checkpoint({"epoch": epoch + 1, "step": step})
    return run.finish(title="Re-ranker training", ylabel="cross-entropy of the gold candidate")
