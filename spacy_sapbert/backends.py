"""Inference backends of the encoder: torch (default, float32), torch in bfloat16 (`torch-bf16`) or float16
(`torch-fp16`), ONNX Runtime (`onnx`) and its int8 dynamic quantization (`onnx-int8`).

The reduced-precision torch backends run a bfloat16 / float16 copy of the model; the float32 weights stay
the encoder's own (its fingerprint, what is saved). bfloat16 is the fast one on CPUs with AMX or
AVX512-BF16 (Intel Sapphire Rapids and later, AMD Zen 4 and later) and on recent GPUs; float16 is for
GPUs. Both are checked against float32 when they are made, like int8 (`check_agreement`).

An ONNX backend runs the same tokenizer, length-sorted chunks and pooling as torch (`pooled_chunks`);
only the transformer's forward pass moves to ONNX Runtime. The model is exported once from the torch
weights (torch.onnx's dynamo exporter, dynamic batch and sequence axes) and saved beside them in the
encoder folder, so a saved or packaged pipeline loads it without exporting again:

    model.onnx / model-int8.onnx    the exported (and quantized) graph, weights inside
    onnx_export.json                the torch encoder's fingerprint each file was made from, and its signature

A file made from other weights than the folder's torch weights, or one whose bytes are not those recorded, is
refused (never silently other vectors).
Needs the `onnx` extra (onnxruntime, onnx, onnxscript).
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import shutil
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Optional

import numpy
import torch

from .encoder import pool, same_encoder
from .errors import EncoderLoadError
from .extras import require
from .io import atomic_write, atomic_write_text, file_signature

__all__ = [
    "BACKENDS", "EXPORT_META", "ONNX_FILES", "ONNX_RUNTIME_REQUIREMENT", "REDUCED_PRECISION", "OnnxModel", "export_onnx", "onnx_model_for",
    "half_precision_copy", "reduced_precision_model", "save_onnx", "saved_onnx",
]

BACKENDS = ("torch", "torch-bf16", "torch-fp16", "onnx", "onnx-int8")
REDUCED_PRECISION = {"torch-bf16": torch.bfloat16, "torch-fp16": torch.float16}  # torch backends on a copy in that dtype
ONNX_FILES = {"onnx": "model.onnx", "onnx-int8": "model-int8.onnx"}
ONNX_RUNTIME_REQUIREMENT = "onnxruntime>=1.17"  # what a pipeline on an ONNX backend needs to load (setup.py's onnx extra)
EXPORT_META = "onnx_export.json"
SIGNATURES = "signatures"  # the key of onnx_export.json that records each ONNX file's io.file_signature
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 18
# onnxruntime's dynamic quantization, one scale per output channel of each weight matrix: on all-MiniLM-L6-v2
# one scale per matrix moved MEDIC name vectors to a mean cosine of 0.955 with torch's, per channel to 0.991.
INT8_QUANTIZATION = {"weight_type": "QInt8", "per_channel": True}
# int8 is refused for a model whose quantized vectors drift this far from float32 on AGREEMENT_PROBES: on
# all-mpnet-base-v2 the same recipe gave a mean cosine of 0.02 (MiniLM: 0.991), and links would silently change.
MIN_INT8_COSINE = 0.98
# bfloat16 / float16 must agree closer: rounding alone gives about 0.9999 (MiniLM, bfloat16); lower means
# overflow or a model that does not run in that precision.
MIN_HALF_COSINE = 0.995
AGREEMENT_PROBES = (
    "heart failure", "type 2 diabetes mellitus", "breast cancer", "hereditary nonpolyposis colorectal cancer",
    "ataxia telangiectasia", "renal failure", "myocardial infarction", "hypertension", "duchenne muscular dystrophy",
    "acute lymphoblastic leukemia", "seizures", "cystic fibrosis",
)


class _LastHiddenState(torch.nn.Module):
    """The transformer's forward pass with tensors in and the last hidden state out (what ONNX exports)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state


@contextlib.contextmanager
def _quiet(*loggers: str):
    """Exporters and quantizers log advice meant for their own developers: keep it below ERROR out."""
    saved = [(logging.getLogger(name), logging.getLogger(name).level) for name in loggers]
    for logger, _ in saved:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


