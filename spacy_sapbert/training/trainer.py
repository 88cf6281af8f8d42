"""Self-alignment pretraining (SapBERT) of a Hugging Face encoder on a pairs file.

``train(TrainConfig(model=..., output=..., pairs=...))`` runs the SapBERT recipe: batches of
``ID||name1||name2`` pairs, both names encoded ([CLS] of the last hidden state, max_length 25), labels
duplicated, hard triplets mined online (margin 0.2) and fed to the multi-similarity loss; AdamW
(lr 2e-5, weight decay 0.01); mixed precision only on CUDA.

Output folder::

    output/model/                  Hugging Face folder (weights, config, tokenizer) -> Encoder(output/model)
    output/train_log.jsonl         one JSON line per logged step: step, epoch, loss, pairs_per_s, lr, elapsed
    output/loss.png                loss curve (written at the end)
    output/train_config.json       the TrainConfig
    output/checkpoints/last/       latest checkpoint: model + tokenizer, optimizer.pt, scheduler.pt,
                                   scaler.pt, rng.pt (python, numpy, torch RNG states of every rank),
                                   trainer_state.json (step, epoch, step_in_epoch, ...)

Every output is written atomically: files through ``spacy_sapbert.io.atomic_write``, folders (model,
checkpoint) by writing a temporary folder next to the target and renaming it into place (the previous
folder is first renamed to ``<name>.old``, then removed; a crash between the two renames leaves
``last.old``, which ``resume`` then uses). The JSON-lines log is appended to line by line and, on resume,
cut back to the checkpoint's step.

Determinism: the python, numpy and torch RNGs are seeded (seed + rank), deterministic algorithms are
requested (warn only), and the order of the pairs in epoch e is ``torch.randperm`` with a generator seeded
from (seed, e). A checkpoint stores the RNG states and the position in the epoch's order, so on CPU a run
stopped after any step and resumed ends with exactly the weights of an uninterrupted run.

Host work: on CUDA the next micro-batch is read, tokenized and padded in a worker thread (``prefetch.py``)
while the GPU runs the current one; the batches, and so the weights, are those of the plain loop.

Steps and batches: ``batch_size`` pairs per process and micro-batch (2 x batch_size names, as in the
reference); a step is ``grad_accum`` micro-batches followed by one optimizer update; ``max_steps`` and
``checkpoint_every`` count steps. The last incomplete micro-batch of an epoch is kept.

Distributed: under ``torchrun`` (WORLD_SIZE > 1) the process group is initialised (gloo on CPU, nccl on
CUDA), the model is wrapped in DistributedDataParallel and each micro-batch of the epoch's order is
split across ranks like ``DistributedSampler`` (the order is padded to a multiple of the world size by
repeating its start; rank r takes every world_size-th pair of each chunk of batch_size x world_size).
Mining and the loss are per rank, on the rank's own batch; the gradients are averaged. Only rank 0
writes checkpoints, logs and outputs.

Run it through ``python -m spacy_sapbert train`` (also under ``torchrun --nproc_per_node N -m spacy_sapbert train``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..encoder import POOLINGS, check_max_length_before_load, embed_padded, padded_chunks, resolve_device
from ..errors import SapbertError
from ..extras import require
from ..io import file_digest
from .checkpoints import CPU_BF16_HELP, find_checkpoint, plot_loss, require_at_least_one
from .loop import Distributed, TrainingRun, TrainingWarning, distributed
from .options import setting
from .losses import LOSSES, MINER_DISTANCES, make_loss, make_miner, sap_loss
from .pairs import PairsFile, read_pairs
from .prefetch import Prefetcher

__all__ = ["TrainConfig", "TrainingWarning", "epoch_order", "find_checkpoint", "plot_loss", "resolve_encode_chunk", "train"]

CONFIG_FILE = "train_config.json"
# settings that change the training trajectory: a resumed run with other values is no continuation
TRAJECTORY_KEYS = (  # a resume with another value warns (TrainingRun.start)
    "pairs", "batch_size", "lr", "weight_decay", "grad_accum", "alpha", "beta", "base", "margin", "miner_distance",
    "use_miner", "warmup_steps", "seed", "encode_chunk", "loss", "pos_margin", "neg_margin", "adapters", "kge",
)
FIXED_KEYS = ("model", "pooling", "max_length")  # what the model is (the checkpoint's weights and its pooling): an error


@dataclass
class TrainConfig:
    """Settings of a self-alignment pretraining run (defaults: the SapBERT paper); each field's help
    text is also its `train` command-line option's.

    The run ends after `epochs` passes over the pairs or `max_steps` steps, whichever comes first.
    `warmup_steps` of linear learning-rate warm-up, then constant (the reference uses a constant rate).
    """

    model: str = setting(help="Base encoder: local Hugging Face folder or hub name.")
    output: str = setting(help="Output folder: model/, checkpoints/last/, train_log.jsonl, loss.png.")
    pairs: str = setting(help="Pairs file ('ID||name1||name2' lines, from `pairs`).", argument=True)
    batch_size: int = setting(256, help="Pairs per micro-batch and process.")
    lr: float = setting(2e-5, help="AdamW learning rate.")
    weight_decay: float = setting(0.01, help="AdamW weight decay.")
    epochs: int = setting(1, help="Passes over the pairs.")
    max_steps: Optional[int] = setting(None, help="Stop after this many optimizer steps (default: end of the epochs).")
    grad_accum: int = setting(1, help="Micro-batches per optimizer step. Each micro-batch mines its hard pairs and "
                              "negatives among its own names: accumulating is not a larger batch for the loss.")
    max_length: int = setting(25, help="Word pieces per name.")
    pooling: str = setting("cls", help="cls (SapBERT) or mean.")
    alpha: float = setting(2.0, help="Multi-similarity loss alpha (positive pairs).")
    beta: float = setting(50.0, help="Multi-similarity loss beta (negative pairs).")
    base: float = setting(0.5, help="Multi-similarity loss base (the margin of positives and negatives, loss ms).")
    loss: str = setting("ms", help="ms (multi-similarity, one base), ms-v2 (separate margins --pos-margin and --neg-margin) "
                                       "or ms-v3 (margins from the --kge similarity of the two concepts).")
    pos_margin: float = setting(1.0, help="Margin of the positive pairs (loss ms-v2).")
    neg_margin: float = setting(0.5, help="Margin of the negative pairs (loss ms-v2; ms-v3 where a concept has no KGE vector).")
    kge: Optional[str] = setting(None, help="Knowledge-graph embedding (output/model of train-kge) whose concept "
                                            "similarities set the margins of loss ms-v3.")
    margin: float = setting(0.2, help="Triplet miner margin.")
    miner_distance: str = setting("euclidean", help="Miner distance: euclidean (on unit vectors, as SapBERT) or cosine.")
    use_miner: bool = setting(True, help="Mine hard triplets (--no-use-miner: the loss sees all pairs).")
    warmup_steps: int = setting(0, help="Linear learning-rate warm-up steps, then constant.")
    encode_chunk: int = setting(0, help="Names per forward pass, sorted by length to cut padding (mining and the loss "
                                "still see the whole micro-batch); 0: 64 on CPU, the whole micro-batch on CUDA.")
    adapters: int = setting(0, help="Train bottleneck adapters (Pfeiffer) of this reduction factor in a frozen encoder "
                            "(16: about 1% of the parameters, 1: about 13%); 0 trains the whole encoder.")
    seed: int = setting(42, help="Seed of the data order and of dropout.")
    checkpoint_every: int = setting(1000, help="Write output/checkpoints/last every N steps.")
    log_every: int = setting(10, help="Append to train_log.jsonl every N steps.")
    device: str = setting("auto", help="auto (CUDA when present), cpu or cuda[:N].")
    amp: bool = setting(True, help="Mixed precision (CUDA only).")
    cpu_bf16: bool = setting(False, help=CPU_BF16_HELP)
    progress: bool = setting(True, help="Show a progress bar.")

    def validate(self) -> None:
        """Raise SapbertError naming the setting for an impossible value."""
        require_at_least_one(self, ("batch_size", "epochs", "grad_accum", "checkpoint_every", "log_every"))
        if self.encode_chunk < 0:
            raise SapbertError(f"training setting encode_chunk={self.encode_chunk!r} must be at least 1, or 0 for the device's default")
        if self.max_steps is not None and self.max_steps < 0:
            raise SapbertError(f"training setting max_steps={self.max_steps!r} must be >= 0 (or None)")
        if self.max_length < 2:
            raise SapbertError(f"training setting max_length={self.max_length} must leave room for [CLS] and [SEP]")
        if self.pooling not in POOLINGS:
            raise SapbertError(f"training setting pooling={self.pooling!r}: choose one of {list(POOLINGS)}")
        if self.loss not in LOSSES:
            raise SapbertError(f"training setting loss={self.loss!r}: choose one of {list(LOSSES)}")
        if (self.loss == "ms-v3") != bool(self.kge):
            raise SapbertError("training settings loss and kge: loss ms-v3 needs --kge (a train-kge model folder), and only it uses one")
        if self.miner_distance not in MINER_DISTANCES:
            raise SapbertError(f"training setting miner_distance={self.miner_distance!r}: choose one of {list(MINER_DISTANCES)}")
        if self.lr <= 0 or self.weight_decay < 0 or self.warmup_steps < 0 or self.adapters < 0:
            raise SapbertError("training settings lr must be > 0, weight_decay, warmup_steps and adapters >= 0")
        for key in ("model", "output", "pairs"):
            if not str(getattr(self, key) or ""):
                raise SapbertError(f"training setting {key} is required")

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SapbertError(f"unknown training setting(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
        missing = [k for k in ("model", "output", "pairs") if k not in data]
        if missing:
            raise SapbertError(f"training setting(s) {', '.join(missing)} missing")
        return cls(**{k: (str(v) if k in ("model", "output", "pairs") else v) for k, v in data.items()})


# ----------------------------------------------------------------------------------------------------
# data order


def epoch_order(num_pairs: int, world_size: int, seed: int, epoch: int) -> torch.Tensor:
    """The pair indices of epoch `epoch` in training order, padded to a multiple of `world_size`."""
    generator = torch.Generator()
    generator.manual_seed((seed * 1_000_003 + epoch) % (2**63))
    order = torch.randperm(num_pairs, generator=generator)
    pad = (-num_pairs) % world_size
    if pad:
        order = torch.cat([order, order.repeat(pad // num_pairs + 1)[:pad]])
    return order


def micro_batch(order: torch.Tensor, index: int, batch_size: int, rank: int, world_size: int) -> List[int]:
    """This rank's pair indices of the index-th micro-batch of an epoch order."""
    size = batch_size * world_size
    chunk = order[index * size : (index + 1) * size]
    return chunk[rank::world_size].tolist()


