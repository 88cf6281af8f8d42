"""The training run shared by the SAP and DHNS trainers: device and processes, model and optimizer,
mixed precision, checkpoints and resume, the JSON-lines log and the loss plot.

A trainer opens a ``TrainingRun`` in its output folder and writes only its own loop (what a batch is,
what the loss is, when to checkpoint)::

    run = TrainingRun.start(config, config_file="train_config.json", resume=resume)
    for batch in ...:
        with run.autocast():
            vectors = encode(run.net, run.tokenizer, batch)   # forward pass under fp16 autocast on CUDA
        run.backward(loss(vectors))                           # the loss itself in float32
        run.update()                                          # optimizer (+ gradient scaler) and scheduler
        run.log({...}); run.save_checkpoint({...})
    run.finish(title=..., ylabel=...)                         # output/model and output/loss.png

Output folder: ``model/`` (Hugging Face folder with sentence-transformers' pooling files),
``checkpoints/last/`` (model, optimizer.pt, scheduler.pt, scaler.pt, rng.pt with the RNG states of
every rank, trainer_state.json), ``train_log.jsonl`` and the config file; on resume the log is cut
back to the checkpoint's step. Under ``torchrun`` (WORLD_SIZE > 1) the process group is initialised
(gloo on CPU, nccl on CUDA) when the trainer asks for it, the model is wrapped in
DistributedDataParallel, and only rank 0 writes.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import torch

from ..adapters import add_adapters, adapter_settings, trainable_parameters
from ..encoder import check_max_length, encoder_fingerprint, load_pretrained, resolve_device, same_encoder
from ..errors import SapbertError
from ..io import atomic_write_text
from .checkpoints import (
    STATE_FILE, MixedPrecision, append_log, find_checkpoint, load_checkpoint_file, model_card, plot_loss, read_log, restart_log,
    rng_state, save_model, seed_everything, set_rng_state, write_dir,
)

__all__ = ["Distributed", "RunConfig", "TrainingRun", "TrainingWarning", "changed_settings", "check_resumed_settings", "distributed"]


def base_fingerprint(model: str) -> Optional[str]:
    """The encoder fingerprint of a run's base model as it is now (None when it cannot be loaded: nothing to compare)."""
    try:
        tokenizer, loaded = load_pretrained(model)
    except SapbertError:
        return None
    return encoder_fingerprint(loaded, tokenizer)


class TrainingWarning(UserWarning):
    """Something about a training run that does not stop it (e.g. resuming with other settings)."""


class RunConfig(Protocol):
    """The settings every trainer's config has (TrainConfig, DhnsConfig)."""

    model: str
    output: str
    lr: float
    weight_decay: float
    seed: int
    pooling: str
    max_length: int
    device: str
    amp: bool
    cpu_bf16: bool


