"""A case-insensitive dictionary matcher over a vocabulary's names that stays small at UMLS size.

spaCy's EntityRuler keeps every phrase pattern as a Doc and tokenizes them all again at every load: about 6 KB
a name (BENCHMARKS: 1.7 GB and 15 s to load 260k names; UMLS has 10M). Here each name is one 64-bit
key, a hash of its tokens' LOWER ids (spaCy's string hashes: stable across processes), with its token count
mixed in, kept in a sorted array that is memory-mapped at load. A doc's token windows of every name length are
hashed at once (a polynomial prefix hash in wrapping uint64 arithmetic) and looked up with one binary search.
The matches are set as the EntityRuler (phrase_matcher_attr LOWER, overwrite_ents false) sets them: longest
first, earlier first among equal lengths, never over a token another match or an existing entity holds.
"""
from __future__ import annotations

import array
import hashlib
import json
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

import numpy
import spacy
import srsly
from spacy.language import Language
from spacy.tokens import Doc, Span

from .errors import IndexFormatError
from .io import atomic_write_text, save_npy

KEYS_FILE, META_FILE = "keys.npy", "meta.json"
FORMAT_VERSION = 1
BASE, LENGTH_MIX = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F  # odd multipliers of the prefix hash and of the length
MASK = (1 << 64) - 1


def name_key(lower_ids: Sequence[int]) -> int:
    """The key of a whole name: its window of its own length (`windows_of`)."""
    return (prefix_hashes(lower_ids)[-1] + len(lower_ids) * LENGTH_MIX) & MASK


def prefix_hashes(lower_ids: Sequence[int]) -> List[int]:
    """h[0] = 0, h[i + 1] = h[i] * BASE + id[i] modulo 2**64: the hash of every prefix (Python ints: faster than
    numpy scalars for one pass)."""
    hashes, value = [0], 0
    for token_id in lower_ids:
        value = (value * BASE + int(token_id)) & MASK
        hashes.append(value)
    return hashes


def windows_of(prefix: numpy.ndarray, length: int) -> numpy.ndarray:
    """The key of every run of `length` tokens, from the prefix hashes (uint64 arrays wrap modulo 2**64)."""
    if length > len(prefix) - 1:
        return numpy.empty(0, dtype=numpy.uint64)
    power = numpy.uint64(pow(BASE, length, 1 << 64))
    tail = numpy.uint64((length * LENGTH_MIX) & MASK)
    return prefix[length:] - prefix[: len(prefix) - length] * power + tail


class NameKeys:
    """The sorted keys of a set of token sequences and the lengths they come in."""

    def __init__(self, keys: numpy.ndarray, lengths: Sequence[int]):
        self.keys = keys
        self.lengths = sorted(set(int(n) for n in lengths), reverse=True)

    @classmethod
    def from_docs(cls, docs: Iterable[Doc]) -> "NameKeys":
        keys, lengths = array.array("Q"), set()  # 8 bytes a name while they are collected
        for doc in docs:
            if len(doc):
                keys.append(name_key(doc.to_array("LOWER").tolist()))
                lengths.add(len(doc))
        return cls(numpy.unique(numpy.frombuffer(keys, dtype=numpy.uint64)), lengths)

    def matches(self, doc: Doc) -> List[tuple]:
        """(start, end) of every token run of `doc` that is a name, longest first, earlier first."""
        if not len(self.keys) or not len(doc):
            return []
        prefix = numpy.array(prefix_hashes(doc.to_array("LOWER").tolist()), dtype=numpy.uint64)
        found = []
        for length in self.lengths:
            windows = windows_of(prefix, length)
            if not len(windows):
                continue
            at = numpy.minimum(numpy.searchsorted(self.keys, windows), len(self.keys) - 1)
            found.extend((int(start), int(start) + length) for start in numpy.flatnonzero(self.keys[at] == windows))
        return found  # lengths descending, starts ascending within each


