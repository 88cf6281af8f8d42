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
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..encoder import POOLINGS, embed_texts, load_pretrained, resolve_device
from ..errors import SapbertError
from ..extras import require
from ..io import atomic_write_text
from .checkpoints import (
    STATE_FILE, MixedPrecision, append_log, find_checkpoint, plot_loss, require_at_least_one, restart_log, rng_state, save_model,
    seed_everything, set_rng_state, write_dir,
)
from .losses import MINER_DISTANCES, make_loss, make_miner, sap_loss
from .pairs import PairsFile

__all__ = ["TrainConfig", "TrainingWarning", "epoch_order", "find_checkpoint", "plot_loss", "train"]

LOG_FILE = "train_log.jsonl"
LOSS_PLOT = "loss.png"
CONFIG_FILE = "train_config.json"
# settings that change the training trajectory: a resumed run with other values is no continuation
TRAJECTORY_KEYS = (
    "pairs", "batch_size", "lr", "weight_decay", "grad_accum", "max_length", "pooling", "alpha", "beta",
    "base", "margin", "miner_distance", "use_miner", "warmup_steps", "seed", "encode_chunk",
)


class TrainingWarning(UserWarning):
    """Something about a training run that does not stop it (e.g. resuming with other settings)."""


@dataclass
class TrainConfig:
    """Settings of a self-alignment pretraining run (defaults: the SapBERT paper).

    model: base encoder (folder or hub name). output: output folder. pairs: ``ID||name1||name2`` file.
    batch_size: pairs per process and micro-batch. grad_accum: micro-batches per optimizer step.
    epochs / max_steps: the run ends after `epochs` passes over the pairs or `max_steps` steps, whichever
    comes first. alpha, beta, base: multi-similarity loss. margin, miner_distance, use_miner: hard
    triplet mining. warmup_steps: linear learning-rate warm-up, then constant (the reference uses a
    constant rate). encode_chunk: names per forward pass, length-sorted (cuts padding; the batch for
    mining and the loss is still the whole micro-batch). checkpoint_every / log_every: in steps. device: auto, cpu, cuda[:N]. amp: mixed
    precision, applied on CUDA only. progress: tqdm bar.
    """

    model: str
    output: str
    pairs: str
    batch_size: int = 256
    lr: float = 2e-5
    weight_decay: float = 0.01
    epochs: int = 1
    max_steps: Optional[int] = None
    grad_accum: int = 1
    max_length: int = 25
    pooling: str = "cls"
    alpha: float = 2.0
    beta: float = 50.0
    base: float = 0.5
    margin: float = 0.2
    miner_distance: str = "euclidean"
    use_miner: bool = True
    warmup_steps: int = 0
    encode_chunk: int = 64
    seed: int = 42
    checkpoint_every: int = 1000
    log_every: int = 10
    device: str = "auto"
    amp: bool = True
    progress: bool = True

    def validate(self) -> None:
        """Raise SapbertError naming the setting for an impossible value."""
        require_at_least_one(self, ("batch_size", "epochs", "grad_accum", "checkpoint_every", "log_every", "encode_chunk"))
        if self.max_steps is not None and self.max_steps < 0:
            raise SapbertError(f"training setting max_steps={self.max_steps!r} must be >= 0 (or None)")
        if self.max_length < 2:
            raise SapbertError(f"training setting max_length={self.max_length} must leave room for [CLS] and [SEP]")
        if self.pooling not in POOLINGS:
            raise SapbertError(f"training setting pooling={self.pooling!r}: choose one of {list(POOLINGS)}")
        if self.miner_distance not in MINER_DISTANCES:
            raise SapbertError(f"training setting miner_distance={self.miner_distance!r}: choose one of {list(MINER_DISTANCES)}")
        if self.lr <= 0 or self.weight_decay < 0 or self.warmup_steps < 0:
            raise SapbertError("training settings lr must be > 0, weight_decay and warmup_steps >= 0")
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
# RNG states, checkpoints


# ----------------------------------------------------------------------------------------------------
# training


@dataclass
class _Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    initialized_here: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0


