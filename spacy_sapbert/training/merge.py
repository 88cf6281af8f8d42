"""One SAP class per disease across open vocabularies: concepts merged by their cross-references.

MEDIC, MeSH, HPO, MONDO and DOID name the same disease under different ids and point at each other
(and at UMLS CUIs and OMIM entries). For self-alignment pretraining every name of a disease should
sit in one class, so `merge_by_xrefs` joins concepts that share an id: a concept's own id, its
alternative ids and its cross-references with a prefix of `MERGE_PREFIXES` (looser ones such as ICD,
NCIT or SNOMED codes are not followed).

Chains of loose cross-references would otherwise grow classes of thousands of names (a MONDO grouping
class cross-referenced to a broad MeSH heading, which other terms also point at). The cut: a class
holds at most one concept per id namespace (one MeSH id, one OMIM entry, one MONDO term, ...). Shared
ids are taken most specific first (ids that fewest concepts point at), the concept that owns the id
joins each concept pointing at it, and a join that would put two concepts of one namespace in a class
is refused and counted. Each class is named after its member
from the earliest vocabulary file, so MEDIC or MeSH ids come first when those files are given first.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Sequence, Set, Tuple

from ..kb import Concept, MergedConcepts, unique
from ..readers.obo import normalize_xref
from ..readers.relations import entity_id

__all__ = ["MERGE_PREFIXES", "MergeReport", "id_namespace", "merge_by_xrefs"]

MERGE_PREFIXES = ("UMLS", "MESH", "OMIM", "DOID", "MONDO", "HP")
CUI = re.compile(r"^C\d{7}$")
MESH_ID = re.compile(r"^[CD]\d{6}(\d{3})?$")


def id_namespace(concept_id: str) -> str:
    """"UMLS" for a bare CUI, "MESH" for a bare MeSH id, else the prefix ("OMIM:145250" -> "OMIM")."""
    if CUI.match(concept_id):
        return "UMLS"
    if MESH_ID.match(concept_id):
        return "MESH"
    prefix, sep, _ = concept_id.partition(":")
    return prefix.upper() if sep else ""


@dataclass
class MergeReport:
    """What a merge did: concepts in, classes out, joins made and refused, and the class sizes."""

    concepts: int = 0
    classes: int = 0
    joins: int = 0
    refused: int = 0
    class_sizes: Dict[int, int] = field(default_factory=dict)  # concepts per class -> number of classes
    largest: Tuple[str, int, int] = ("", 0, 0)  # (class id, concepts, names)
    refused_examples: List[Tuple[str, str, str]] = field(default_factory=list)  # (shared id, class a, class b)

    def summary(self) -> str:
        sizes = ", ".join(f"{size}: {count}" for size, count in sorted(self.class_sizes.items()))
        name, members, names = self.largest
        return (
            f"{self.concepts} concepts -> {self.classes} classes ({self.joins} joins, {self.refused} refused as a "
            f"second concept of one namespace); classes by concepts {{{sizes}}}; largest {name}: {members} concepts, {names} names"
        )


class DisjointSets:
    """Union-find over rows 0..n-1; a class's root is its earliest row, so a class keeps its first member."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, row: int) -> int:
        while self.parent[row] != row:
            self.parent[row] = self.parent[self.parent[row]]
            row = self.parent[row]
        return row

    def union(self, a: int, b: int) -> Tuple[int, int]:
        """Join the classes of `a` and `b`; (root kept, root joined to it), equal when they were one class."""
        a, b = self.find(a), self.find(b)
        keep, drop = (a, b) if a < b else (b, a)
        self.parent[drop] = keep
        return keep, drop


class _Classes(DisjointSets):
    """Union-find over concept rows that keeps each class's id namespaces."""

    def __init__(self, namespaces: Sequence[str]):
        super().__init__(len(namespaces))
        self.spaces: List[Set[str]] = [{space} for space in namespaces]

    def join(self, a: int, b: int) -> str:
        """"joined", "same" (already one class) or "refused" (a namespace would appear twice)."""
        a, b = self.find(a), self.find(b)
        if a == b:
            return "same"
        if self.spaces[a] & self.spaces[b]:
            return "refused"
        keep, drop = self.union(a, b)
        self.spaces[keep] |= self.spaces[drop]
        return "joined"


def _keys(concept: Concept, prefixes: Sequence[str]) -> List[str]:
    """The ids a concept is known by: its own, its alternative ids, and its cross-references with `prefixes`."""
    keys = [entity_id(concept.id)] + [entity_id(alt) for alt in concept.alt_ids]
    for xref in concept.xrefs:
        curie = normalize_xref(xref)
        if curie is not None and curie.partition(":")[0].upper() in prefixes:
            keys.append(entity_id(curie))
    return unique(keys)


def same_ids_merged(concepts: Sequence[Concept]) -> List[Concept]:
    """`concepts` with those whose ids are one id spelled two ways ("MESH:D000006" in MEDIC, "D000006" in MeSH)
    merged into the first: one concept, not two of one namespace."""
    merged = MergedConcepts()
    for concept in concepts:
        merged.add(entity_id(concept.id), concept)
    return list(merged.by_key.values())


def merge_by_xrefs(concepts: Iterable[Concept], prefixes: Sequence[str] = MERGE_PREFIXES) -> Tuple[List[Concept], MergeReport]:
    """The classes of `concepts` joined by shared ids (see the module docstring), as Concepts: the members
    merged into the first (`Concept.merged`), with the other members' ids as xrefs. Pure."""
    given = list(concepts)
    concepts = same_ids_merged(given)
    prefixes = tuple(prefix.upper() for prefix in prefixes)
    holders: Dict[str, List[int]] = {}
    for row, concept in enumerate(concepts):
        for key in _keys(concept, prefixes):
            holders.setdefault(key, []).append(row)
    classes = _Classes([id_namespace(concept.id) for concept in concepts])
    report = MergeReport(concepts=len(given), joins=len(given) - len(concepts))
    for key, rows in sorted(holders.items(), key=lambda item: (len(item[1]), item[0])):
        rows = sorted(rows, key=lambda row: entity_id(concepts[row].id) != key)  # the id's own concept anchors the join
        for other in rows[1:]:
            outcome = classes.join(rows[0], other)
            if outcome == "joined":
                report.joins += 1
            elif outcome == "refused":
                report.refused += 1
                if len(report.refused_examples) < 20:
                    report.refused_examples.append((key, concepts[classes.find(rows[0])].id, concepts[classes.find(other)].id))
    members: Dict[int, List[int]] = {}
    for row in range(len(concepts)):
        members.setdefault(classes.find(row), []).append(row)
    merged = []
    for root in sorted(members):
        group = [concepts[row] for row in members[root]]
        joined = functools.reduce(Concept.merged, group[1:], group[0])
        merged.append(dataclasses.replace(joined, xrefs=[c.id for c in group[1:]] + joined.xrefs))
    report.classes = len(merged)
    report.class_sizes = dict(sorted(Counter(len(rows) for rows in members.values()).items()))
    if members:
        biggest = max(members.values(), key=len)
        report.largest = (concepts[biggest[0]].id, len(biggest), len(unique(n for row in biggest for n in concepts[row].names)))
    return merged, report
