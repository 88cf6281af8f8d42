"""A Hugging Face encoder as the tok2vec of spaCy's NER (architecture "spacy-sapbert.TransformerTok2Vec.v1").

The NER's transition-based parser reads one vector per spaCy token. This layer cuts each Doc into
windows of `window` tokens, runs the encoder on their word pieces (the fast tokenizer's
``is_split_into_words``, so pieces map back to spaCy tokens), and gives each token the mean of its
pieces' last hidden states; a token without pieces (whitespace) gets zeros. The encoder is fine-tuned
with the NER. `model` (a folder or hub name; the all-MiniLM-L6-v2 names resolve to the offline copy)
is read when the NER is initialized for training, not when it is built: the NER's model file keeps
the encoder's weights, its Hugging Face config, its tokenizer files and its adapter settings, so a
saved or packaged pipeline loads without `model` on the machine. (A NER saved before these were kept
reads its tokenizer and architecture from `model` at load, as it did then.)

`precision = "bfloat16"` runs the encoder's forward and backward passes under bfloat16 autocast (the
weights, the optimizer and the pooled vectors stay float32). It is faster on CPUs with AMX or
AVX512-BF16 and on recent GPUs (BENCHMARKS.md), slower on CPUs that emulate bfloat16.
The setting is part of the saved config, so a model trained under it also predicts under it.

spaCy-transformers does this in general; it pins transformers below the 5.x this package runs on,
hence this small layer.
"""
from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy
import srsly
import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v3, torch2xp, xp2torch
from thinc.types import Floats2d, Floats3d


class WindowBatch(NamedTuple):
    """Word pieces of the windows of a batch of Docs, and which window token each piece belongs to (-1: none)."""

    input_ids: numpy.ndarray  # (windows, pieces)
    attention_mask: numpy.ndarray  # (windows, pieces)
    word_index: numpy.ndarray  # (windows, pieces)
    n_words: int  # tokens per window (the padded width of the output)


PRECISIONS = {"float32": None, "bfloat16": torch.bfloat16}


class WordPooler(torch.nn.Module):
    """An encoder whose output is the mean of each word's pieces: (windows, n_words, hidden), in float32.

    `source` names the Hugging Face model to start from; `transformer` and `tokenizer` stay None until
    `ensure_transformer` reads it (initialization) or the NER's model file rebuilds them (`deserialize`)."""

    def __init__(self, source: str, autocast_dtype: torch.dtype | None = None):
        super().__init__()
        self.source = source
        self.transformer: Optional[torch.nn.Module] = None
        self.tokenizer = None
        self.tokenizer_files: Dict[str, bytes] = {}
        self.autocast_dtype = autocast_dtype

    def forward(self, input_ids, attention_mask, word_index, n_words: int):
        if self.autocast_dtype is None:
            hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        else:
            with torch.autocast(device_type=input_ids.device.type, dtype=self.autocast_dtype):
                hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.float()
        valid = word_index >= 0
        index = word_index.clamp(min=0)
        sums = hidden.new_zeros(hidden.shape[0], n_words, hidden.shape[2])
        sums.scatter_add_(1, index.unsqueeze(-1).expand_as(hidden), hidden * valid.unsqueeze(-1))
        counts = hidden.new_zeros(hidden.shape[0], n_words).scatter_add_(1, index, valid.to(hidden.dtype))
        return sums / counts.clamp(min=1).unsqueeze(-1)


def doc_windows(docs: List[Doc], window: int) -> List[Tuple[int, int, int]]:
    """(doc index, start, end) of consecutive token windows covering every doc; an empty doc has one empty window."""
    return [(i, start, min(start + window, len(doc))) for i, doc in enumerate(docs) for start in range(0, max(len(doc), 1), window)]


