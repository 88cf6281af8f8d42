"""Evaluation dictionaries: normalized concepts, the biosyn protocol's extra names, golds outside the vocabulary."""
from __future__ import annotations

from typing import Dict, Iterable, List, Sequence, Tuple

from ..kb import Concept, KnowledgeBase
from ..normalizer import Normalizer
from .queries import EvalMention

PROTOCOLS = ("strict", "biosyn")


def default_protocols(train: Sequence) -> List[str]:
    """The protocols run when none is asked for: strict, and biosyn when there are training corpora to add."""
    return list(PROTOCOLS if train else ("strict",))


def normalized_concepts(concepts: Iterable[Concept], normalizer: Normalizer) -> List[Concept]:
    """Concepts whose names went through the normalizer (for the string baselines and DHNS)."""
    out = []
    for concept in concepts:
        names = [n for n in (normalizer(name) for name in concept.names) if n]
        if names:
            out.append(Concept(concept.id, names[0], names[1:], concept.types, concept.xrefs, concept.alt_ids))
    return out


def training_names(mentions: Iterable[EvalMention], kb: KnowledgeBase, new_concepts: bool = False) -> List[Tuple[str, str]]:
    """(concept id, mention text) for every single-concept training mention, the biosyn protocol's extra names.

    A mention whose gold id is not in `kb` is left out, or with `new_concepts` kept under its gold id: BioSyn's
    dictionary takes every training mention as a name of its gold id, also of an id the vocabulary lacks
    (BC5CDR annotates "cardiotoxicity" as D066126, a MeSH heading of 2014 that MEDIC of 2012 does not hold)."""
    out = []
    for mention in mentions:
        ids = mention.gold_set
        if len(ids) == 1 and len(mention.queries) == 1:
            gold = next(iter(ids))
            concept = kb.get(gold)
            if concept is not None:
                out.append((concept.id, mention.queries[0]))
            elif new_concepts:
                out.append((gold, mention.queries[0]))
    return out


def with_extra_names(concepts: Sequence[Concept], extra: Iterable[Tuple[str, str]]) -> List[Concept]:
    """Copies of `concepts` with the extra (id, name) pairs appended as synonyms; an id that no concept has
    (primary or alternative) becomes a new concept of its names."""
    added: Dict[str, List[str]] = {}
    for concept_id, name in extra:
        added.setdefault(concept_id, []).append(name)
    known = {i for c in concepts for i in c.all_ids}
    new = [Concept(concept_id, names[0], names[1:]) for concept_id, names in added.items() if concept_id not in known]
    return [
        Concept(c.id, c.name, c.synonyms + added[c.id], c.types, c.xrefs, c.alt_ids) if c.id in added else c
        for c in concepts
    ] + new


def missing_gold(mentions: Iterable[EvalMention], kb: KnowledgeBase) -> Tuple[int, List[str]]:
    """How many mentions have no gold id in the vocabulary, and which gold ids are absent."""
    count = 0
    absent = set()
    for mention in mentions:
        ids = mention.gold_set
        lacking = {i for i in ids if i not in kb}
        absent |= lacking
        if lacking == ids:
            count += 1
    return count, sorted(absent)
