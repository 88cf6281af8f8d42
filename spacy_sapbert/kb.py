"""Concept records, the in-memory knowledge base they form, and the column table an index keeps."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import numpy

from .columns import HashLookup, StringColumn


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
    definition: a text definition (OBO `def`, UMLS MRDEF, scispaCy KB `definition`), or "".
    sources: the vocabularies its names come from (UMLS SABs such as "MSH" or "SNOMEDCT_US"; "MSH" for
    the MeSH files; an OBO ontology's id prefix: "HP", "MONDO", "DOID"); empty when the reader cannot tell.
    """

    id: str
    name: str
    synonyms: List[str] = field(default_factory=list)
    types: List[str] = field(default_factory=list)
    xrefs: List[str] = field(default_factory=list)
    alt_ids: List[str] = field(default_factory=list)
    definition: str = ""
    sources: List[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.synonyms = [s for s in unique(self.synonyms) if s != self.name]
        self.types = unique(self.types)
        self.xrefs = unique(self.xrefs)
        self.alt_ids = [a for a in unique(self.alt_ids) if a != self.id]
        self.sources = unique(self.sources)

    @property
    def names(self) -> List[str]:
        """Canonical name first, then the synonyms."""
        return [self.name] + self.synonyms

    @property
    def all_ids(self) -> List[str]:
        """The primary id followed by the alternative ids."""
        return [self.id] + self.alt_ids

    def merged(self, other: "Concept") -> "Concept":
        """This concept with the names, types, xrefs, alt ids and sources of `other` appended (and its definition, if this has none)."""
        return Concept(
            id=self.id,
            name=self.name or other.name,
            synonyms=self.synonyms + other.names,
            types=self.types + other.types,
            xrefs=self.xrefs + other.xrefs,
            alt_ids=self.alt_ids + other.alt_ids,
            definition=self.definition or other.definition,
            sources=self.sources + other.sources,
        )

    def to_dict(self) -> dict:
        """The fields as plain data; "definition" and "sources" only when set, so the records (and the
        vocabulary hashes over them) of concepts without them are what they were before they were kept."""
        data = {
            "id": self.id,
            "name": self.name,
            "synonyms": list(self.synonyms),
            "types": list(self.types),
            "xrefs": list(self.xrefs),
            "alt_ids": list(self.alt_ids),
        }
        if self.definition:
            data["definition"] = self.definition
        if self.sources:
            data["sources"] = list(self.sources)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Concept":
        return cls(
            id=data["id"],
            name=data["name"],
            synonyms=list(data.get("synonyms", [])),
            types=list(data.get("types", [])),
            xrefs=list(data.get("xrefs", [])),
            alt_ids=list(data.get("alt_ids", [])),
            definition=data.get("definition", ""),
            sources=list(data.get("sources", [])),
        )


MERGED_FIELDS = ("synonyms", "types", "xrefs", "alt_ids", "sources")


class MergedConcepts:
    """Concepts by a key, those of one key merged into the first as `Concept.merged` does, in first-seen order.

    A merge costs what it adds, not the size of what it merges into: the merged concept is a copy this object
    owns, extended in place, with a set of the items each of its lists holds. (A new `merged` concept per
    addition made a concept that arrives in n pieces cost n^2: 10,000 pieces of one CUI in an unsorted
    MRCONSO took 6.7 s.)"""

    def __init__(self) -> None:
        self.by_key: Dict[str, Concept] = {}
        self._seen: Dict[str, Dict[str, set]] = {}  # per merged key: the items of each list field

    def add(self, key: str, concept: Concept) -> Concept:
        """Add `concept` under `key`; the concept now stored there."""
        existing = self.by_key.get(key)
        if existing is None:
            self.by_key[key] = concept
            return concept
        seen = self._seen.get(key)
        if seen is None:  # the first merge: a copy, so that no caller's Concept changes
            existing = self.by_key[key] = existing.merged(Concept(existing.id, ""))
            seen = self._seen[key] = {field: set(getattr(existing, field)) for field in MERGED_FIELDS}
            seen["synonyms"].add(existing.name)
            seen["alt_ids"].add(existing.id)
        if not existing.name and concept.name:
            existing.name = concept.name
            if concept.name in seen["synonyms"]:
                existing.synonyms.remove(concept.name)
            seen["synonyms"].add(concept.name)
        existing.definition = existing.definition or concept.definition
        for field in MERGED_FIELDS:
            items, held = getattr(existing, field), seen[field]
            for item in concept.names if field == "synonyms" else getattr(concept, field):
                if item and item not in held:
                    held.add(item)
                    items.append(item)
        return existing


class KnowledgeBase:
    """Concepts by id. Adding a concept whose id is already present merges the two."""

    def __init__(self, concepts: Iterable[Concept] = ()):
        self._merged = MergedConcepts()
        self._concepts: Dict[str, Concept] = self._merged.by_key
        self._alt_to_primary: Dict[str, str] = {}
        for concept in concepts:
            self.add(concept)

    def add(self, concept: Concept) -> None:
        self._merged.add(concept.id, concept)
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


LIST_FIELDS = ("synonyms", "types", "xrefs", "alt_ids", "sources")
LATER_LISTS = ("sources",)  # list fields that older index formats lack: read as empty lists
ID_LOOKUP = "id_lookup"


def empty_lists(n_rows: int) -> Tuple[StringColumn, numpy.ndarray]:
    """A list column of `n_rows` empty lists (items, offsets)."""
    return StringColumn.from_strings([]), numpy.zeros(n_rows + 1, dtype="int64")


class ConceptTable:
    """Concepts stored column-wise as flat arrays: ids, canonical names and definitions as `StringColumn`s,
    and each of LIST_FIELDS as one StringColumn of all items with int64 row offsets (row i owns items
    offsets[i]:offsets[i + 1]). A table without definitions (index format 7 and older) gives "", one
    without sources (format 8 and older) empty lists.

    A sequence of Concepts built on demand. The arrays may be memory-mapped, so a table of millions of
    concepts opens without reading them. Ids must be distinct (the output of a KnowledgeBase).
    Look-up by id goes through a `HashLookup` over the primary ids followed by the alternative ids.
    """

    def __init__(
        self,
        ids: StringColumn,
        names: StringColumn,
        lists: Dict[str, Tuple[StringColumn, numpy.ndarray]],
        lookup: Optional[HashLookup] = None,
        definitions: Optional[StringColumn] = None,
    ):
        if len(names) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(names)} names")
        if definitions is not None and len(definitions) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(definitions)} definitions")
        lists = {**{key: empty_lists(len(ids)) for key in LATER_LISTS}, **lists}
        for key, (items, offsets) in lists.items():
            if len(offsets) != len(ids) + 1 or offsets[0] != 0 or offsets[-1] != len(items):
                raise ValueError(f"the {key}.rows offsets do not fit {len(ids)} concepts and {len(items)} items")
        self.ids = ids
        self.names = names
        self.lists = lists
        self.definitions = definitions
        n_keys = len(ids) + len(lists["alt_ids"][0])
        if lookup is not None and len(lookup.hashes) != n_keys:
            raise ValueError(f"the id look-up holds {len(lookup.hashes)} ids, not {n_keys}")
        self._lookup = lookup

    @classmethod
    def from_concepts(cls, concepts: Iterable[Concept]) -> "ConceptTable":
        """The table of concepts with distinct ids, in their order."""
        ids: List[str] = []
        names: List[str] = []
        definitions: List[str] = []
        flat: Dict[str, List[str]] = {key: [] for key in LIST_FIELDS}
        ends: Dict[str, List[int]] = {key: [0] for key in LIST_FIELDS}
        for concept in concepts:
            ids.append(concept.id)
            names.append(concept.name)
            definitions.append(concept.definition)
            for key in LIST_FIELDS:
                flat[key].extend(getattr(concept, key))
                ends[key].append(len(flat[key]))
        lists = {key: (StringColumn.from_strings(flat[key]), numpy.array(ends[key], dtype="int64")) for key in LIST_FIELDS}
        return cls(StringColumn.from_strings(ids), StringColumn.from_strings(names), lists, definitions=StringColumn.from_strings(definitions))

    def extended(self, concepts: Sequence[Concept]) -> "ConceptTable":
        """A new table: these rows, then `concepts` (ids new to the table), without building a Concept of every row
        held; the id look-up is carried over with its positions moved, not built again."""
        more = ConceptTable.from_concepts(concepts)
        n_ids, n_new = len(self.ids), len(more)
        lists = {}
        for key, (items, offsets) in self.lists.items():
            new_items, new_offsets = more.lists[key]
            lists[key] = (items.extended(list(new_items)), numpy.concatenate([offsets, new_offsets[1:] + len(items)]))
        definitions = self.definitions if self.definitions is not None else StringColumn.from_strings([""] * n_ids)
        lookup = None
        if self._lookup is not None:  # positions: primary ids, then alternative ids; the new ids go between
            positions = self._lookup.positions
            held = HashLookup(self._lookup.hashes, numpy.where(positions >= n_ids, positions + n_new, positions))
            end_of_alt_ids = n_ids + n_new + len(self.lists["alt_ids"][0])
            lookup = held.extended(list(more.ids), n_ids).extended(list(more.lists["alt_ids"][0]), end_of_alt_ids)
        return ConceptTable(
            self.ids.extended(list(more.ids)), self.names.extended(list(more.names)), lists, lookup,
            definitions=definitions.extended(list(more.definitions)),
        )

    def _items(self, key: str, row: int) -> List[str]:
        items, offsets = self.lists[key]
        return items[int(offsets[row]) : int(offsets[row + 1])]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, row: int) -> Concept:
        """The Concept of a row, built now."""
        if row < 0:
            row += len(self.ids)
        definition = self.definitions[row] if self.definitions is not None else ""
        return Concept(self.ids[row], self.names[row], **{key: self._items(key, row) for key in LIST_FIELDS}, definition=definition)

    def __iter__(self) -> Iterator[Concept]:
        return (self[row] for row in range(len(self.ids)))

    @property
    def lookup(self) -> HashLookup:
        """The id look-up; built on first use for a table made in memory."""
        if self._lookup is None:
            self._lookup = HashLookup.build(itertools.chain(self.ids, self.lists["alt_ids"][0]))
        return self._lookup

    def row(self, concept_id: str) -> Optional[int]:
        """The row of a primary id or, failing that, of the first concept with it as alternative id."""
        n_ids = len(self.ids)
        alt_ids, alt_offsets = self.lists["alt_ids"]
        for position in self.lookup.candidates(concept_id):  # primary ids come first, then alt ids by row
            if position < n_ids:
                if self.ids[position] == concept_id:
                    return position
            elif alt_ids[position - n_ids] == concept_id:
                return int(numpy.searchsorted(alt_offsets, position - n_ids, side="right")) - 1
        return None

    def get(self, concept_id: str) -> Optional[Concept]:
        """The concept with this primary or alternative id, or None."""
        row = self.row(concept_id)
        return self[row] if row is not None else None

    def arrays(self, prefix: str) -> Dict[str, numpy.ndarray]:
        """Every column as flat arrays named PREFIX.COLUMN.PART (see array_dtypes and from_arrays)."""
        definitions = self.definitions if self.definitions is not None else StringColumn.from_strings([""] * len(self.ids))
        arrays = {
            **self.ids.arrays(f"{prefix}.ids"), **self.names.arrays(f"{prefix}.names"), **definitions.arrays(f"{prefix}.definitions"),
            **self.lookup.arrays(f"{prefix}.{ID_LOOKUP}"),
        }
        for key, (items, offsets) in self.lists.items():
            arrays.update(items.arrays(f"{prefix}.{key}"))
            arrays[f"{prefix}.{key}.rows"] = offsets
        return arrays

    @staticmethod
    def array_dtypes(prefix: str, definitions: bool = True, sources: bool = True) -> Dict[str, str]:
        """The name and dtype of each array of arrays(prefix); `definitions=False` or `sources=False`: those of
        a table saved before definitions (index format 7) or sources (format 8) were kept."""
        dtypes = {**StringColumn.dtypes(f"{prefix}.ids"), **StringColumn.dtypes(f"{prefix}.names"), **HashLookup.dtypes(f"{prefix}.{ID_LOOKUP}")}
        if definitions:
            dtypes.update(StringColumn.dtypes(f"{prefix}.definitions"))
        for key in LIST_FIELDS:
            if sources or key != "sources":
                dtypes.update({**StringColumn.dtypes(f"{prefix}.{key}"), f"{prefix}.{key}.rows": "int64"})
        return dtypes

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, numpy.ndarray], prefix: str) -> "ConceptTable":
        """The table of arrays(prefix), with or without definitions; a ValueError when they do not fit together."""
        lists = {
            key: (StringColumn.from_arrays(arrays, f"{prefix}.{key}"), arrays[f"{prefix}.{key}.rows"])
            for key in LIST_FIELDS
            if f"{prefix}.{key}.rows" in arrays or key not in LATER_LISTS
        }
        has_definitions = set(StringColumn.dtypes(f"{prefix}.definitions")) <= set(arrays)
        return cls(
            StringColumn.from_arrays(arrays, f"{prefix}.ids"), StringColumn.from_arrays(arrays, f"{prefix}.names"), lists,
            HashLookup.from_arrays(arrays, f"{prefix}.{ID_LOOKUP}"),
            definitions=StringColumn.from_arrays(arrays, f"{prefix}.definitions") if has_definitions else None,
        )

    @classmethod
    def from_dict(cls, data: dict) -> "ConceptTable":
        """The table of the msgpack columns of index formats 5 and 6; a ValueError (KeyError, TypeError)
        when they are malformed."""
        lists = {}
        for key in LIST_FIELDS:
            if key in LATER_LISTS:
                continue
            offsets = numpy.frombuffer(data[f"{key}_offsets"], dtype="<i8").astype("int64")
            lists[key] = (StringColumn.from_strings(data[key]), offsets)
            if (numpy.diff(offsets) < 0).any():
                raise ValueError(f"the {key} offsets decrease")
        return cls(StringColumn.from_strings(data["ids"]), StringColumn.from_strings(data["names"]), lists)