def _convert_inputs(model: Model, batch: WindowBatch, is_train: bool):
    device = model.shims[0].device  # where the wrapped model's weights are (a GPU under `spacy train --gpu-id`)
    kwargs = {
        "input_ids": torch.as_tensor(batch.input_ids, dtype=torch.long, device=device),
        "attention_mask": torch.as_tensor(batch.attention_mask, dtype=torch.long, device=device),
        "word_index": torch.as_tensor(batch.word_index, dtype=torch.long, device=device),
        "n_words": batch.n_words,
    }
    return ArgsKwargs(args=(), kwargs=kwargs), lambda d_inputs: []


def _convert_outputs(model: Model, inputs_outputs, is_train: bool):
    _, output = inputs_outputs

    def backprop(d_output: Floats3d) -> ArgsKwargs:
        return ArgsKwargs(args=(output,), kwargs={"grad_tensors": xp2torch(d_output)})

    return torch2xp(output, ops=model.ops), backprop


def tokenizer_files(tokenizer) -> Dict[str, bytes]:
    """The files `save_pretrained` writes for `tokenizer`, by name."""
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        return {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir()) if path.is_file()}


def set_transformer(pooler: WordPooler, tokenizer, transformer: torch.nn.Module, files: Optional[Dict[str, bytes]] = None) -> None:
    """Give `pooler` its tokenizer and encoder, refusing a tokenizer without word ids. The tokenizer's files are
    taken now, before any call: transformers writes a call's arguments (max_length, padding) into a later save."""
    from .errors import SapbertError

    if not getattr(tokenizer, "is_fast", False):
        raise SapbertError(f"TransformerTok2Vec needs a fast tokenizer (word ids of the pieces); {pooler.source} has none")
    pooler.tokenizer, pooler.transformer = tokenizer, transformer
    pooler.tokenizer_files = files if files is not None else tokenizer_files(tokenizer)


def ensure_transformer(pooler: WordPooler, device: torch.device) -> None:
    """Read the starting model `pooler.source` unless the pooler already has one."""
    if pooler.transformer is None:
        from .encoder import load_pretrained

        tokenizer, transformer = load_pretrained(pooler.source)
        set_transformer(pooler, tokenizer, transformer.to(device))


def serialize(pooler: WordPooler) -> bytes:
    """The pooler's weights with what rebuilds its encoder without `source`: the Hugging Face config, the
    tokenizer's files and the adapter settings (thinc keeps these bytes inside the NER's model file)."""
    from .adapters import adapter_settings

    if pooler.transformer is None:  # not initialized yet: nothing to keep, `model` is read when it is
        return srsly.msgpack_dumps({"uninitialized": True})
    weights = io.BytesIO()
    torch.save(pooler.state_dict(), weights)
    return srsly.msgpack_dumps({
        "weights": weights.getvalue(),
        "config": pooler.transformer.config.to_json_string(),
        "tokenizer_files": pooler.tokenizer_files,
        "adapters": adapter_settings(pooler.transformer),
    })


