"""Concept records and the in-memory knowledge base they form."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy


def unique(items: Iterable[str]) -> List[str]:
    """Items in first-seen order without repeats or empty strings."""
    seen = set()
    out = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out


@dataclass
class Concept:
    """One concept of a vocabulary.

    id: the primary identifier ("C0000005", "D003924", "OMIM:145250", "HP:0000002").
    name: the canonical name; synonyms: the other names (never containing `name`).
    types: semantic types (UMLS TUIs, MeSH tree numbers, ...).
    xrefs: cross-references as "PREFIX:ID" ("UMLS:C0012634", "MESH:D004194", "OMIM:145250").
    alt_ids: other identifiers of the same concept in the same vocabulary (MEDIC AltDiseaseIDs).
    """

    id: str
    name: str
    synonyms: List[str] = field(default_factory=list)
    types: List[str] = field(default_factory=list)
    xrefs: List[str] = field(default_factory=list)
    alt_ids: List[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.synonyms = [s for s in unique(self.synonyms) if s != self.name]
        self.types = unique(self.types)
        self.xrefs = unique(self.xrefs)
        self.alt_ids = [a for a in unique(self.alt_ids) if a != self.id]

    @property
    def names(self) -> List[str]:
        """Canonical name first, then the synonyms."""
        return [self.name] + self.synonyms

    @property
    def all_ids(self) -> List[str]:
        """The primary id followed by the alternative ids."""
        return [self.id] + self.alt_ids

    def merged(self, other: "Concept") -> "Concept":
        """This concept with the names, types, xrefs and alt ids of `other` appended."""
        return Concept(
            id=self.id,
            name=self.name or other.name,
            synonyms=self.synonyms + other.names,
            types=self.types + other.types,
            xrefs=self.xrefs + other.xrefs,
            alt_ids=self.alt_ids + other.alt_ids,
        )

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "synonyms": list(self.synonyms),
            "types": list(self.types),
            "xrefs": list(self.xrefs),
            "alt_ids": list(self.alt_ids),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Concept":
        return cls(
            id=data["id"],
            name=data["name"],
            synonyms=list(data.get("synonyms", [])),
            types=list(data.get("types", [])),
            xrefs=list(data.get("xrefs", [])),
            alt_ids=list(data.get("alt_ids", [])),
        )


class KnowledgeBase:
    """Concepts by id. Adding a concept whose id is already present merges the two."""

    def __init__(self, concepts: Iterable[Concept] = ()):
        self._concepts: Dict[str, Concept] = {}
        self._alt_to_primary: Dict[str, str] = {}
        for concept in concepts:
            self.add(concept)

    def add(self, concept: Concept) -> None:
        existing = self._concepts.get(concept.id)
        concept = existing.merged(concept) if existing is not None else concept
        self._concepts[concept.id] = concept
        for alt in concept.alt_ids:
            self._alt_to_primary.setdefault(alt, concept.id)

    def get(self, concept_id: str) -> Optional[Concept]:
        """The concept with this primary or alternative id, or None."""
        primary = concept_id if concept_id in self._concepts else self._alt_to_primary.get(concept_id)
        return self._concepts.get(primary) if primary is not None else None

    def __contains__(self, concept_id: str) -> bool:
        return self.get(concept_id) is not None

    def __len__(self) -> int:
        return len(self._concepts)

    def __iter__(self) -> Iterator[Concept]:
        return iter(self._concepts.values())


LIST_FIELDS = ("synonyms", "types", "xrefs", "alt_ids")


class ConceptTable:
    """Concepts stored column-wise: ids and canonical names as lists, and each of LIST_FIELDS as one
    flat list of strings with int64 offsets (row i owns flat[offsets[i]:offsets[i + 1]]).

    A sequence of Concepts built on demand; loading one needs no Python object per concept beyond
    its id and name strings. Ids must be distinct (the output of a KnowledgeBase).
    """

    def __init__(self, ids: List[str], names: List[str], lists: Dict[str, Tuple[List[str], numpy.ndarray]]):
        self.ids = ids
        self.names = names
        self.lists = lists
        self._rows = dict(zip(ids, range(len(ids))))
        self._alt_rows: Optional[Dict[str, int]] = None

    @classmethod
    def from_concepts(cls, concepts: Iterable[Concept]) -> "ConceptTable":
        """The table of concepts with distinct ids, in their order."""
        ids: List[str] = []
        names: List[str] = []
        flat: Dict[str, List[str]] = {key: [] for key in LIST_FIELDS}
        ends: Dict[str, List[int]] = {key: [0] for key in LIST_FIELDS}
        for concept in concepts:
            ids.append(concept.id)
            names.append(concept.name)
            for key in LIST_FIELDS:
                flat[key].extend(getattr(concept, key))
                ends[key].append(len(flat[key]))
        return cls(ids, names, {key: (flat[key], numpy.array(ends[key], dtype="int64")) for key in LIST_FIELDS})

    def _items(self, key: str, row: int) -> List[str]:
        flat, offsets = self.lists[key]
        return flat[offsets[row] : offsets[row + 1]]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, row: int) -> Concept:
        """The Concept of a row, built now."""
        if row < 0:
            row += len(self.ids)
        return Concept(self.ids[row], self.names[row], **{key: self._items(key, row) for key in LIST_FIELDS})

    def __iter__(self) -> Iterator[Concept]:
        return (self[row] for row in range(len(self.ids)))

    def row(self, concept_id: str) -> Optional[int]:
        """The row of a primary id or, failing that, of the first concept with it as alternative id."""
        row = self._rows.get(concept_id)
        return row if row is not None else self._alt_index().get(concept_id)

    def _alt_index(self) -> Dict[str, int]:
        """Alternative id -> row, the first row winning; built on the first look-up of a non-primary id."""
        if self._alt_rows is None:
            flat, offsets = self.lists["alt_ids"]
            rows = numpy.repeat(numpy.arange(len(self.ids)), numpy.diff(offsets)).tolist()
            self._alt_rows = dict(zip(reversed(flat), reversed(rows)))
        return self._alt_rows

    def get(self, concept_id: str) -> Optional[Concept]:
        """The concept with this primary or alternative id, or None."""
        row = self.row(concept_id)
        return self[row] if row is not None else None

    def to_dict(self) -> dict:
        """Msgpack-ready columns; offsets as little-endian int64 bytes."""
        data: Dict[str, Any] = {"ids": self.ids, "names": self.names}
        for key, (flat, offsets) in self.lists.items():
            data[key] = flat
            data[f"{key}_offsets"] = offsets.astype("<i8").tobytes()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "ConceptTable":
        """The table of to_dict's columns; a ValueError (KeyError, TypeError) when they are malformed."""
        ids, names = list(data["ids"]), list(data["names"])
        lists = {}
        for key in LIST_FIELDS:
            flat, offsets = list(data[key]), numpy.frombuffer(data[f"{key}_offsets"], dtype="<i8").astype("int64")
            if len(offsets) != len(ids) + 1 or offsets[0] != 0 or offsets[-1] != len(flat) or (numpy.diff(offsets) < 0).any():
                raise ValueError(f"the {key} offsets do not fit {len(ids)} concepts and {len(flat)} items")
            lists[key] = (flat, offsets)
        if len(names) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(names)} names")
        return cls(ids, names, lists)
