"""Annotated corpora as NER training data: PubTator documents -> spaCy Docs whose ents are the gold mentions.

`spacy train` reads DocBins; this module makes them, and counts every gold mention it could not
keep as it is, per file, instead of dropping it silently:

- a mention boundary inside a token (spaCy's English tokenizer keeps ``(PAN)-induced`` and
  ``Na+/K+`` whole, but BC5CDR annotates ``PAN`` and ``Na``): the token is split there, so the
  entity keeps its exact offsets (``split_tokens``);
- overlapping mentions (a Doc's ents cannot overlap): the longer is kept, as spaCy's
  ``filter_spans`` does (``overlapping``); the same span twice with the same label is one entity
  (``duplicates``), whose kb id joins both gold ids as ``A|B`` (either is right) when they differ
  (``duplicates_with_other_ids``);
- a type that the label map does not know (``unknown_labels``) or a label not asked for
  (``left_out_labels``) is left out and counted by name; so is a mention of nothing but
  whitespace (``blank``).

The gold id of each mention is kept as the entity's ``kb_id_``, so the same DocBin scores the linker
with ``spacy evaluate``.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from .errors import SapbertError
from .readers.corpora import Document, cut_at_boundaries, read_pubtator, split_at_boundaries  # noqa: F401 (re-exported)

# PubTator types -> NER labels. NCBI-disease's four types are all diseases; BC5CDR's are kept.
DEFAULT_LABEL_MAP: Dict[str, str] = {
    "SpecificDisease": "Disease",
    "DiseaseClass": "Disease",
    "Modifier": "Disease",
    "CompositeMention": "Disease",
    "Disease": "Disease",
    "Chemical": "Chemical",
}


@dataclass
class ConversionReport:
    """What became of the gold mentions of one corpus file."""

    source: str
    documents: int = 0
    mentions: int = 0
    types: Counter = field(default_factory=Counter)  # corpus type -> mentions
    entities: Counter = field(default_factory=Counter)  # label -> entities kept
    split_tokens: int = 0
    overlapping: int = 0
    duplicates: int = 0
    duplicates_with_other_ids: int = 0  # of the duplicates: another gold id, joined into the entity's "A|B"
    blank: int = 0
    unknown_labels: Counter = field(default_factory=Counter)  # corpus type -> mentions left out
    left_out_labels: Counter = field(default_factory=Counter)  # label -> mentions left out (not asked for)

    def add(self, other: "ConversionReport") -> None:
        self.documents += other.documents
        self.mentions += other.mentions
        self.types.update(other.types)
        self.entities.update(other.entities)
        self.split_tokens += other.split_tokens
        self.overlapping += other.overlapping
        self.duplicates += other.duplicates
        self.duplicates_with_other_ids += other.duplicates_with_other_ids
        self.blank += other.blank
        self.unknown_labels.update(other.unknown_labels)
        self.left_out_labels.update(other.left_out_labels)

    def summary(self) -> str:
        """One line: documents, mentions, entities per label, and every kind of problem with its count."""
        kept = ", ".join(f"{label} {n:,}" for label, n in sorted(self.entities.items())) or "none"
        parts = [
            f"{self.source}: {self.documents:,} documents, {self.mentions:,} mentions -> "
            f"{sum(self.entities.values()):,} entities ({kept})",
            f"{self.split_tokens:,} with a boundary inside a token (token split there; `spacy train` tokenizes the text "
            "again and learns them only where its tokenizer splits there too)",
            f"{self.overlapping:,} overlapping a longer mention (left out)",
            f"{self.duplicates:,} duplicates (merged; {self.duplicates_with_other_ids:,} of them with another gold id, joined as A|B)",
        ]
        if self.blank:
            parts.append(f"{self.blank:,} of nothing but whitespace (left out)")
        if self.unknown_labels:
            parts.append("unknown types left out: " + ", ".join(f"{t} {n:,}" for t, n in sorted(self.unknown_labels.items())))
        if self.left_out_labels:
            parts.append("labels not asked for, left out: " + ", ".join(f"{t} {n:,}" for t, n in sorted(self.left_out_labels.items())))
        return "; ".join(parts)

    def to_dict(self) -> dict:
        """The counts as JSON-ready values; each Counter as {name: count} (dataclasses.asdict would rebuild a
        Counter from its (name, count) items, counting the pairs)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {key: dict(value) if isinstance(value, Counter) else value for key, value in values.items()}