def _read_meta(folder: Path) -> Dict[str, str]:
    path = folder / EXPORT_META
    return json.loads(path.read_text(encoding="utf8")) if path.is_file() else {}


def _export_fp32(model, tokenizer, target: Path) -> None:
    require("onnxscript")  # torch.onnx's dynamo exporter; named here so a missing one names the extra
    require("onnx")
    model = copy.deepcopy(model).to("cpu").eval()
    example = tokenizer(["heart failure", "an example name of a disease"], padding=True, return_tensors="pt")
    names = [name for name in INPUT_NAMES if name in example]
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence", min=2, max=4096)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), _quiet("torch.onnx", "torch.export"):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            _LastHiddenState(model), tuple(example[name] for name in names), dynamo=True, opset_version=OPSET,
            input_names=names, output_names=["last_hidden_state"],
            dynamic_shapes={name: {0: batch, 1: seq} for name in names}, verbose=False,
        )
    atomic_write(target, lambda tmp: program.save(str(tmp), external_data=False))


def _quantize_int8(source: Path, target: Path, tokenizer) -> None:
    """Quantize `source` into a temporary file beside `target` and move it into place only when it passes
    `_check_int8_agreement`; a refused file never reaches `target` (whatever was there stays)."""
    quantization = require("onnxruntime.quantization")

    def write(tmp: Path) -> None:
        quantization.quantize_dynamic(
            str(source), str(tmp), weight_type=getattr(quantization.QuantType, INT8_QUANTIZATION["weight_type"]),
            per_channel=INT8_QUANTIZATION["per_channel"],
        )
        _check_int8_agreement(source, tmp, tokenizer)

    with _quiet("", "onnxruntime"):  # quantize_dynamic advises pre-processing on the root logger
        atomic_write(target, write)


def probe_vectors(model, tokenizer) -> torch.Tensor:
    """Unit mean-pooled float32 vectors of AGREEMENT_PROBES from a torch model or an OnnxModel."""
    batch = tokenizer(list(AGREEMENT_PROBES), padding=True, return_tensors="pt")
    device = getattr(model, "device", torch.device("cpu"))
    with torch.inference_mode():
        hidden = model(**batch.to(device)).last_hidden_state.float()
    return torch.nn.functional.normalize(pool(hidden, batch["attention_mask"].to(hidden.device), "mean"), dim=-1).cpu()


def check_agreement(reference: torch.Tensor, vectors: torch.Tensor, backend: str, minimum: float, instead: str) -> None:
    """Raise EncoderLoadError when `vectors` (probe_vectors of `backend`) have a mean cosine below `minimum`
    with `reference` (float32's): that backend would change links."""
    cosine = float((reference * vectors).sum(-1).mean())
    if not cosine >= minimum:  # NaN (float16 overflow) fails too
        raise EncoderLoadError(
            f"backend {backend!r}: this model's vectors agree with float32 at a mean cosine of {cosine:.3f} "
            f"(< {minimum}), which would change links; use {instead}"
        )


def _check_int8_agreement(fp32: Path, int8: Path, tokenizer) -> None:
    """`check_agreement` of the int8 file against the float32 file it was quantized from."""
    cpu = torch.device("cpu")
    check_agreement(
        probe_vectors(OnnxModel(fp32, 0, cpu), tokenizer), probe_vectors(OnnxModel(int8, 0, cpu, per_row=True), tokenizer),
        "onnx-int8", MIN_INT8_COSINE, "backend 'onnx' (same vectors as torch) or 'torch'",
    )


def half_precision_copy(model, backend: str, what: str):
    """An eval-mode copy of the float32 torch `model` in the dtype of `backend` (torch-bf16, torch-fp16), with a
    warning naming `what` when this CPU runs that dtype emulated; the float32 model is left as it was. Its caller
    checks the copy against float32 (encoders: probe vectors; re-rankers: probe pair logits)."""
    dtype = REDUCED_PRECISION[backend]
    if next(model.parameters()).device.type == "cpu":
        warn_if_emulated_on_cpu(dtype, what, "'torch'")
    return copy.deepcopy(model).to(dtype).eval()


