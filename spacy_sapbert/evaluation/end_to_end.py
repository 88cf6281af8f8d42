"""End-to-end scoring of a whole pipeline on raw documents: (span, id) and NER P/R/F1, strict and overlapping."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from spacy.tokens import Doc

from ..preprocess import gold_ids, is_cuiless
from ..readers.corpora import Document


class Entity(NamedTuple):
    """A gold mention or a predicted entity for end-to-end scoring: offsets, label and the ids it stands for
    (a gold's ids; a prediction's linked concept with its alternative ids; empty: no id)."""

    start: int
    end: int
    label: str
    ids: frozenset


def _prf(right_predictions: int, predictions: int, found_golds: int, golds: int) -> Dict[str, float]:
    precision = right_predictions / predictions if predictions else 0.0
    recall = found_golds / golds if golds else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tp": right_predictions,
        "fp": predictions - right_predictions,
        "fn": golds - found_golds,
    }


def _match_counts(golds: Sequence[Entity], predictions: Sequence[Entity], same: Callable[[Entity, Entity], bool]) -> Tuple[int, int]:
    """(predictions that match some gold, golds matched by some prediction) under `same`."""
    right = sum(1 for p in predictions if any(same(g, p) for g in golds))
    found = sum(1 for g in golds if any(same(g, p) for p in predictions))
    return right, found


def _same_span(g: Entity, p: Entity) -> bool:
    return (g.start, g.end) == (p.start, p.end)


def _overlap(g: Entity, p: Entity) -> bool:
    return g.start < p.end and p.start < g.end


def score_end_to_end(documents: Sequence[Tuple[Sequence[Entity], Sequence[Entity]]]) -> Dict[str, Any]:
    """Scores of (gold entities, predicted entities) per document; pure.

    - (span, id), strict: a prediction is right when a gold has its offsets and shares an id with it;
      golds without an id and predictions without a link take no part. Top-level keys.
    - (span, id), overlap: the same with any character overlap instead of equal offsets; precision
      counts the predictions that overlap a right gold, recall the golds that a right prediction overlaps.
    - ner: strict spans with the label, per label and over all labels (`micro`), every gold and every
      prediction taking part whether or not it has an id.
    """
    strict = [0, 0, 0, 0]
    overlap = [0, 0, 0, 0]
    ner: Dict[str, List[int]] = {}
    for golds, predictions in documents:
        linked_golds = [g for g in golds if g.ids]
        linked = [p for p in predictions if p.ids]
        for counts, same_place in ((strict, _same_span), (overlap, _overlap)):
            right, found = _match_counts(linked_golds, linked, lambda g, p: same_place(g, p) and bool(g.ids & p.ids))
            counts[0] += right
            counts[1] += len(linked)
            counts[2] += found
            counts[3] += len(linked_golds)
        for label in {e.label for e in golds} | {e.label for e in predictions}:
            label_golds = [g for g in golds if g.label == label]
            label_predictions = [p for p in predictions if p.label == label]
            right, found = _match_counts(label_golds, label_predictions, _same_span)
            for key in (label, "micro"):
                counts = ner.setdefault(key, [0, 0, 0, 0])
                counts[0] += right
                counts[1] += len(label_predictions)
                counts[2] += found
                counts[3] += len(label_golds)
    return {
        **_prf(*strict),
        "overlap": _prf(*overlap),
        "ner": {label: _prf(*counts) for label, counts in sorted(ner.items())},
    }


def gold_mention_doc(nlp, document: Document, label_map: Dict[str, str], wanted: Optional[set] = None) -> Doc:
    """The Doc of a document whose ents are its gold mentions of the `wanted` types (all when None), placed
    as `document_to_doc` places them, with labels mapped and no ids: linked as if a perfect NER had found them."""
    from spacy.tokens import Span

    from ..readers.corpora import document_to_doc

    mentions = [m for m in document.mentions if wanted is None or m.label in wanted]
    doc = document_to_doc(nlp, dataclasses.replace(document, mentions=mentions), label_map)
    doc.ents = [Span(doc, ent.start, ent.end, label=ent.label_) for ent in doc.ents]  # without their gold ids
    return doc


def mention_finders(nlp) -> List[str]:
    """The pipeline's components that set doc.ents (NER, entity ruler, dictionary matcher)."""
    return [name for name in nlp.pipe_names if "doc.ents" in nlp.get_pipe_meta(name).assigns]