class DictionaryMatcher:
    """Sets doc.ents to the vocabulary names found in the text (label `label`), beside the entities already there."""

    def __init__(self, nlp: Language, name: str, label: str):
        self.name = name
        self.label = label
        self.names = NameKeys(numpy.empty(0, dtype=numpy.uint64), [])
        self.nlp = nlp
        self.tokenizer: Optional[str] = None  # tokenizer_digest of the tokenizer the names were tokenized with

    def add_names(self, names: Iterable[str]) -> None:
        """Match these names too (tokenized by the pipeline's tokenizer, compared lowercased)."""
        self.check_tokenizer("the names added before")
        tokenize = detached_tokenizer(self.nlp)
        added = NameKeys.from_docs(tokenize(name) for name in names)
        self.names = NameKeys(numpy.union1d(numpy.asarray(self.names.keys), added.keys), [*self.names.lengths, *added.lengths])
        self.tokenizer = tokenizer_digest(self.nlp)

    def check_tokenizer(self, what: str) -> None:
        """IndexFormatError when the pipeline's tokenizer is not the one the names were tokenized with: a name whose
        words it now splits otherwise is never found (the keys are not tokenized again)."""
        now = tokenizer_digest(self.nlp)
        if self.tokenizer is not None and now is not None and now != self.tokenizer and len(self):
            raise IndexFormatError(
                f"{self.name}: {what} were tokenized by another tokenizer than the pipeline's (its rules or special cases "
                "changed), so names it splits otherwise would not be found; build the matcher again with this tokenizer"
            )

    def __len__(self) -> int:
        return len(self.names.keys)

    @property
    def labels(self) -> tuple:
        """The label it gives, as a NER's `labels` says what it finds."""
        return (self.label,)

    def __call__(self, doc: Doc) -> Doc:
        taken = set()
        for ent in doc.ents:
            taken.update(range(ent.start, ent.end))
        new = []
        for start, end in self.names.matches(doc):
            if taken.intersection(range(start, end)):  # a longer or earlier match, or an entity, holds a token of it
                continue
            new.append(Span(doc, start, end, label=self.label))
            taken.update(range(start, end))
        doc.ents = [*doc.ents, *new]  # also when none: the other tokens are then "O", as an EntityRuler leaves them
        return doc

    def meta(self) -> dict:
        return {"format_version": FORMAT_VERSION, "lengths": self.names.lengths, "n_names": len(self), "tokenizer": self.tokenizer}

    def to_disk(self, path: Union[str, Path], exclude: Iterable[str] = ()) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_npy(path / KEYS_FILE, numpy.asarray(self.names.keys, dtype=numpy.uint64))
        atomic_write_text(path / META_FILE, json.dumps(self.meta()) + "\n")

    def from_disk(self, path: Union[str, Path], exclude: Iterable[str] = ()) -> "DictionaryMatcher":
        path = Path(path)
        try:
            meta = json.loads((path / META_FILE).read_text(encoding="utf8"))
            keys = numpy.load(path / KEYS_FILE, mmap_mode="r")
        except (OSError, ValueError) as err:
            raise IndexFormatError(f"{path}: the dictionary matcher's files cannot be read ({err}); build the pipeline again") from err
        self.names = checked_names(keys, meta, str(path))
        self.tokenizer = meta.get("tokenizer")  # None: saved before it was recorded
        self.check_tokenizer(f"the names saved in {path}")
        return self

    def to_bytes(self, exclude: Iterable[str] = ()) -> bytes:
        return srsly.msgpack_dumps({"keys": numpy.asarray(self.names.keys, dtype=numpy.uint64).tobytes(), "meta": self.meta()})

    def from_bytes(self, data: bytes, exclude: Iterable[str] = ()) -> "DictionaryMatcher":
        msg = srsly.msgpack_loads(data)
        self.names = checked_names(numpy.frombuffer(msg["keys"], dtype=numpy.uint64), msg["meta"], "bytes")
        self.tokenizer = msg["meta"].get("tokenizer")
        self.check_tokenizer("the names loaded from bytes")
        return self


def tokenizer_rules(nlp: Language) -> Optional[bytes]:
    """A spaCy tokenizer's rules (its bytes without the vocab); None for a tokenizer that is not spaCy's own or whose
    rules do not serialize (a rule set to a plain function, token_match = lambda ...)."""
    from spacy.tokenizer import Tokenizer

    if type(nlp.tokenizer) is not Tokenizer:
        return None
    try:
        return nlp.tokenizer.to_bytes(exclude=["vocab"])
    except (AttributeError, TypeError, ValueError):
        return None


def tokenizer_digest(nlp: Language) -> Optional[str]:
    """16 hex digits of SHA-256 over `tokenizer_rules`, or None where there are none."""
    rules = tokenizer_rules(nlp)
    return hashlib.sha256(rules).hexdigest()[:16] if rules is not None else None


def detached_tokenizer(nlp: Language):
    """The pipeline's tokenizer on a vocab of its own: the names' tokens (millions at UMLS size) go there, not into the
    pipeline's strings, which are saved and read at every load. A LOWER id is the hash of the lowercased string
    either way. A tokenizer without `tokenizer_rules` is used as it is."""
    rules = tokenizer_rules(nlp)
    if rules is None:
        return nlp.make_doc
    fresh = spacy.blank(nlp.lang)
    fresh.tokenizer.from_bytes(rules)
    return fresh.tokenizer


def checked_names(keys: numpy.ndarray, meta: dict, where: str) -> NameKeys:
    """The NameKeys of saved keys, or IndexFormatError when they and their meta disagree."""
    if meta.get("format_version") != FORMAT_VERSION or keys.dtype != numpy.uint64 or len(keys) != meta.get("n_names"):
        raise IndexFormatError(
            f"{where}: the dictionary matcher's files do not agree (format {meta.get('format_version')}, "
            f"{meta.get('n_names')} names recorded, {len(keys)} keys of {keys.dtype}); build the pipeline again"
        )
    return NameKeys(keys, meta["lengths"])


@Language.factory(
    "sapbert_dictionary_matcher", assigns=["doc.ents", "token.ent_type", "token.ent_iob"], default_config={"label": "ENTITY"}
)
def make_dictionary_matcher(nlp: Language, name: str, label: str) -> DictionaryMatcher:
    return DictionaryMatcher(nlp, name, label)
