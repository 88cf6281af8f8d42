"""The one road from a name or a mention to the string that is encoded.

A `Normalizer` is saved with the concept index it built, and the same object normalizes the
component's queries, its mention memory, the evaluation's queries and dictionary names, and the
trainers' data, so that a pipeline ships exactly the normalization it was scored with.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Dict, Mapping, Optional, Tuple

from spacy.util import registry

from .preprocess import apply_spell_check, normalize_text


@dataclass(frozen=True)
class Normalizer:
    """Names: lowercase (SapBERT), optionally punctuation to spaces (BioSyn), whitespace collapsed.
    Queries (mentions): the same, then whole-word spelling corrections (BioSyn's NCBI list: lowercase
    keys, for typos in mentions; BioSyn never applies it to dictionary names, where entries such as
    "le||leg" would damage names like "le marec bracq picaud syndrome").

    >>> normalizer = Normalizer(remove_punctuation=True, spell_check=(("hemmorhage", "haemorrhage"),))
    >>> normalizer("Brain-Hemmorhage"), normalizer.query("Brain-Hemmorhage")
    ('brain hemmorhage', 'brain haemorrhage')
    """

    lowercase: bool = True
    remove_punctuation: bool = False
    spell_check: Tuple[Tuple[str, str], ...] = ()

    def __call__(self, name: str) -> str:
        """A dictionary name as it is indexed."""
        return normalize_text(name, lowercase=self.lowercase, remove_punctuation=self.remove_punctuation)

    def query(self, text: str) -> str:
        """A mention (a query, a memory entry, a training mention) as it is searched."""
        text = self(text)
        if self.spell_check:
            text = apply_spell_check(text, dict(self.spell_check))
        return text

    def with_spell_check(self, corrections: Optional[Mapping[str, str]]) -> "Normalizer":
        """A copy with these corrections (sorted, so equal lists give equal normalizers)."""
        return replace(self, spell_check=tuple(sorted((corrections or {}).items())))

    @property
    def spell_check_hash(self) -> str:
        """16 hex digits identifying the correction list; "" for none."""
        if not self.spell_check:
            return ""
        return hashlib.sha256(json.dumps(self.spell_check).encode("utf8")).hexdigest()[:16]

    def settings(self) -> Dict[str, Any]:
        """What decides the normalized strings, as recorded with saved vectors (index.VECTOR_SETTINGS)."""
        return {"lowercase": self.lowercase, "remove_punctuation": self.remove_punctuation, "spell_check": self.spell_check_hash}

    def to_dict(self) -> Dict[str, Any]:
        return {"lowercase": self.lowercase, "remove_punctuation": self.remove_punctuation, "spell_check": [list(p) for p in self.spell_check]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Normalizer":
        pairs = tuple((str(a), str(b)) for a, b in data.get("spell_check", ()))
        return cls(bool(data["lowercase"]), bool(data.get("remove_punctuation", False)), pairs)


@registry.misc("spacy-sapbert.Normalizer.v1")
def normalizer_v1(lowercase: bool = True, remove_punctuation: bool = False, spell_check: Optional[str] = None) -> Normalizer:
    """A Normalizer for configs; `spell_check` is a `misspelling||correction` file (for queries) read now."""
    corrections = None
    if spell_check:
        from .readers import read_spell_check

        corrections = read_spell_check(spell_check)
    return Normalizer(lowercase, remove_punctuation).with_spell_check(corrections)