def evaluate_end_to_end(
    nlp,
    documents: Sequence[Document],
    labels: Optional[Iterable[str]] = None,
    label_map: Optional[Dict[str, str]] = None,
    gold_mentions: bool = False,
) -> Dict[str, Any]:
    """Run a whole pipeline on raw document texts and score it against the gold mentions (score_end_to_end).

    A predicted id stands for its concept's primary and alternative ids, taken from the sapbert_linker
    that links the entity's label (there may be several); a gold id `A|B` for each of its parts, `-1`
    for none. Gold types are mapped to NER labels with `label_map` (default: ner_corpus's, NCBI-disease's
    types -> Disease), so NER scores compare like with like; `labels` keeps gold mentions of those types, and the
    predictions of their mapped labels (a Chemical entity is no false positive of a Disease-only score) except those
    that overlap a gold mention of a type left out (NCBI-disease's SpecificDisease and DiseaseClass are both
    Disease: a Disease entity on a DiseaseClass mention is no false positive of a SpecificDisease score).
    `gold_mentions`: the components that find mentions are left out and the rest of the pipeline (linkers,
    an entity_linker) links the gold mentions (an abbreviation detector labelling short forms leaves them as they
    are): (span, id) recall is then linking accuracy.
    """
    from ..ner_corpus import DEFAULT_LABEL_MAP
    from ..pipeline import gold_entities_kept, linker_for_label, require_linkers

    linkers = [linker for _, linker in require_linkers(nlp)]
    wanted = set(labels) if labels else None
    mapping = DEFAULT_LABEL_MAP if label_map is None else label_map
    if gold_mentions:
        with nlp.select_pipes(disable=mention_finders(nlp)), gold_entities_kept(nlp):
            docs = list(nlp.pipe(gold_mention_doc(nlp, d, mapping, wanted) for d in documents))
    else:
        docs = list(nlp.pipe(d.text for d in documents))
    kept_labels = None if wanted is None else {mapping.get(label, label) for label in wanted}  # the gold's, as the NER labels them
    scored = []
    for document, doc in zip(documents, docs):
        golds = [
            Entity(m.start, m.end, mapping.get(m.label, m.label), frozenset() if is_cuiless(m.gold) else frozenset(gold_ids(m.gold)))
            for m in document.mentions
            if wanted is None or m.label in wanted
        ]
        left_out = [(m.start, m.end, mapping.get(m.label, m.label)) for m in document.mentions if wanted is not None and m.label not in wanted]
        predictions = []
        for ent in doc.ents:
            if kept_labels is not None and ent.label_ not in kept_labels:  # another type's entity: not scored, as its golds
                continue
            if any(start < ent.end_char and ent.start_char < end and label == ent.label_ for start, end, label in left_out):
                continue  # on a gold mention of a type left out, whose label it shares: scored with that type
            ids: frozenset = frozenset()
            if ent.kb_id_:
                linker = linker_for_label(linkers, ent.label_)
                concept = linker.concept(ent.kb_id_) if linker is not None else None
                ids = frozenset(concept.all_ids if concept is not None else [ent.kb_id_])
            predictions.append(Entity(ent.start_char, ent.end_char, ent.label_, ids))
        scored.append((golds, predictions))
    return score_end_to_end(scored)


def end_to_end_table(scores: Dict[str, Any]) -> str:
    """A Markdown table of score_end_to_end's result: (span, id) strict and overlap, then NER per label."""
    rows = [("(span, id), strict", scores), ("(span, id), overlap", scores["overlap"])]
    rows += [(f"NER {label}", ner) for label, ner in scores["ner"].items()]
    lines = ["| scored | P | R | F1 | tp | fp | fn |", "|---|---|---|---|---|---|---|"]
    for name, s in rows:
        lines.append(
            f"| {name} | {100 * s['precision']:.1f} | {100 * s['recall']:.1f} | {100 * s['f1']:.1f} | {s['tp']} | {s['fp']} | {s['fn']} |"
        )
    return "\n".join(lines)