def parse_label_map(items: Iterable[str], base: Mapping[str, str] = DEFAULT_LABEL_MAP) -> Dict[str, str]:
    """`base` updated with ``TYPE=LABEL`` items (a CLI option); an item without '=' is an error naming it."""
    label_map = dict(base)
    given: Dict[str, str] = {}
    for item in items:
        corpus_type, sep, label = item.partition("=")
        if not sep or not corpus_type.strip() or not label.strip():
            raise SapbertError(f"--label-map {item!r}: expected TYPE=LABEL, e.g. SpecificDisease=Disease")
        if given.get(corpus_type.strip(), label.strip()) != label.strip():  # the last one won, silently
            raise SapbertError(f"--label-map maps {corpus_type.strip()} twice ({given[corpus_type.strip()]}, {label.strip()}); give one")
        given[corpus_type.strip()] = label_map[corpus_type.strip()] = label.strip()
    return label_map


def trimmed_offsets(text: str, start: int, end: int) -> Tuple[int, int]:
    """(start, end) without the whitespace at the mention's ends (NCBI train has a mention with trailing spaces)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def training_doc(
    make_doc: Callable[[str], Doc],
    document: Document,
    label_map: Mapping[str, str] = DEFAULT_LABEL_MAP,
    labels: Optional[Sequence[str]] = None,
    source: str = "",
) -> Tuple[Doc, ConversionReport]:
    """The Doc of one document with its gold mentions as ents (labels mapped), and what was counted on the way."""
    report = ConversionReport(source=source, documents=1, mentions=len(document.mentions))
    report.types.update(mention.label for mention in document.mentions)
    wanted = set(labels) if labels else None
    placed: List[Tuple[int, int, str, str]] = []
    for mention in document.mentions:
        label = label_map.get(mention.label)
        if label is None:
            report.unknown_labels[mention.label] += 1
            continue
        if wanted is not None and label not in wanted:
            report.left_out_labels[label] += 1
            continue
        start, end = trimmed_offsets(document.text, mention.start, mention.end)
        if start < end:
            placed.append((start, end, label, mention.gold))
        else:
            report.blank += 1
    doc = make_doc(document.text)
    token_starts = {token.idx for token in doc}
    token_ends = {token.idx + len(token.text) for token in doc}
    report.split_tokens = sum(1 for start, end, _, _ in placed if start not in token_starts or end not in token_ends)
    doc = cut_at_boundaries(doc, {offset for start, end, _, _ in placed for offset in (start, end)})
    spans: List[Span] = []
    seen: Dict[Tuple[int, int, str], int] = {}  # (start, end, label) -> its place in spans
    for start, end, label, gold in placed:
        span = doc.char_span(start, end, label=label, kb_id=gold)
        if span is None:  # cannot happen after the split; a loud error beats a silent drop
            raise SapbertError(f"{source}: document {document.id}: mention {start}-{end} does not align to tokens after splitting")
        key = (span.start, span.end, label)
        if key in seen:
            report.duplicates += 1
            first = spans[seen[key]]
            if gold and gold not in first.kb_id_.split("|"):  # annotated twice with two ids: either is right
                report.duplicates_with_other_ids += 1
                spans[seen[key]] = Span(doc, first.start, first.end, label=label, kb_id=f"{first.kb_id_}|{gold}" if first.kb_id_ else gold)
            continue
        seen[key] = len(spans)
        spans.append(span)
    kept = filter_spans(spans)
    report.overlapping = len(spans) - len(kept)
    doc.ents = kept
    report.entities.update(span.label_ for span in kept)
    return doc, report


def convert_pubtator(
    path: Path,
    make_doc: Callable[[str], Doc],
    label_map: Mapping[str, str] = DEFAULT_LABEL_MAP,
    labels: Optional[Sequence[str]] = None,
) -> Tuple[List[Doc], ConversionReport]:
    """Training Docs of every document of a PubTator file, and the file's report (strict reading: a malformed
    line is an error naming file and line)."""
    report = ConversionReport(source=Path(path).name)
    docs = []
    for document in read_pubtator(path):
        doc, counts = training_doc(make_doc, document, label_map, labels, source=report.source)
        docs.append(doc)
        report.add(counts)
    return docs, report
