"""Context-aware mention vectors (the Italian medical-embeddings paper): a mention is encoded inside its
text, marked ``[Ms] mention [Me]`` in a window of word pieces around it, and its vector is the mean of
the last hidden states of the mention's own word pieces. Concept names stay context-free.

The markers are two special tokens added to the tokenizer (and rows to the model's embeddings) when a
model is first trained with context (`train-dhns --context-window 32`); a model folder saved after that
carries them, and the linker's `context_window` refuses a model without them (their embeddings would be
random). The window counts every word piece: [CLS], the left context, [Ms], the mention, [Me], the
right context and [SEP]; the context is split evenly between the sides, a short side lending the rest
to the other.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy
import torch

from .errors import SapbertError

__all__ = [
    "CONTEXT_CHARS", "MENTION_END", "MENTION_START", "MentionInContext", "add_markers", "context_vectors", "has_markers",
    "infer_context_vectors", "window_ids", "window_rows",
]

MENTION_START, MENTION_END = "[Ms]", "[Me]"
CONTEXT_CHARS = 400  # characters of text read on each side: more than any 32-piece window needs
MIN_WINDOW = 8


@dataclass(frozen=True)
class MentionInContext:
    """A mention as the character span [start, end) of `text` (a document, or any text around it)."""

    text: str
    start: int
    end: int

    @property
    def mention(self) -> str:
        return self.text[self.start : self.end]


def has_markers(tokenizer) -> bool:
    """Whether the tokenizer knows [Ms] and [Me] (a look-up, not a copy of the vocabulary)."""
    return tokenizer.unk_token_id not in tokenizer.convert_tokens_to_ids([MENTION_START, MENTION_END])


def add_markers(tokenizer, model) -> bool:
    """Add [Ms] and [Me] as special tokens and grow the model's embeddings to match; False when the
    tokenizer has them already (a model trained with context, or a resumed run)."""
    if has_markers(tokenizer):
        return False
    tokenizer.add_special_tokens({"additional_special_tokens": [MENTION_START, MENTION_END]})
    model.resize_token_embeddings(len(tokenizer))
    return True


def _split_budget(budget: int, left: int, right: int) -> Tuple[int, int]:
    """Word pieces taken from the left and right context: half the budget each, a short side's rest to the other."""
    take_left = min(left, budget // 2)
    take_right = min(right, budget - take_left)
    take_left = min(left, budget - take_right)
    return take_left, take_right


def window_ids(tokenizer, item: MentionInContext, window: int) -> Tuple[List[int], int, int]:
    """(input ids of the window, first and end position of the mention's word pieces in them)."""
    return window_rows(tokenizer, [item], window)[0]


def window_rows(tokenizer, items: Sequence[MentionInContext], window: int) -> List[Tuple[List[int], int, int]]:
    """`window_ids` of each item, from one tokenizer call over every left context, mention and right context."""
    if window < MIN_WINDOW:
        raise SapbertError(f"context window {window} is too small: at least {MIN_WINDOW} word pieces")
    start_id, end_id = tokenizer.convert_tokens_to_ids([MENTION_START, MENTION_END])
    texts = [
        part for item in items
        for part in (item.text[max(0, item.start - CONTEXT_CHARS) : item.start], item.mention, item.text[item.end : item.end + CONTEXT_CHARS])
    ]
    pieces = tokenizer(texts, add_special_tokens=False)["input_ids"]
    rows = []
    for at in range(0, len(pieces), 3):
        left, mention, right = pieces[at : at + 3]
        mention = mention[: window - 4] or [tokenizer.unk_token_id]
        take_left, take_right = _split_budget(window - 4 - len(mention), len(left), len(right))
        ids = (
            [tokenizer.cls_token_id] + left[len(left) - take_left :] + [start_id] + mention + [end_id]
            + right[:take_right] + [tokenizer.sep_token_id]
        )
        first = 2 + take_left
        rows.append((ids, first, first + len(mention)))
    return rows


def context_vectors(model, tokenizer, items: Sequence[MentionInContext], *, window: int, device) -> torch.Tensor:
    """(len(items), dim) mean of the mention pieces' last hidden states, with the autograd graph (training)."""
    rows = window_rows(tokenizer, items, window)
    length = max(len(ids) for ids, _, _ in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(rows), length), pad, dtype=torch.long)
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    mention_mask = torch.zeros((len(rows), length), dtype=torch.float32)
    for row, (ids, first, end) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        mention_mask[row, first:end] = 1.0
    hidden = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).last_hidden_state.float()
    mask = mention_mask.to(device=hidden.device, dtype=hidden.dtype).unsqueeze(-1)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def infer_context_vectors(
    model, tokenizer, items: Sequence[MentionInContext], *, window: int, device, chunk_size: int = 64, normalize: bool = False
) -> numpy.ndarray:
    """float32 (len(items), dim) context vectors under inference_mode, in chunks (linking, DHNS mining)."""
    out = numpy.zeros((len(items), int(model.config.hidden_size)), dtype="float32")
    with torch.inference_mode():
        for start in range(0, len(items), chunk_size):
            vectors = context_vectors(model, tokenizer, items[start : start + chunk_size], window=window, device=device).float()
            if normalize:
                vectors = torch.nn.functional.normalize(vectors, dim=-1)
            out[start : start + len(vectors)] = vectors.cpu().numpy()
    return out