# ----------------------------------------------------------------------------------------------------
# training


CPU_ENCODE_CHUNK = 64


def resolve_encode_chunk(encode_chunk: int, batch_size: int, device: torch.device) -> int:
    """The names per forward pass: `encode_chunk` when set, else 64 on CPU, where sorting short names into
    their own chunks cuts padding, and the whole micro-batch (both names of `batch_size` pairs) on CUDA,
    where one large forward pass is the faster: a SAP step on an H100 ran 2.8x (MiniLM) and 4x (BERT-base)
    as fast as with chunks of 64 (BENCHMARKS.md, "SAP on a GPU")."""
    if encode_chunk:
        return encode_chunk
    return 2 * batch_size if device.type == "cuda" else CPU_ENCODE_CHUNK


@dataclass
class MicroBatch:
    """One micro-batch ready for the GPU: both names of its pairs tokenized and padded in length-sorted
    chunks (all first names, then all second names), the label of each name, the concept id of each label."""

    chunks: List[Tuple[List[int], Any]]
    labels: torch.Tensor
    concept_ids: List[str]

    @property
    def pairs(self) -> int:
        return len(self.labels) // 2


def prepare_micro_batch(batch: Sequence[Tuple[str, str, str]], tokenizer, config: TrainConfig, pin: bool) -> MicroBatch:
    """The host half of a step (`pin`: page-locked tensors, which copy to the GPU asynchronously)."""
    ids: Dict[str, int] = {}
    labels = [ids.setdefault(concept_id, len(ids)) for concept_id, _, _ in batch]
    texts = [a for _, a, _ in batch] + [b for _, _, b in batch]
    chunks = list(padded_chunks(tokenizer, texts, max_length=config.max_length, chunk_size=config.encode_chunk))
    if pin:
        chunks = [(rows, type(padded)({key: value.pin_memory() for key, value in padded.items()})) for rows, padded in chunks]
    return MicroBatch(chunks, torch.tensor(labels + labels), list(ids))


