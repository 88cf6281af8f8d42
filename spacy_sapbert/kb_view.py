"""scispaCy's knowledge-base names over a linker's index: `linker.kb.cui_to_entity` and `linker.kb.alias_to_cuis`.

Read-only mappings built on demand from the index's memory-mapped tables, so code written for
scispaCy's `linker.kb` keeps working:

- `cui_to_entity[id]`: the `Concept` of a primary or alternative id (scispaCy's `Entity`: `concept_id`
  is `id`, `canonical_name` is `name`, `aliases` are `synonyms`, `types`, `definition`);
- `alias_to_cuis[alias]`: the set of primary ids that have the name. Names are stored normalized
  (the linker's normalizer, e.g. lowercased), so an alias is normalized before the look-up; iterating
  gives the stored, normalized names.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Iterator, Optional, Set

from .index import ConceptIndex
from .kb import Concept


class ConceptsById(Mapping):
    """id -> Concept over an index's concept table (alternative ids are found too, not iterated)."""

    def __init__(self, index: ConceptIndex):
        self.index = index

    def __getitem__(self, concept_id: str) -> Concept:
        concept = self.index.concept(concept_id)
        if concept is None:
            raise KeyError(concept_id)
        return concept

    def __contains__(self, concept_id: object) -> bool:
        return isinstance(concept_id, str) and self.index.concept(concept_id) is not None  # as [] finds it

    def __iter__(self) -> Iterator[str]:
        return iter(self.index.concepts.ids)

    def __len__(self) -> int:
        return len(self.index.concepts)


class IdsByName(Mapping):
    """normalized name -> set of primary ids (ConceptIndex.name_row)."""

    def __init__(self, index: ConceptIndex):
        self.index = index

    def _row(self, alias: str) -> Optional[int]:
        return self.index.name_row(self.index.normalizer(alias))

    def __getitem__(self, alias: str) -> Set[str]:
        row = self._row(alias) if isinstance(alias, str) else None
        if row is None:
            raise KeyError(alias)
        ids = self.index.concepts.ids
        return {ids[concept_row] for concept_row in self.index.links.concepts_of(row)}

    def __contains__(self, alias: object) -> bool:
        return isinstance(alias, str) and self._row(alias) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.index.names)

    def __len__(self) -> int:
        return len(self.index.names)


class KnowledgeBaseView:
    """`cui_to_entity` and `alias_to_cuis` of one index, as scispaCy's linker.kb names them."""

    def __init__(self, index: ConceptIndex):
        self.cui_to_entity = ConceptsById(index)
        self.alias_to_cuis = IdsByName(index)