def reduced_precision_model(model, tokenizer, backend: str):
    """A copy of the float32 torch `model` in the dtype of `backend` (torch-bf16, torch-fp16), checked
    against float32 on AGREEMENT_PROBES; the float32 model is left as it was."""
    runtime = half_precision_copy(model, backend, f"backend {backend!r}")
    check_agreement(
        probe_vectors(model, tokenizer), probe_vectors(runtime, tokenizer), backend, MIN_HALF_COSINE, "backend 'torch'"
    )
    return runtime


def warn_if_emulated_on_cpu(dtype: torch.dtype, what: str, instead: str) -> None:
    """A RuntimeWarning when this CPU runs `dtype` matrix products emulated, so `what` is slower than `instead`."""
    if not _native_on_cpu(dtype):
        warnings.warn(
            f"{what}: this CPU has no native {dtype} matrix units (AMX, AVX512-BF16/FP16); "
            f"it runs emulated, slower than {instead}", RuntimeWarning, stacklevel=3,
        )


def _native_on_cpu(dtype: torch.dtype) -> bool:
    """Whether oneDNN runs `dtype` matrix products natively on this CPU."""
    probe = torch.ops.mkldnn._is_mkldnn_bf16_supported if dtype == torch.bfloat16 else torch.ops.mkldnn._is_mkldnn_fp16_supported
    try:
        return bool(probe())
    except (AttributeError, RuntimeError):  # a torch without these probes
        return False


def export_onnx(model, tokenizer, folder: Path, backend: str, fingerprint: str) -> Path:
    """Write the ONNX file of `backend` (and, for int8, the float32 file it is quantized from) into
    `folder`, recording `fingerprint` (the torch encoder's) in onnx_export.json; its path."""
    folder = Path(folder)
    meta = _read_meta(folder)
    fp32 = folder / ONNX_FILES["onnx"]
    signatures = meta.setdefault(SIGNATURES, {})
    if meta.get(fp32.name) != fingerprint or not fp32.is_file() or signatures.get(fp32.name) != file_signature(fp32):
        _export_fp32(model, tokenizer, fp32)
        meta[fp32.name] = fingerprint
        signatures[fp32.name] = file_signature(fp32)
    if backend == "onnx-int8":
        int8 = folder / ONNX_FILES["onnx-int8"]
        _quantize_int8(fp32, int8, tokenizer)
        meta[int8.name] = fingerprint
        meta["int8_quantization"] = INT8_QUANTIZATION
        signatures[int8.name] = file_signature(int8)
    atomic_write_text(folder / EXPORT_META, json.dumps(meta, indent=2) + "\n")
    return folder / ONNX_FILES[backend]


def saved_onnx(folder: Path, backend: str, fingerprint: str) -> Optional[Path]:
    """The ONNX file of `backend` saved in an encoder folder, or None; a file exported from other torch
    weights than `fingerprint` is an EncoderLoadError naming it."""
    path = Path(folder) / ONNX_FILES[backend]
    if not path.is_file():
        return None
    meta = _read_meta(Path(folder))
    made_from = meta.get(path.name)
    if not same_encoder(made_from, fingerprint):
        raise EncoderLoadError(
            f"{path} was exported from the encoder of fingerprint {made_from!r}, but the torch weights beside it have "
            f"fingerprint {fingerprint!r}; delete it (it is exported again) or restore the weights it came from"
        )
    recorded = meta.get(SIGNATURES, {}).get(path.name)  # absent from exports made before signatures were kept
    if recorded is not None and recorded != file_signature(path):
        raise EncoderLoadError(
            f"{path} is not the file {EXPORT_META} records (its content differs: another export copied over it?); "
            "delete it (it is exported again) or restore the file exported with this encoder"
        )
    return path