def prefetch_ahead(device: torch.device) -> bool:
    """Whether the next micro-batch is prepared in a worker thread: on CUDA, where the host bounds the step.
    On CPU the worker would take a core from the forward pass for a few percent of a step."""
    return device.type == "cuda"


def _load_kge(config: TrainConfig, main: bool):
    """The KgeEmbeddings of loss ms-v3 (None for the other losses); says how many of the pairs' concepts
    have a vector (the others get v2's margins)."""
    if config.kge is None:
        return None
    from .kge import KgeEmbeddings

    kge = KgeEmbeddings(config.kge)
    if main:
        found, total = kge.coverage(concept_id for concept_id, _, _ in read_pairs(config.pairs))
        print(f"kge: {found:,} of {total:,} concepts of {config.pairs} have a vector in {config.kge}", file=sys.stderr)
    return kge


def _kge_counts(loss_fn) -> Dict[str, Any]:
    """The log's kge_pairs / fallback_pairs since the last log line (loss ms-v3), then reset."""
    if not hasattr(loss_fn, "fallback_pairs"):
        return {}
    counts = {"kge_pairs": loss_fn.kge_pairs, "fallback_pairs": loss_fn.fallback_pairs}
    loss_fn.kge_pairs = loss_fn.fallback_pairs = 0
    return counts


