"""Run bookkeeping shared by the trainers: seeds and RNG states, atomic folders, checkpoints, logs, plots.

Folders (models, checkpoints) are written atomically: ``write_dir`` fills a temporary folder next to the
target and renames it into place (the previous folder is first renamed to ``<name>.old``, then removed;
a crash between the two renames leaves ``<name>.old``, which ``find_checkpoint`` then uses).
"""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy
import torch

from ..encoder import save_pretrained, write_pooling_files
from ..errors import SapbertError
from ..extras import require
from ..io import atomic_write, atomic_write_text, give_default_mode
from ..outputs import record_written_files

__all__ = [
    "CPU_BF16_HELP", "STATE_FILE", "MixedPrecision", "append_log", "find_checkpoint", "plot_loss", "read_log", "require_at_least_one", "restart_log",
    "rng_state", "save_model", "seed_everything", "set_rng_state", "write_dir",
]

STATE_FILE = "trainer_state.json"


def require_at_least_one(config: Any, keys: Sequence[str]) -> None:
    """Raise SapbertError naming the first of these settings of `config` that is below 1."""
    for key in keys:
        if int(getattr(config, key)) < 1:
            raise SapbertError(f"training setting {key}={getattr(config, key)!r} must be at least 1")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    numpy.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def rng_state() -> Dict[str, Any]:
    kind, keys, pos, has_gauss, cached = numpy.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    numpy.random.set_state((kind, numpy.asarray(keys, dtype="uint32"), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _replace_dir(tmp: Path, target: Path) -> None:
    """Put the finished folder `tmp` at `target` (see the module docstring for the crash safety)."""
    old = target.with_name(target.name + ".old")
    if target.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(target, old)
    os.replace(tmp, target)
    if old.exists():
        shutil.rmtree(old)


def write_dir(target: Path, fill) -> None:
    """Call fill(tmp_folder) on a fresh folder next to `target`, then move it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        give_default_mode(tmp)
        fill(tmp)
        record_written_files(tmp)
        _replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


CPU_BF16_HELP = ("bfloat16 autocast of the forward pass on CPU: a SAP step ran 1.6x (MiniLM) to 2.1x (BERT-base) "
                 "as fast on a CPU with AMX; CPUs without AMX or AVX512-BF16 run it slower.")


class MixedPrecision:
    """Autocast of the forward pass: fp16 with gradient scaling on CUDA when `amp` is on, bfloat16 on CPU
    when `cpu_bf16` is on (no scaling: bfloat16 has float32's range); float32 and no-ops otherwise.

    One object per run, shared by the SAP and DHNS trainers; its scaler state is saved in (and
    restored from) checkpoints as scaler.pt, so a resumed CUDA run continues with the same scale.
    """

    FILE = "scaler.pt"

    def __init__(self, device: torch.device, amp: bool, cpu_bf16: bool = False):
        self.enabled = bool(amp) and device.type == "cuda"
        self.cpu_bf16 = bool(cpu_bf16) and device.type == "cpu"
        if self.cpu_bf16:
            from ..backends import warn_if_emulated_on_cpu

            warn_if_emulated_on_cpu(torch.bfloat16, "--cpu-bf16", "float32 training")
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.enabled)

    def autocast(self):
        """The forward pass's context: fp16 autocast on CUDA, bfloat16 autocast on CPU, or nothing."""
        if self.enabled:
            return torch.autocast(device_type="cuda", dtype=torch.float16)
        if self.cpu_bf16:
            return torch.autocast(device_type="cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def step(self, optimizer) -> None:
        """Unscale, step the optimizer (skipped on inf/nan gradients under fp16) and update the scale."""
        self.scaler.step(optimizer)
        self.scaler.update()

    def save(self, folder: Path) -> None:
        torch.save(self.scaler.state_dict(), Path(folder) / self.FILE)

    def load(self, folder: Path) -> None:
        path = Path(folder) / self.FILE
        if path.exists():
            self.scaler.load_state_dict(load_checkpoint_file(path))


def load_checkpoint_file(path: Path, map_location=None) -> Any:
    """torch.load of one file of a checkpoint, with a SapbertError naming it when it is missing or damaged (a run
    killed while it was written)."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        raise SapbertError(
            f"{path}: the checkpoint file cannot be read ({str(err).splitlines()[0]}); start again with --overwrite"
        ) from err


def save_model(folder: Path, model, tokenizer, pooling: str, max_length: int) -> None:
    """The Hugging Face model folder that the linker loads as `model`: weights, config, tokenizer, and
    sentence-transformers' pooling files, so commands given this folder pool as it was trained."""
    save_pretrained(folder, model, tokenizer)
    write_pooling_files(folder, pooling, max_length, int(model.config.hidden_size))


def model_card(title: str, config: Dict[str, Any], last_log: Optional[Dict[str, Any]]) -> str:
    """README.md of a trained encoder folder (Hugging Face's model card convention): what it was trained from,
    on what, with which settings, and how far the run got; pure, so it is tested as text."""
    pooling, max_length = config.get("pooling"), config.get("max_length")
    data = config.get("pairs") or ", ".join(config.get("corpora") or []) or "?"  # SAP pairs, or DHNS corpora
    lines = [
        "---",
        "library_name: transformers",
        "tags: [sapbert, entity-linking, biomedical, spacy-sapbert]",
        "---",
        "",
        f"# {config.get('model', 'encoder')}: {title}",
        "",
        f"Trained by spacy-sapbert ({title}) from `{config.get('model')}` on `{data}`.",
        f"Encode names and mentions with {pooling} pooling at max_length {max_length}; this folder's",
        "sentence-transformers files (modules.json, 1_Pooling/) and sapbert_encoder.json say so: spacy-sapbert's",
        "commands take them as their defaults, and the sapbert_linker component warns when its config differs.",
        "",
        "```python",
        f"nlp.add_pipe(\"sapbert_linker\", config={{\"model\": \"THIS_FOLDER\", \"pooling\": \"{pooling}\", \"max_length\": {max_length}}})",
        "```",
        "",
        "## Training run",
        "",
    ]
    if last_log:
        lines.append(
            f"Last logged step {last_log.get('step')} (epoch {last_log.get('epoch')}), loss {last_log.get('loss')}, "
            f"{last_log.get('elapsed')} s of training."
        )
    else:
        lines.append("No step was logged.")
    lines += [
        "",
        "The trainer does not evaluate. Score the model on a dev set with",
        "`python -m spacy_sapbert evaluate DEV_CORPUS --vocab VOCABULARY --model THIS_FOLDER`.",
        "",
        "## Settings",
        "",
        "| setting | value |",
        "|---|---|",
    ]
    lines += [f"| `{key}` | `{value}` |" for key, value in config.items()]
    return "\n".join(lines) + "\n"


def find_checkpoint(output: Path) -> Optional[Path]:
    """output/checkpoints/last (or last.old, left by a crash while replacing it) if it is complete."""
    folder = Path(output) / "checkpoints"
    for candidate in (folder / "last", folder / "last.old"):
        if (candidate / STATE_FILE).is_file():
            return candidate
    return None


# ----------------------------------------------------------------------------------------------------
# log and plot


def read_log(path: Path) -> List[Dict[str, Any]]:
    entries = []
    if path.exists():
        for line in path.read_text(encoding="utf8").splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a crash
    return entries


def restart_log(path: Path, last_step: Optional[int], entries: Optional[int] = None) -> int:
    """Start a run's log: keep what was logged before the checkpoint a run resumes from (its first `entries` entries,
    as the checkpoint counted them; a checkpoint that did not count them: the entries up to `last_step`), or nothing
    (`last_step` None: a fresh run). The number of entries kept."""
    if last_step is None:
        kept: List[Dict[str, Any]] = []
    elif entries is not None:
        kept = read_log(path)[:entries]
    else:
        kept = [e for e in read_log(path) if e.get("step", 0) <= last_step]
    atomic_write_text(path, "".join(json.dumps(e) + "\n" for e in kept))
    return len(kept)


def append_log(path: Path, entry: Dict[str, Any]) -> None:
    with open(path, "a", encoding="utf8") as handle:
        handle.write(json.dumps(entry) + "\n")


def plot_loss(
    log_path: Path, png_path: Path, title: str = "self-alignment pretraining", ylabel: str = "multi-similarity loss"
) -> None:
    """Loss per logged step of a train_log.jsonl as a PNG (matplotlib Agg canvas, no global backend)."""
    FigureCanvasAgg = require("matplotlib.backends.backend_agg").FigureCanvasAgg
    Figure = require("matplotlib.figure").Figure

    entries = read_log(Path(log_path))
    figure = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    steps = [e["step"] for e in entries if e.get("loss") is not None]
    losses = [e["loss"] for e in entries if e.get("loss") is not None]
    axes.plot(steps, losses, marker="." if len(steps) < 50 else None, linewidth=1)
    axes.set_xlabel("step")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    atomic_write(png_path, lambda tmp: figure.savefig(str(tmp), format="png"))
