"""Concept records and the in-memory knowledge base they form."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional


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