def _check_resume(state: Dict[str, Any], world_size: int, num_pairs: int) -> None:
    """A TrainingWarning when the run resumes on another number of processes or pairs than its checkpoint's
    (TrainingRun.start compares the settings)."""
    changed = []
    if state.get("world_size", 1) != world_size:
        changed.append(f"world size ({state.get('world_size', 1)} -> {world_size})")
    if state.get("num_pairs") != num_pairs:
        changed.append(f"number of pairs ({state.get('num_pairs')} -> {num_pairs})")
    if changed:
        warnings.warn(
            f"resuming with other settings than the checkpoint's ({', '.join(changed)}): training continues, "
            "but will not match an uninterrupted run",
            TrainingWarning,
            stacklevel=3,
        )


def train(config: TrainConfig, resume: bool = False) -> Path:
    """Train the encoder on the pairs file; the path of the output Hugging Face model folder.

    resume=True continues from output/checkpoints/last (same seed and settings on CPU: the final weights
    equal those of an uninterrupted run); without a checkpoint it starts from `config.model` with a
    TrainingWarning. Raises VocabularyFormatError (file and line) for a malformed pairs file and
    EncoderLoadError when the model cannot be loaded.
    """
    config.validate()
    for module in ("pytorch_metric_learning", "matplotlib"):  # before hours of training, not after
        require(module)
    deterministic = torch.are_deterministic_algorithms_enabled()
    deterministic_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        with distributed(resolve_device(config.device)) as (ctx, device):
            torch.use_deterministic_algorithms(True, warn_only=True)
            return _train(config, resume, device, ctx)
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=deterministic_warn)