def rebuild_transformer(saved: Dict) -> Tuple[object, torch.nn.Module]:
    """(tokenizer, encoder with untrained weights of the saved architecture) from `serialize`'s record."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from .adapters import add_adapters

    with tempfile.TemporaryDirectory() as folder:
        for name, content in saved["tokenizer_files"].items():
            (Path(folder) / Path(name).name).write_bytes(content)
        (Path(folder) / "config.json").write_text(saved["config"], encoding="utf8")
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        transformer = AutoModel.from_config(AutoConfig.from_pretrained(folder, local_files_only=True)).eval()
    if saved["adapters"]:
        add_adapters(transformer, saved["adapters"]["reduction_factor"], saved["adapters"]["base_fingerprint"])
    return tokenizer, transformer


def deserialize(pooler: WordPooler, data: bytes, device: torch.device) -> WordPooler:
    """Load `serialize`'s bytes into `pooler`, rebuilding its encoder from them. Bare torch.save bytes (a zip
    archive) are a NER saved before the config and tokenizer were kept: its encoder is read from `source`."""
    if data[:2] == b"PK":
        ensure_transformer(pooler, device)
        weights = data
    else:
        saved = srsly.msgpack_loads(data)
        if saved.get("uninitialized"):  # saved before initialization: it stays so (thinc init reads `source`)
            pooler.transformer = pooler.tokenizer = None
            return pooler
        set_transformer(pooler, *rebuild_transformer(saved), saved["tokenizer_files"])
        weights = saved["weights"]
    state = torch.load(io.BytesIO(weights), map_location=device)
    floating = [tensor.dtype for tensor in state.values() if tensor.is_floating_point()]
    if floating:
        pooler.transformer.to(floating[0])  # the dtype it was trained in
    pooler.load_state_dict(state)
    return pooler.to(device)


def _pooler(model: Model) -> WordPooler:
    return model.layers[0].shims[0]._model


def _init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    """Read the starting encoder (training starts here; a loaded NER has its own from its model file)."""
    shim = model.layers[0].shims[0]
    ensure_transformer(shim._model, shim.device)
    model.set_dim("nO", shim._model.transformer.config.hidden_size)


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    tokenizer = _pooler(model).tokenizer
    window, max_length = model.attrs["window"], model.attrs["max_length"]
    windows = doc_windows(docs, window)
    encoded = tokenizer(
        [[token.text for token in docs[i][start:end]] for i, start, end in windows],
        is_split_into_words=True,
        truncation=True,
        max_length=max_length,
        padding=True,
        return_tensors="np",
    )
    word_index = numpy.array(
        [[-1 if w is None else w for w in encoded.word_ids(b)] for b in range(len(windows))], dtype="int64"
    ).reshape(len(windows), -1)
    batch = WindowBatch(encoded["input_ids"], encoded["attention_mask"], word_index, window)
    padded, backprop_encoder = model.layers[0](batch, is_train)
    pieces: List[List[Floats2d]] = [[] for _ in docs]
    for b, (i, start, end) in enumerate(windows):
        pieces[i].append(padded[b, : end - start])
    outputs = [model.ops.xp.ascontiguousarray(model.ops.xp.concatenate(p, axis=0)) for p in pieces]

    def backprop(d_outputs: List[Floats2d]) -> List[Doc]:
        d_padded = model.ops.alloc3f(*padded.shape)
        for b, (i, start, end) in enumerate(windows):
            d_padded[b, : end - start] = d_outputs[i][start:end]
        backprop_encoder(d_padded)
        return []

    return outputs, backprop


@registry.architectures("spacy-sapbert.TransformerTok2Vec.v1")
def transformer_tok2vec(
    model: str, window: int = 64, max_length: int = 192, precision: str = "float32"
) -> Model[List[Doc], List[Floats2d]]:
    """One vector per token from a Hugging Face encoder (fine-tuned with the component that uses it).

    `window`: spaCy tokens per encoder sequence; `max_length`: word pieces per sequence (more are cut,
    and their tokens get zeros: keep it well above `window`); `precision`: "float32" or "bfloat16"
    (autocast of the encoder's passes; see the module docstring).
    """
    from .errors import SapbertError

    if precision not in PRECISIONS:
        raise SapbertError(f"TransformerTok2Vec: precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if PRECISIONS[precision] is not None and not torch.cuda.is_available():
        from .backends import warn_if_emulated_on_cpu

        warn_if_emulated_on_cpu(PRECISIONS[precision], f"TransformerTok2Vec precision {precision!r}", "float32 on CPU")
    encoder = PyTorchWrapper_v3(
        WordPooler(model, PRECISIONS[precision]),
        convert_inputs=_convert_inputs,
        convert_outputs=_convert_outputs,
        serialize_model=serialize,
        deserialize_model=deserialize,
    )
    return Model(
        "sapbert_transformer_tok2vec",
        _forward,
        init=_init,
        layers=[encoder],
        attrs={"window": window, "max_length": max_length},
        dims={"nO": None},
    )