class OnnxModel:
    """An ONNX Runtime session that stands in for a Hugging Face model in `pooled_chunks`: called with the
    tokenizer's tensors, it returns an object with `last_hidden_state`; `config.hidden_size` as the model's.

    `per_row`: run each row alone, without its padding (int8: dynamic quantization takes each activation scale over
    the whole input, so a batch's other texts and its padding moved a text's vector, and links changed with the batch:
    46 of 1,747 NCBI-disease mentions between batches of 1 and 64 in an audit)."""

    def __init__(self, path: Path, hidden_size: int, device: torch.device, per_row: bool = False):
        ort = require("onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()  # the process's torch setting (one per nlp.pipe child)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        providers = ["CPUExecutionProvider"]
        if device.type == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise EncoderLoadError(
                    "device is CUDA but this onnxruntime has no CUDAExecutionProvider: pip install onnxruntime-gpu, "
                    "or use backend='torch' on the GPU"
                )
            providers = [("CUDAExecutionProvider", {"device_id": device.index or 0})]
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), options, providers=providers)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.config = SimpleNamespace(hidden_size=hidden_size)
        self.device = device
        self.per_row = per_row

    def __getstate__(self) -> Dict[str, object]:
        """Pickled as its file (spaCy's spawned nlp.pipe processes): a session does not pickle."""
        return {"path": self.path, "hidden_size": self.config.hidden_size, "device": self.device, "per_row": self.per_row}

    def __setstate__(self, state: Dict[str, object]) -> None:
        self.__init__(state["path"], state["hidden_size"], state["device"], state.get("per_row", False))

    def __call__(self, **batch: torch.Tensor) -> SimpleNamespace:
        if "token_type_ids" in self.input_names and "token_type_ids" not in batch:  # callers that pass ids and mask only
            batch = {**batch, "token_type_ids": torch.zeros_like(batch["input_ids"])}
        feeds = {name: batch[name].cpu().numpy().astype(numpy.int64) for name in self.input_names}
        if self.per_row:
            hidden = self._rows_alone(feeds)
        else:
            hidden = self.session.run(["last_hidden_state"], feeds)[0]
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden).to(self.device))

    def one_text_at_a_time(self) -> "OnnxModel":
        """This session (the same one: not loaded twice), run on each row alone (`per_row`)."""
        alone = object.__new__(OnnxModel)  # copy.copy would go through __setstate__, which opens a new session
        alone.__dict__.update(self.__dict__, per_row=True)
        return alone

    def _rows_alone(self, feeds: Dict[str, numpy.ndarray]) -> numpy.ndarray:
        """The last hidden state of each row run alone on its unpadded pieces (zeros where it was padded)."""
        rows = []
        for row in range(len(feeds["input_ids"])):
            keep = feeds["attention_mask"][row] > 0
            alone = self.session.run(["last_hidden_state"], {name: value[row][keep][None, :] for name, value in feeds.items()})[0][0]
            padded = numpy.zeros((len(keep), alone.shape[-1]), dtype=alone.dtype)
            padded[keep] = alone
            rows.append(padded)
        return numpy.stack(rows)


def onnx_model_for(encoder, backend: str, workdir: Path) -> OnnxModel:
    """The OnnxModel of a loaded torch `Encoder`: the file saved in its folder when it matches the
    weights, else a fresh export into `workdir` (never into the user's model folder)."""
    folder = Path(encoder.name)
    path = saved_onnx(folder, backend, encoder.fingerprint) if folder.is_dir() else None
    if path is None:
        if folder.is_dir():
            for name in (ONNX_FILES["onnx"], EXPORT_META):  # reuse a matching float32 export for int8
                if (folder / name).is_file() and not (workdir / name).exists():
                    shutil.copy2(folder / name, workdir / name)
        path = export_onnx(encoder.model, encoder.tokenizer, workdir, backend, encoder.fingerprint)
    return OnnxModel(path, encoder.dim, encoder.device)


def save_onnx(encoder, folder: Path) -> None:
    """Put the ONNX file of an encoder's backend (and its record) into the encoder folder being saved:
    copied from where it was loaded or exported, or exported again if that folder is gone (from_bytes)."""
    source, target = encoder.runtime.path.parent, Path(folder)
    if not encoder.runtime.path.is_file():
        export_onnx(encoder.model, encoder.tokenizer, target, encoder.backend, encoder.fingerprint)
        return
    for name in (*ONNX_FILES.values(), EXPORT_META):
        if (source / name).is_file() and (source / name).resolve() != (target / name).resolve():
            shutil.copy2(source / name, target / name)