def _init_distributed(device: torch.device) -> Tuple[_Dist, torch.device]:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return _Dist(), device
    import torch.distributed as dist

    ctx = _Dist(int(os.environ.get("RANK", "0")), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        device = torch.device("cuda", ctx.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        ctx.initialized_here = True
    ctx.rank, ctx.world_size = dist.get_rank(), dist.get_world_size()
    return ctx, device


def _freeze_unused(model) -> None:
    """The pooler head gets no gradient from [CLS]/mean pooling of the last hidden state: freeze it so
    that DistributedDataParallel does not wait for its gradients (its weights stay as they were)."""
    pooler = getattr(model, "pooler", None)
    if isinstance(pooler, torch.nn.Module):
        pooler.requires_grad_(False)


def _embed(model, tokenizer, batch: Sequence[Tuple[str, str, str]], config: TrainConfig, device):
    """(2B, dim) embeddings of both names of B pairs (all first names, then all second names) and labels."""
    ids: Dict[str, int] = {}
    labels = [ids.setdefault(concept_id, len(ids)) for concept_id, _, _ in batch]
    texts = [a for _, a, _ in batch] + [b for _, _, b in batch]
    embeddings = embed_texts(
        model, tokenizer, texts, max_length=config.max_length, pooling=config.pooling, device=device,
        chunk_size=config.encode_chunk,
    )
    return embeddings, torch.tensor(labels + labels, device=device)


def _check_resume(config: TrainConfig, state: Dict[str, Any], world_size: int, num_pairs: int) -> None:
    old = state.get("config", {})
    changed = [k for k in TRAJECTORY_KEYS if k in old and old[k] != getattr(config, k)]
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
    dist_ctx = _Dist()
    deterministic = torch.are_deterministic_algorithms_enabled()
    deterministic_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        dist_ctx, device = _init_distributed(resolve_device(config.device))
        torch.use_deterministic_algorithms(True, warn_only=True)
        return _train(config, resume, device, dist_ctx)
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=deterministic_warn)
        if dist_ctx.initialized_here:
            import torch.distributed as dist

            dist.destroy_process_group()


def _train(config: TrainConfig, resume: bool, device: torch.device, ctx: _Dist) -> Path:
    import torch.distributed as dist
    from tqdm import tqdm

    output = Path(config.output)
    checkpoint_dir = output / "checkpoints" / "last"
    log_path = output / LOG_FILE
    pairs = PairsFile(config.pairs)  # validates every line first: errors name file and line
    try:
        checkpoint = find_checkpoint(output) if resume else None
        state: Optional[Dict[str, Any]] = None
        if checkpoint is not None:
            state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf8"))
            _check_resume(config, state, ctx.world_size, len(pairs))
        elif resume:
            warnings.warn(f"no checkpoint in {output / 'checkpoints'}: training starts from {config.model}", TrainingWarning, stacklevel=3)

        seed_everything(config.seed + ctx.rank)
        tokenizer, model = load_pretrained(str(checkpoint) if checkpoint is not None else config.model)
        _freeze_unused(model)
        model.to(device)
        model.train()
        net = model
        if ctx.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        precision = MixedPrecision(device, config.amp)
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=config.lr, weight_decay=config.weight_decay
        )
        warmup = config.warmup_steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / (warmup + 1)) if warmup else 1.0)
        miner = make_miner(config.margin, distance=config.miner_distance) if config.use_miner else None
        loss_fn = make_loss(config.alpha, config.beta, config.base)

        global_step, epoch, step_in_epoch, elapsed_before = 0, 0, 0, 0.0
        if checkpoint is not None and state is not None:
            optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=True))
            scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=True))
            precision.load(checkpoint)
            rng_states = torch.load(checkpoint / "rng.pt", weights_only=True)
            if ctx.rank < len(rng_states):
                set_rng_state(rng_states[ctx.rank])
            global_step, epoch, step_in_epoch = state["step"], state["epoch"], state["step_in_epoch"]
            elapsed_before = float(state.get("elapsed", 0.0))
        if ctx.main:
            output.mkdir(parents=True, exist_ok=True)
            atomic_write_text(output / CONFIG_FILE, json.dumps(config.to_dict(), indent=2) + "\n")
            restart_log(log_path, global_step if checkpoint is not None else None)

        global_batch = config.batch_size * ctx.world_size
        padded = len(pairs) + (-len(pairs)) % ctx.world_size
        batches_per_epoch = math.ceil(padded / global_batch)
        steps_per_epoch = math.ceil(batches_per_epoch / config.grad_accum)
        total_steps = config.epochs * steps_per_epoch
        if config.max_steps is not None:
            total_steps = min(total_steps, config.max_steps)

        def save_checkpoint() -> None:
            states = [rng_state()]
            if ctx.world_size > 1:
                gathered: List[Any] = [None] * ctx.world_size
                dist.all_gather_object(gathered, states[0])
                states = gathered
            if ctx.main:
                record = {
                    "step": global_step,
                    "epoch": epoch,
                    "step_in_epoch": step_in_epoch,
                    "steps_per_epoch": steps_per_epoch,
                    "micro_batches_done": min(step_in_epoch * config.grad_accum, batches_per_epoch),
                    "position": min(step_in_epoch * config.grad_accum * global_batch, padded),
                    "world_size": ctx.world_size,
                    "num_pairs": len(pairs),
                    "elapsed": elapsed_before + time.perf_counter() - started,
                    "config": config.to_dict(),
                }

                def fill(folder: Path) -> None:
                    save_model(folder, model, tokenizer, config.pooling, config.max_length)
                    torch.save(optimizer.state_dict(), folder / "optimizer.pt")
                    torch.save(scheduler.state_dict(), folder / "scheduler.pt")
                    precision.save(folder)
                    torch.save(states, folder / "rng.pt")
                    (folder / STATE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")

                write_dir(checkpoint_dir, fill)
            if ctx.world_size > 1:
                dist.barrier()

        started = time.perf_counter()
        run_pairs = 0
        window_loss, window_count, window_pairs, window_start = 0.0, 0, 0, started
        last_checkpoint = global_step if checkpoint is not None else -1
        bar = tqdm(total=total_steps, initial=global_step, desc="sap training", unit="step",
                   disable=not (config.progress and ctx.main), file=sys.stderr, dynamic_ncols=True)
        order: Optional[torch.Tensor] = None
        order_epoch = -1
        while global_step < total_steps:
            if step_in_epoch >= steps_per_epoch:
                epoch, step_in_epoch = epoch + 1, 0
                continue
            if order_epoch != epoch:
                order, order_epoch = epoch_order(len(pairs), ctx.world_size, config.seed, epoch), epoch
            first = step_in_epoch * config.grad_accum
            micro = list(range(first, min(first + config.grad_accum, batches_per_epoch)))
            optimizer.zero_grad(set_to_none=True)
            step_loss = 0.0
            for position, index in enumerate(micro):
                batch = pairs.batch(micro_batch(order, index, config.batch_size, ctx.rank, ctx.world_size))
                last = position == len(micro) - 1
                sync = net.no_sync() if ctx.world_size > 1 and not last else contextlib.nullcontext()
                with sync:
                    with precision.autocast():
                        embeddings, labels = _embed(net, tokenizer, batch, config, device)
                    loss = sap_loss(embeddings, labels, miner, loss_fn) / len(micro)
                    precision.backward(loss)
                step_loss += float(loss.detach())
                run_pairs += len(batch) * ctx.world_size
                window_pairs += len(batch) * ctx.world_size
            precision.step(optimizer)
            scheduler.step()
            global_step += 1
            step_in_epoch += 1
            window_loss += step_loss
            window_count += 1
            now = time.perf_counter()
            pairs_per_s = run_pairs / max(now - started, 1e-9)
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.4f}", pairs_s=f"{pairs_per_s:.0f}")
            if global_step % config.log_every == 0 or global_step == total_steps:
                mean_loss = window_loss / window_count
                if ctx.world_size > 1:
                    value = torch.tensor([mean_loss], dtype=torch.float64, device=device)
                    dist.all_reduce(value)
                    mean_loss = float(value.item()) / ctx.world_size
                if ctx.main:
                    entry = {
                        "step": global_step,
                        "epoch": epoch,
                        "loss": round(mean_loss, 6),
                        "pairs_per_s": round(window_pairs / max(now - window_start, 1e-9), 2),
                        "lr": scheduler.get_last_lr()[0],
                        "elapsed": round(elapsed_before + now - started, 3),
                    }
                    append_log(log_path, entry)
                window_loss, window_count, window_pairs, window_start = 0.0, 0, 0, now
            if global_step % config.checkpoint_every == 0 or global_step == total_steps:
                save_checkpoint()
                last_checkpoint = global_step
        bar.close()
        if last_checkpoint != global_step:
            save_checkpoint()

        model_dir = output / "model"
        if ctx.main:
            write_dir(model_dir, lambda folder: save_model(folder, model, tokenizer, config.pooling, config.max_length))
            plot_loss(log_path, output / LOSS_PLOT)
        if ctx.world_size > 1:
            dist.barrier()
        return model_dir
    finally:
        pairs.close()