def _train(config: TrainConfig, resume: bool, device: torch.device, ctx: Distributed) -> Path:
    from tqdm import tqdm

    # the run records the chunk it used, so that a resume on the same device compares like with like
    config = dataclasses.replace(config, encode_chunk=resolve_encode_chunk(config.encode_chunk, config.batch_size, device))
    check_max_length_before_load(config.model, config.max_length, f"the model {config.model}")  # before the pairs are read
    pairs = PairsFile(config.pairs)  # validates every line first: errors name file and line
    prefetch: Optional[Prefetcher] = None
    try:
        global_batch = config.batch_size * ctx.world_size
        padded = len(pairs) + (-len(pairs)) % ctx.world_size
        batches_per_epoch = math.ceil(padded / global_batch)
        steps_per_epoch = math.ceil(batches_per_epoch / config.grad_accum)
        total_steps = config.epochs * steps_per_epoch
        if config.max_steps is not None:
            total_steps = min(total_steps, config.max_steps)
        inputs = {"pairs": pairs.digest}
        kge = _load_kge(config, ctx.main)  # read before the run starts: a damaged one leaves no run folder behind
        if config.kge is not None:  # ms-v3's margins come from its vectors
            inputs["kge"] = file_digest(config.kge, folder_contents=True)
        run = TrainingRun.start(
            config, config_file=CONFIG_FILE, resume=resume, device=device, ctx=ctx, warmup_steps=config.warmup_steps,
            trajectory_keys=TRAJECTORY_KEYS, fixed_keys=FIXED_KEYS, inputs=inputs,
            progress=lambda state: (state.get("step", 0), total_steps, "steps"),
        )
        if run.checkpoint is not None:
            _check_resume(run.state, ctx.world_size, len(pairs))
        miner = make_miner(config.margin, distance=config.miner_distance) if config.use_miner else None
        loss_fn = make_loss(config.alpha, config.beta, config.base, config.loss, config.pos_margin, config.neg_margin)
        global_step = run.state.get("step", 0)
        epoch, step_in_epoch = run.state.get("epoch", 0), run.state.get("step_in_epoch", 0)

        def save_checkpoint() -> None:
            run.save_checkpoint({
                "step": global_step,
                "epoch": epoch,
                "step_in_epoch": step_in_epoch,
                "steps_per_epoch": steps_per_epoch,
                "micro_batches_done": min(step_in_epoch * config.grad_accum, batches_per_epoch),
                "position": min(step_in_epoch * config.grad_accum * global_batch, padded),
                "num_pairs": len(pairs),
                # the steps since the last log entry: a resume's first entry averages them too, as an uninterrupted run's does
                "log_window": {"loss": run.mean_over_ranks(window_loss), "steps": window_count},
            })

        run_pairs = 0
        window = run.state.get("log_window", {})
        window_loss, window_count, window_pairs, window_start = float(window.get("loss", 0.0)), int(window.get("steps", 0)), 0, run.started
        last_checkpoint = global_step if run.checkpoint is not None else -1
        bar = tqdm(total=total_steps, initial=global_step, desc="sap training", unit="step",
                   disable=not (config.progress and ctx.main), file=sys.stderr, dynamic_ncols=True)
        @functools.lru_cache(maxsize=1)
        def order_of(at_epoch: int) -> torch.Tensor:
            return epoch_order(len(pairs), ctx.world_size, config.seed, at_epoch)

        def prepare(key: Tuple[int, int]) -> MicroBatch:  # (epoch, micro-batch index); runs in the worker on CUDA
            at_epoch, index = key
            batch = pairs.batch(micro_batch(order_of(at_epoch), index, config.batch_size, ctx.rank, ctx.world_size))
            return prepare_micro_batch(batch, run.tokenizer, config, pin=device.type == "cuda")

        prefetch = Prefetcher(prepare, ahead=prefetch_ahead(device))
        while global_step < total_steps:
            if step_in_epoch >= steps_per_epoch:
                epoch, step_in_epoch = epoch + 1, 0
                continue
            first = step_in_epoch * config.grad_accum
            micro = list(range(first, min(first + config.grad_accum, batches_per_epoch)))
            step_loss = 0.0
            for position, index in enumerate(micro):
                following = (epoch, index + 1) if index + 1 < batches_per_epoch else (epoch + 1, 0)
                inputs = prefetch.get((epoch, index), following)
                labels = inputs.labels.to(device)
                last = position == len(micro) - 1
                sync = run.net.no_sync() if ctx.world_size > 1 and not last else contextlib.nullcontext()
                with sync:
                    with run.autocast():
                        embeddings = embed_padded(run.net, inputs.chunks, pooling=config.pooling, device=device)
                    kge_similarity = (
                        kge.similarity(inputs.concept_ids)[inputs.labels][:, inputs.labels] if kge is not None else None
                    )
                    loss = sap_loss(embeddings, labels, miner, loss_fn, kge_similarity) / len(micro)
                    run.backward(loss)
                step_loss += float(loss.detach())
                run_pairs += inputs.pairs * ctx.world_size
                window_pairs += inputs.pairs * ctx.world_size
            run.update()
            global_step += 1
            step_in_epoch += 1
            window_loss += step_loss
            window_count += 1
            now = time.perf_counter()
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.4f}", pairs_s=f"{run_pairs / max(now - run.started, 1e-9):.0f}")
            if global_step % config.log_every == 0 or global_step == total_steps:
                run.log({
                    "step": global_step,
                    "epoch": epoch,
                    "loss": round(run.mean_over_ranks(window_loss / window_count), 6),
                    "pairs_per_s": round(window_pairs / max(now - window_start, 1e-9), 2),
                    "lr": run.lr,
                    "elapsed": round(run.elapsed(), 3),
                    **_kge_counts(loss_fn),
                })
                window_loss, window_count, window_pairs, window_start = 0.0, 0, 0, now
            if global_step % config.checkpoint_every == 0 or global_step == total_steps:
                prefetch.wait()  # the checkpoint saves the tokenizer, which the worker may be using
                save_checkpoint()
                last_checkpoint = global_step
        bar.close()
        prefetch.close()
        if last_checkpoint != global_step:
            save_checkpoint()
        return run.finish(title="self-alignment pretraining", ylabel="multi-similarity loss")
    finally:
        if prefetch is not None:  # before the pairs file closes under the worker
            prefetch.close()
        pairs.close()