@dataclass
class Distributed:
    """This process's place among the training processes (one process: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


class distributed:
    """Context manager: the process group under torchrun (WORLD_SIZE > 1), else one process.

    ``with distributed(device) as (ctx, device):`` initialises gloo (CPU) or nccl (CUDA, one GPU per
    local rank) and destroys the group on exit if it was initialised here.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.initialized_here = False

    def __enter__(self):
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return Distributed(), self.device
        import torch.distributed as dist

        ctx = Distributed(int(os.environ.get("RANK", "0")), world_size, int(os.environ.get("LOCAL_RANK", "0")))
        device = self.device
        if device.type == "cuda":
            device = torch.device("cuda", ctx.local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
            self.initialized_here = True
        ctx.rank, ctx.world_size = dist.get_rank(), dist.get_world_size()
        return ctx, device

    def __exit__(self, *exc) -> None:
        if self.initialized_here:
            import torch.distributed as dist

            dist.destroy_process_group()


# settings that name files or folders: the same place spelled otherwise (./pairs.txt, an absolute path) is the same
PATH_SETTINGS = ("model", "pipeline", "pairs", "corpora", "vocab", "kge")


def _compared(key: str, value: Any) -> Any:
    """A setting's value as resume compares it: a path that exists here, resolved."""
    if key not in PATH_SETTINGS:
        return value
    if isinstance(value, list):
        return [_compared(key, item) for item in value]
    return os.path.realpath(value) if isinstance(value, str) and os.path.exists(value) else value


def changed_settings(config: Any, state: Mapping[str, Any], keys: Sequence[str]) -> List[str]:
    """'key (checkpoint's -> this run's)' for each of `keys` whose value differs from the one in the config a
    checkpoint's state recorded; a key the state lacks (a checkpoint of an older version) is not compared."""
    old = state.get("config", {})
    new = json.loads(json.dumps(dataclasses.asdict(config)))  # as the state recorded it: tuples become lists
    return [f"{key} ({old[key]!r} -> {new[key]!r})" for key in keys if key in old and _compared(key, old[key]) != _compared(key, new[key])]


def read_state(path: Path) -> Dict[str, Any]:
    """A checkpoint's trainer_state.json, with a SapbertError naming it when it is damaged."""
    try:
        state = json.loads(path.read_text(encoding="utf8"))
        if not isinstance(state, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as err:
        raise SapbertError(f"{path}: the checkpoint's state cannot be read ({err}); start again with --overwrite") from err
    return state


def same_input(key: str, recorded: Any, current: Any) -> bool:
    """Whether an input a checkpoint recorded is the one a resume reads: equal, where an encoder fingerprint recorded
    before a part was added to fingerprints (the base model's; the re-ranker's linker's encoder_fingerprint) matches on
    the parts it has (`same_encoder`)."""
    if key in ("model", "encoder_fingerprint") and isinstance(recorded, str) and isinstance(current, str):
        return same_encoder(recorded, current)
    if isinstance(recorded, dict) and isinstance(current, dict):
        return recorded.keys() == current.keys() and all(same_input(k, recorded[k], current[k]) for k in recorded)
    return recorded == current


RESUMED_CHANGES = "resumed_with_other_settings"  # key of the run's config file, checkpoints and model card


def check_resumed_settings(
    config: Any, state: Mapping[str, Any], checkpoint: Path, trajectory_keys: Sequence[str], fixed_keys: Sequence[str] = (),
    inputs: Optional[Mapping[str, Any]] = None, progress: Optional[Callable[[Mapping[str, Any]], Tuple[int, int, str]]] = None,
) -> Optional[Dict[str, Any]]:
    """Resuming `checkpoint` (whose `state` recorded its config) with `config`.

    SapbertError, naming what differs: another value of a `fixed_keys` setting (one that changes what the model is);
    `inputs` (digests of the data and models the run reads, see TrainingRun.start) other than those the state
    recorded; a checkpoint past the run's end, or (`progress(state)`: done, total and their unit) a run that already
    ended and would train nothing under changed `trajectory_keys` settings (the model would be the old one, recorded
    with the new settings). Changed `trajectory_keys` settings of a run with work left: a TrainingWarning (the run
    continues, unlike an uninterrupted one), and the record of that change ({"at": "N steps", "changed": [...]}) that
    the run keeps under RESUMED_CHANGES; None when nothing changed."""
    fixed = changed_settings(config, state, fixed_keys)
    if fixed:
        raise SapbertError(
            f"{checkpoint}: cannot resume with another {', '.join(fixed)}; resume with the checkpoint's setting, or start "
            "again with --overwrite"
        )
    recorded = state.get("inputs", {})
    for key, value in (inputs or {}).items():
        if key in recorded and not same_input(key, recorded[key], value):
            raise SapbertError(
                f"{checkpoint}: cannot resume: the run's {key} changed since the checkpoint (recorded {recorded[key]!r}, now "
                f"{value!r}); resume with what it was trained on, or start again with --overwrite"
            )
    changed = changed_settings(config, state, trajectory_keys)
    done, total, unit = progress(state) if progress is not None else (0, 1, "steps")
    if done > total:
        raise SapbertError(
            f"{checkpoint}: the checkpoint has done {done} {unit}, more than this run's {total}; resume with at least {done}, "
            "or start again with --overwrite"
        )
    if changed and done == total:
        raise SapbertError(
            f"{checkpoint}: the run already finished ({done} {unit}), so resuming trains nothing and the model would not "
            f"have {', '.join(changed)}; start again with --overwrite (or another output) to train with them"
        )
    if not changed:
        return None
    warnings.warn(
        f"{checkpoint}: resuming with other settings than the checkpoint's ({', '.join(changed)}): training continues, "
        f"but will not match an uninterrupted run (the run's records list the change under {RESUMED_CHANGES})",
        TrainingWarning,
        stacklevel=4,
    )
    return {"at": f"{done} {unit}", "changed": changed}


def _constant_after_warmup(warmup_steps: int) -> Callable[[int], float]:
    return lambda step: min(1.0, (step + 1) / (warmup_steps + 1)) if warmup_steps else 1.0


def _freeze_unused(model) -> None:
    """The pooler head gets no gradient from [CLS]/mean pooling of the last hidden state: freeze it so
    that DistributedDataParallel does not wait for its gradients (AdamW skips parameters without a
    gradient anyway, so one process trains exactly as before)."""
    pooler = getattr(model, "pooler", None)
    if isinstance(pooler, torch.nn.Module):
        pooler.requires_grad_(False)


class LossWindow:
    """The losses of the steps since the last log line and the examples they took, for a log entry
    (the DHNS and re-ranker trainers log mean loss and mentions per second over such windows)."""

    def __init__(self) -> None:
        self.losses: List[float] = []
        self.examples = 0
        self.started = time.perf_counter()

    def add(self, loss: float, examples: int) -> None:
        self.losses.append(loss)
        self.examples += examples

    def entry(self, step: int, epoch: int, elapsed: float) -> Dict[str, Any]:
        """The log entry of the window (step, epoch, loss, mentions_per_s, elapsed); the window starts again."""
        now = time.perf_counter()
        entry = {
            "step": step,
            "epoch": epoch,
            "loss": round(sum(self.losses) / max(len(self.losses), 1), 6),
            "mentions_per_s": round(self.examples / max(now - self.started, 1e-9), 2),
            "elapsed": round(elapsed, 3),
        }
        self.losses, self.examples, self.started = [], 0, now
        return entry


class TrainingRun:
    """One run in ``config.output``: built by ``start``, which restores everything from the last
    checkpoint when resuming (on CPU a resumed run ends with the weights of an uninterrupted one)."""

    def __init__(
        self, config: RunConfig, config_file: str, device: torch.device, ctx: Distributed, warmup_steps: int = 0,
        freeze_pooler: bool = True,
    ):
        self.config = config
        self.warmup_steps = warmup_steps
        self.freeze_pooler = freeze_pooler
        self.config_file = config_file
        self.device = device
        self.ctx = ctx
        self.output = Path(config.output)
        self.log_path = self.output / "train_log.jsonl"
        self.checkpoint: Optional[Path] = None
        self.state: Dict[str, Any] = {}
        self.inputs: Dict[str, Any] = {}  # digests of what the run reads (TrainingRun.start)
        self.log_entries = 0  # lines in train_log.jsonl, saved with a checkpoint: a resume keeps those
        self.tokenizer = self.model = self.net = self.optimizer = self.scheduler = None
        self.precision = MixedPrecision(device, config.amp, config.cpu_bf16)
        self.started = time.perf_counter()
        self.elapsed_before = 0.0
        self.resumed_changes: List[Dict[str, Any]] = []  # settings changed at each resume (check_resumed_settings)

    def recorded_config(self) -> Dict[str, Any]:
        """The run's settings as its records give them: the config, and the settings changed at a resume, if any."""
        changes = {RESUMED_CHANGES: self.resumed_changes} if self.resumed_changes else {}
        return {**dataclasses.asdict(self.config), **changes}

    @classmethod
    def start(
        cls, config: RunConfig, *, config_file: str, resume: bool, device: Optional[torch.device] = None,
        ctx: Optional[Distributed] = None, warmup_steps: int = 0, freeze_pooler: bool = True,
        trajectory_keys: Sequence[str] = (), fixed_keys: Sequence[str] = (), inputs: Optional[Mapping[str, Any]] = None,
        progress: Optional[Callable[[Mapping[str, Any]], Tuple[int, int, str]]] = None,
    ) -> "TrainingRun":
        """Seed, load the model (from the checkpoint when resuming), build AdamW and a constant
        learning rate after `warmup_steps`, restore their states, write the config file and (re)start
        the log. `ctx` and `device` come from `distributed` for multi-process runs. freeze_pooler:
        leave the unused pooler head out of the optimizer (needed by DistributedDataParallel).

        Resuming compares the checkpoint's recorded config with this one: a changed `fixed_keys`
        setting (one that changes what the model is) is a SapbertError, before anything is loaded or
        written; a changed `trajectory_keys` setting a TrainingWarning (the run continues, unlike an
        uninterrupted one). Other settings (epochs, device, progress, ...) may change freely. `inputs`: digests of what
        the run reads (data files, the re-ranker's linker), saved with each checkpoint and compared on resume; the base
        model's fingerprint is added to them. `progress(state)`: (done, total, unit) of a checkpoint under this config
        (see check_resumed_settings)."""
        device = device if device is not None else resolve_device(config.device)
        run = cls(config, config_file, device, ctx or Distributed(), warmup_steps, freeze_pooler)
        run.inputs = dict(inputs or {})
        if resume:
            from ..outputs import RUN_CONFIG_FILES

            others = [name for name in RUN_CONFIG_FILES if name != config_file and (run.output / name).is_file()]
            if others and not (run.output / config_file).is_file():  # its optimizer and state would not fit this model
                raise SapbertError(
                    f"{run.output} holds a run of another trainer (its {others[0]}); --resume continues a run of this one: "
                    "choose another --output"
                )
            run.checkpoint = find_checkpoint(run.output)
            if run.checkpoint is None:
                warnings.warn(
                    f"no checkpoint in {run.output / 'checkpoints'}: training starts from {config.model}", TrainingWarning,
                    stacklevel=3,
                )
            else:
                run.state = read_state(run.checkpoint / STATE_FILE)
                recorded_model = run.state.get("inputs", {}).get("model")
                if recorded_model is not None:  # a base model that cannot be loaded now is not compared
                    run.inputs["model"] = base_fingerprint(config.model) or recorded_model
                change = check_resumed_settings(config, run.state, run.checkpoint, trajectory_keys, fixed_keys, run.inputs, progress)
                run.resumed_changes = list(run.state.get(RESUMED_CHANGES, [])) + ([change] if change else [])
        seed_everything(config.seed + run.ctx.rank)
        run._load_model()
        run._restore()
        if run.ctx.main:
            run.output.mkdir(parents=True, exist_ok=True)
            atomic_write_text(run.output / config_file, json.dumps(run.recorded_config(), indent=2) + "\n")
            run.log_entries = restart_log(
                run.log_path, run.state.get("step", 0) if run.checkpoint is not None else None, run.state.get("log_entries")
            )
        run.started = time.perf_counter()
        return run

    def _load_model(self) -> None:
        self.tokenizer, self.model = load_pretrained(str(self.checkpoint or self.config.model))
        if self.checkpoint is None:
            self.inputs["model"] = encoder_fingerprint(self.model, self.tokenizer)
        check_max_length(self.model, self.config.max_length, f"the model {self.config.model}")
        if getattr(self.config, "context_window", 0):  # before the optimizer: the embeddings grow by two rows
            from ..context import add_markers

            add_markers(self.tokenizer, self.model)
        self._add_adapters()
        if self.freeze_pooler:
            _freeze_unused(self.model)
        self.model.to(self.device)
        self.model.train()
        self.net = self.model
        if self.ctx.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.net = DistributedDataParallel(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad], lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _constant_after_warmup(self.warmup_steps))

    def _add_adapters(self) -> None:
        """With `adapters` (a reduction factor) in the config, freeze the encoder and train new
        bottleneck adapters; a model that already has adapters (a checkpoint, or an adapter model to
        train further) keeps them and trains only them."""
        factor = int(getattr(self.config, "adapters", 0) or 0)
        settings = adapter_settings(self.model)
        if settings is None and factor:
            add_adapters(self.model, factor, encoder_fingerprint(self.model, self.tokenizer))
        elif settings is not None and factor and settings["reduction_factor"] != factor:
            raise SapbertError(
                f"training setting adapters={factor}: {self.checkpoint or self.config.model} already has adapters "
                f"of reduction factor {settings['reduction_factor']}"
            )
        if self.ctx.main and adapter_settings(self.model) is not None:
            total = sum(p.numel() for p in self.model.parameters())
            trainable = trainable_parameters(self.model)
            print(f"adapters: training {trainable:,} of {total:,} parameters ({100 * trainable / total:.2f}%)", file=sys.stderr)

    def _restore(self) -> None:
        if self.checkpoint is None:
            return
        folder = self.checkpoint
        self.optimizer.load_state_dict(load_checkpoint_file(folder / "optimizer.pt", map_location=self.device))
        if (folder / "scheduler.pt").exists():  # DHNS checkpoints of 0.2 had none (constant rate)
            self.scheduler.load_state_dict(load_checkpoint_file(folder / "scheduler.pt"))
        self._apply_rate_settings()
        self.precision.load(folder)
        states = load_checkpoint_file(folder / "rng.pt")
        states = [states] if isinstance(states, dict) else states  # one process's state (DHNS of 0.2)
        if self.ctx.rank < len(states):
            set_rng_state(states[self.ctx.rank])
        self.elapsed_before = float(self.state.get("elapsed", 0.0))

    def _apply_rate_settings(self) -> None:
        """This run's lr and weight_decay in place of those the checkpoint's optimizer and schedule state carried:
        a resume with another value (which warns) trains with it, as train_config.json then records."""
        self.scheduler.base_lrs = [float(self.config.lr) for _ in self.optimizer.param_groups]
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["initial_lr"] = base
            group["lr"] = base * self.scheduler.lr_lambdas[0](self.scheduler.last_epoch)
            group["weight_decay"] = float(self.config.weight_decay)
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    # ---------------------------------------------------------------------------------------------
    # a step

    def autocast(self):
        """The forward pass's context: fp16 autocast on CUDA with `amp`, bfloat16 on CPU with `cpu_bf16`, else nothing."""
        return self.precision.autocast()

    def backward(self, loss: torch.Tensor) -> None:
        self.precision.backward(loss)

    def update(self) -> None:
        """Step the optimizer (through the gradient scaler) and the learning-rate schedule, then clear
        the gradients for the next step."""
        self.precision.step(self.optimizer)
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    @property
    def lr(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def elapsed(self) -> float:
        """Training seconds of the whole run, earlier sessions of a resumed run included."""
        return self.elapsed_before + time.perf_counter() - self.started

    # ---------------------------------------------------------------------------------------------
    # what is written

    def log(self, entry: Dict[str, Any]) -> None:
        """Append one line to train_log.jsonl (rank 0)."""
        if self.ctx.main:
            append_log(self.log_path, entry)
            self.log_entries += 1

    def mean_over_ranks(self, value: float) -> float:
        if self.ctx.world_size == 1:
            return value
        import torch.distributed as dist

        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return float(tensor.item()) / self.ctx.world_size

    def save_checkpoint(self, record: Dict[str, Any]) -> None:
        """checkpoints/last: model, optimizer, scheduler, scaler, every rank's RNG state, and `record`
        (with `step`; `elapsed`, `world_size` and the config are added) as trainer_state.json."""
        states: List[Any] = [rng_state()]
        if self.ctx.world_size > 1:
            import torch.distributed as dist

            gathered: List[Any] = [None] * self.ctx.world_size
            dist.all_gather_object(gathered, states[0])
            states = gathered
        if self.ctx.main:
            record = dict(
                record, elapsed=self.elapsed(), world_size=self.ctx.world_size, config=dataclasses.asdict(self.config), inputs=self.inputs,
                log_entries=self.log_entries, **({RESUMED_CHANGES: self.resumed_changes} if self.resumed_changes else {}),
            )

            def fill(folder: Path) -> None:
                self._save_model(folder)
                torch.save(self.optimizer.state_dict(), folder / "optimizer.pt")
                torch.save(self.scheduler.state_dict(), folder / "scheduler.pt")
                self.precision.save(folder)
                torch.save(states, folder / "rng.pt")
                (folder / STATE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")

            try:
                write_dir(self.output / "checkpoints" / "last", fill)
            except (OSError, RuntimeError) as err:  # torch.save reports a full disk as a RuntimeError
                raise SapbertError(
                    f"could not write the checkpoint {self.output / 'checkpoints' / 'last'} ({str(err).splitlines()[0]}); is the "
                    "disk full? The checkpoint before it is kept: free space, then --resume"
                ) from err
        self.barrier()

    def finish(self, title: str, ylabel: str) -> Path:
        """Write output/model and the loss plot (rank 0); the model folder."""
        model_dir = self.output / "model"
        if self.ctx.main:
            card = model_card(title, self.recorded_config(), (read_log(self.log_path) or [None])[-1])

            def fill(folder: Path) -> None:
                self._save_model(folder)
                (folder / "README.md").write_text(card, encoding="utf8")

            write_dir(model_dir, fill)
            plot_loss(self.log_path, self.output / "loss.png", title=title, ylabel=ylabel)
        self.barrier()
        return model_dir

    def barrier(self) -> None:
        if self.ctx.world_size > 1:
            import torch.distributed as dist

            dist.barrier()

    def _save_model(self, folder: Path) -> None:
        save_model(folder, self.model, self.tokenizer, self.config.pooling, self.config.max_length)
