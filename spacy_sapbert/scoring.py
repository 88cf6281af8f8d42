"""The linker's scorer for `nlp.evaluate` / `spacy evaluate`: spaCy's `Scorer.score_links` on resolved ids.

Before scoring, predicted and gold kb ids are mapped to their concept's primary id (through the
linker's `concept` look-up), so a link to an alternative id of the gold concept counts as correct.
A gold of several ids ("A|B", "A+B") is met by a prediction of any of them; a gold without
concept ("-1", "NIL", empty) is a negative: a link on it is a false positive.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from spacy.scorer import Scorer
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry

from .errors import ConfigWarning
from .preprocess import gold_ids, is_cuiless

NIL = ""  # the kb id of an entity without link, in spaCy's Span.kb_id_
NEGATIVE_LABELS = (NIL, "NIL")

PrimaryId = Callable[[str], str]
Offsets = Tuple[int, int]


def keep_id(kb_id: str) -> str:
    return kb_id


def resolve_pair(gold: str, pred: str, primary_id: PrimaryId = keep_id) -> Tuple[str, str]:
    """(gold, predicted) as primary ids; a gold of several ids becomes the prediction when it is one of them."""
    resolved_pred = primary_id(pred) if pred else NIL
    if is_cuiless(gold):
        return NIL, resolved_pred
    golds = {primary_id(g) for g in gold_ids(gold)}
    if resolved_pred in golds:
        return resolved_pred, resolved_pred
    return (next(iter(golds)) if len(golds) == 1 else gold), resolved_pred


def with_kb_ids(doc: Doc, kb_ids: Dict[Offsets, str]) -> Doc:
    """A copy of `doc` whose entities are those at the offsets of `kb_ids`, linked to the given ids."""
    copy = doc.copy()
    copy.ents = [
        Span(copy, ent.start, ent.end, label=ent.label, kb_id=kb_ids[(ent.start_char, ent.end_char)])
        for ent in doc.ents
        if (ent.start_char, ent.end_char) in kb_ids
    ]
    return copy


def resolve_example(example: Example, primary_id: PrimaryId = keep_id, labels: Iterable[str] = ()) -> Example:
    """The example with the gold entities of `labels` (all when empty) and the predictions at their offsets, ids resolved."""
    wanted = set(labels)
    predicted = {(e.start_char, e.end_char): e.kb_id_ for e in example.predicted.ents}
    gold_ids_out: Dict[Offsets, str] = {}
    pred_ids_out: Dict[Offsets, str] = {}
    for ent in example.reference.ents:
        offsets = (ent.start_char, ent.end_char)
        if wanted and ent.label_ not in wanted:
            continue
        gold, pred = resolve_pair(ent.kb_id_, predicted.get(offsets, NIL), primary_id)
        gold_ids_out[offsets] = gold
        if offsets in predicted:
            pred_ids_out[offsets] = pred
    return Example(with_kb_ids(example.predicted, pred_ids_out), with_kb_ids(example.reference, gold_ids_out))


def score_sapbert_links(
    examples: Iterable[Example],
    *,
    primary_id: Optional[PrimaryId] = None,
    labels: Iterable[str] = (),
    **cfg: Any,
) -> Dict[str, Any]:
    """`Scorer.score_links` (nel_micro_p/r/f, nel_macro_*, nel_f_per_type) on the gold entities of `labels`
    (all when empty), with predicted and gold ids resolved through `primary_id`."""
    resolve = primary_id or keep_id
    examples = list(examples)
    resolved: List[Example] = [resolve_example(eg, resolve, labels) for eg in examples]
    gold = sum(len(eg.reference.ents) for eg in resolved)
    if gold and not any(eg.predicted.ents for eg in examples):
        warnings.warn(
            f"no predicted entity in {len(examples)} document(s) with {gold} gold entities to link: the pipeline finds no "
            "mentions (add a NER or a dictionary matcher: assemble, or build-index --label), so every link score is 0",
            ConfigWarning, stacklevel=2,
        )
    return Scorer.score_links(resolved, negative_labels=NEGATIVE_LABELS)


@registry.scorers("spacy-sapbert.linker_scorer.v1")
def make_linker_scorer() -> Callable[..., Dict[str, Any]]:
    """The sapbert_linker's scorer; the component passes its labels and its `primary_id` look-up."""
    return score_sapbert_links
