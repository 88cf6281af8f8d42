"""Annotated entity-linking corpora: PubTator documents and the flat query files of BioSyn and XL-BEL.

Formats
-------
PubTator (NCBI-disease, BC5CDR, MedMentions), one block per document, blank line between blocks::

    PMID|t|title
    PMID|a|abstract
    PMID<TAB>start<TAB>end<TAB>mention<TAB>type<TAB>concept_id[<TAB>composite parts]
    PMID<TAB>CID<TAB>chemical<TAB>disease          (relation line: checked, then skipped)

Offsets are 0-based, end-exclusive character offsets into ``title + " " + abstract``. The gold id is
kept exactly as written ("D003924", "OMIM:215600", "D001|D002", "D001+D002", "UMLS:C0010674", "-1").
BC5CDR composite mentions list their parts' texts "|"-separated in a 7th column (``Mention.parts``).

BioSyn ``.concept`` files: ``PMID||start|end||type||mention||concept_id`` (one mention per line).

XL-BEL: ``CUI||mention`` (v0.0) or ``CUI||mention||sentence with <tgt>mention</tgt>`` (v1.0).

JSON lines (texts to link, `link --format jsonl`): one object per line, ``{"id": "PMID1", "text": "..."}``;
"id" (a string or an integer) is optional.

Every reader reads UTF-8 (an invalid byte is reported with file and line) and takes ``strict``:
True raises ``VocabularyFormatError`` naming file and line for a malformed line or a mention whose
text does not match its offsets; False skips it and warns once (``CorpusWarning``) at the end of the
file with the number skipped and the first place.
"""
from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, List, Mapping, Optional, Set, Tuple, Union

from ..errors import SapbertError
from . import LinePolicy, MalformedLine, PathLike, VocabularyWarning, check_file, detect_corpus_format, numbered_lines

if TYPE_CHECKING:  # spaCy is imported only when Docs are made
    from spacy.tokens import Doc

__all__ = [
    "CorpusWarning",
    "Document",
    "Mention",
    "Query",
    "detect_corpus_format",
    "document_to_doc",
    "documents_to_docs",
    "parse_biosyn_concept_line",
    "parse_jsonl_document",
    "parse_pubtator_mention",
    "parse_pubtator_relation",
    "parse_xlbel_line",
    "queries_from_documents",
    "read_biosyn_concepts",
    "read_jsonl_documents",
    "read_pubtator",
    "read_xlbel",
]


class CorpusWarning(VocabularyWarning):
    """Corpus lines or mentions were skipped (strict=False), or gold mentions could not be placed on a Doc."""


@dataclass
class Mention:
    """One annotated mention: character offsets into its document's text, its type and raw gold id."""

    start: int
    end: int
    text: str
    label: str
    gold: str
    parts: List[str] = field(default_factory=list)


@dataclass
class Document:
    """One annotated document; `text` is title + " " + abstract for PubTator files."""

    id: str
    text: str
    mentions: List[Mention] = field(default_factory=list)


@dataclass
class Query:
    """One linking query: a mention string and its raw gold id, where it came from, and optional context."""

    mention: str
    gold: str
    doc_id: str
    label: str
    context: str = ""


class _CorpusPolicy(LinePolicy):
    """LinePolicy that warns with CorpusWarning."""

    warning = CorpusWarning


# ----------------------------------------------------------------------------------------------------
# PubTator

_TEXT_LINE = re.compile(r"([^|\t]+)\|([ta])\|(.*)\Z", re.DOTALL)


_INT = re.compile(r"-?[0-9]{1,18}\Z")  # an offset; more digits would be no offset (and int() refuses > 4300)
_RELATION_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def _is_int(value: str) -> bool:
    """Whether `value` (outer whitespace aside) is an integer of at most 18 ASCII digits."""
    return bool(_INT.match(value.strip()))


def parse_pubtator_relation(line: str) -> Optional[str]:
    """The PMID of a relation line ``PMID<TAB>relation<TAB>id<TAB>id`` (e.g. BC5CDR's CID lines), else None."""
    fields = line.split("\t")
    if len(fields) != 4 or not _RELATION_TYPE.match(fields[1].strip()):
        return None
    if not fields[0].strip() or not fields[2].strip() or not fields[3].strip():
        return None
    return fields[0].strip()


def parse_pubtator_mention(line: str) -> Tuple[str, Mention]:
    """(PMID, Mention) of a PubTator mention line; MalformedLine if it is not one.

    A mention line has 6 or 7 tab-separated fields (PMID, start, end, mention, type, concept id[, the
    parts of a composite mention]) and integer offsets. Relation lines are told apart before this
    (parse_pubtator_relation); any other tab-separated line is malformed.
    """
    fields = line.split("\t")
    if len(fields) < 2 or (len(fields) < 5 and not _is_int(fields[1])):
        raise MalformedLine(
            f"neither a mention line (PMID, start, end, mention, type, concept id) nor a relation line "
            f"(PMID, relation, id, id): {len(fields)} tab-separated fields"
        )
    if not _is_int(fields[1]):
        raise MalformedLine(f"start offset {fields[1].strip()!r} is not an integer")
    if not 6 <= len(fields) <= 7:
        raise MalformedLine(
            f"mention line has {len(fields)} tab-separated fields, expected 6 "
            "(PMID, start, end, mention, type, concept id) or 7 (with the parts of a composite mention)"
        )
    pmid, start_s, end_s, text, label, gold = (f.strip() if i != 3 else f for i, f in enumerate(fields[:6]))
    if not pmid:
        raise MalformedLine("empty PMID")
    if not _is_int(end_s):
        raise MalformedLine(f"end offset {end_s!r} is not an integer")
    start, end = int(start_s), int(end_s)
    if start < 0 or end <= start:
        raise MalformedLine(f"bad offsets {start}-{end}")
    if not label:
        raise MalformedLine("empty type")
    if not gold:
        raise MalformedLine("empty concept id (use -1 for a mention without concept)")
    parts: List[str] = []
    if len(fields) > 6 and fields[6].strip():
        parts = [p.strip() for p in fields[6].split("|") if p.strip()]
    return pmid, Mention(start=start, end=end, text=text, label=label, gold=gold, parts=parts)


class _DocBuilder:
    def __init__(self, pmid: str, line_no: int):
        self.id = pmid
        self.line_no = line_no
        self.title: Optional[str] = None
        self.abstract: Optional[str] = None
        self.mentions: List[Tuple[int, Mention]] = []

    @property
    def text(self) -> str:
        title = self.title or ""
        return title if self.abstract is None else f"{title} {self.abstract}"


def read_pubtator(path: PathLike, strict: bool = True) -> Iterator[Document]:
    """Documents of a PubTator file (NCBI-disease, BC5CDR, MedMentions), in file order.

    Each block is one Document (a PMID that occurs in two blocks -- NCBI train has 8528200 twice -- gives
    two Documents). Relation lines (exactly ``PMID<TAB>relation<TAB>id<TAB>id``) must belong to the
    document they are in and are then skipped; any other tab-separated line that is not a valid
    mention line -- e.g. one whose start offset is not an integer -- is malformed. Every mention's text
    must equal ``text[start:end]`` up to whitespace at its ends (NCBI train line 3249 has trailing
    spaces; the offsets decide and Mention.text is then ``text[start:end]``). A malformed line or
    mention raises VocabularyFormatError(file, line) when strict; otherwise it is skipped and counted
    in one warning (a document without a title line counts once, with its mentions).
    """
    return _read_pubtator(check_file(path), strict)


def _read_pubtator(path: Path, strict: bool) -> Iterator[Document]:
    policy = _CorpusPolicy(path, strict)
    current: Optional[_DocBuilder] = None

    def finish(builder: _DocBuilder) -> Optional[Document]:
        if builder.title is None:
            policy.reject(builder.line_no, f"document {builder.id} has no title line ('{builder.id}|t|...')")
            return None
        text = builder.text
        mentions = []
        for line_no, mention in builder.mentions:
            if mention.end > len(text):
                policy.reject(
                    line_no,
                    f"mention {mention.text!r} ends at {mention.end}, after the end of document "
                    f"{builder.id} ({len(text)} characters)",
                )
                continue
            found = text[mention.start : mention.end]
            if found != mention.text and found.strip() == mention.text.strip():
                # e.g. NCBI train line 3249 has trailing spaces in the mention column: the offsets decide
                mention.text = found
            if found != mention.text:
                policy.reject(
                    line_no,
                    f"mention text {mention.text!r} does not match the document text at "
                    f"{mention.start}-{mention.end} ({found!r})",
                )
                continue
            mentions.append(mention)
        return Document(id=builder.id, text=text, mentions=mentions)

    for line_no, line in numbered_lines(path, policy):
        if not line.strip():
            if current is not None:
                doc = finish(current)
                current = None
                if doc is not None:
                    yield doc
            continue
        text_match = _TEXT_LINE.match(line)
        if text_match and "\t" not in line.split("|", 1)[0]:
            pmid, kind, content = text_match.group(1).strip(), text_match.group(2), text_match.group(3)
            if current is not None and current.id != pmid:
                # a new document without a separating blank line
                doc = finish(current)
                current = None
                if doc is not None:
                    yield doc
            if current is None:
                current = _DocBuilder(pmid, line_no)
            if kind == "t":
                if current.title is not None:
                    policy.reject(line_no, f"second title line for document {pmid}", line)
                    continue
                if current.mentions or current.abstract is not None:
                    policy.reject(line_no, f"title line of document {pmid} after its abstract or mentions", line)
                    continue
                current.title = content
            else:
                if current.abstract is not None:
                    policy.reject(line_no, f"second abstract line for document {pmid}", line)
                    continue
                if current.mentions:
                    policy.reject(line_no, f"abstract line of document {pmid} after its mentions", line)
                    continue
                current.abstract = content
            continue
        if "\t" not in line:
            policy.reject(line_no, "neither a 'PMID|t|' / 'PMID|a|' text line nor a tab-separated annotation line", line)
            continue
        relation_of = parse_pubtator_relation(line)
        if relation_of is not None:
            if current is None or current.id != relation_of:
                expected = "no document" if current is None else f"document {current.id}"
                policy.reject(line_no, f"relation of document {relation_of} inside {expected}", line)
            continue  # relation lines are not mentions
        try:
            pmid, mention = parse_pubtator_mention(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
            continue
        if current is None or current.id != pmid:
            expected = "no document" if current is None else f"document {current.id}"
            policy.reject(line_no, f"mention of document {pmid} inside {expected}", line)
            continue
        current.mentions.append((line_no, mention))
    if current is not None:
        doc = finish(current)
        if doc is not None:
            yield doc
    policy.finish(what="line or mention")


# ----------------------------------------------------------------------------------------------------
# BioSyn .concept and XL-BEL query files


def parse_biosyn_concept_line(line: str) -> Optional[Query]:
    """Query of one ``PMID||start|end||type||mention||concept_id`` line, None for a blank line."""
    if not line.strip():
        return None
    fields = line.split("||")
    if len(fields) != 5:
        raise MalformedLine(
            f"{len(fields)} '||'-separated fields, expected 5 (PMID||start|end||type||mention||concept_id)"
        )
    pmid, offsets, label, mention, gold = (f.strip() for f in fields)
    if not pmid:
        raise MalformedLine("empty PMID")
    bounds = offsets.split("|")
    if len(bounds) != 2 or not all(_is_int(b) for b in bounds):
        raise MalformedLine(f"offsets {offsets!r} are not 'start|end'")
    if not mention:
        raise MalformedLine("empty mention")
    if not gold:
        raise MalformedLine("empty concept id")
    start, end = (int(b) for b in bounds)
    if (start, end) != (0, 0) and end - start != len(mention):  # 0|0: a file without offsets (NLM-Chem's)
        raise MalformedLine(
            f"offsets {offsets!r} span {end - start} characters, the mention {mention!r} has {len(mention)}: "
            "a column out of place (PMID||start|end||type||mention||concept_id)?"
        )
    return Query(mention=mention, gold=gold, doc_id=pmid, label=label)


def read_biosyn_concepts(path: PathLike, strict: bool = True) -> Iterator[Query]:
    """Queries of a BioSyn ``.concept`` file (label = the type column, doc_id = the PMID)."""
    return _read_records(check_file(path), strict, parse_biosyn_concept_line)


_TGT = re.compile(r"<tgt>(.*?)</tgt>", re.DOTALL)


def parse_xlbel_line(line: str) -> Optional[Query]:
    """Query of one XL-BEL line, None for a blank line (doc_id is filled in by the reader).

    ``CUI||mention`` (v0.0): mention only. ``CUI||mention||sentence`` (v1.0): the sentence must mark the
    mention once with ``<tgt>...</tgt>`` (the mention column's text); `context` is the sentence with the two
    markers removed (outer whitespace stripped) and `mention` the marked text -- or the mention column when
    the marked span is empty (one line of the German file has ``<tgt></tgt>``).
    """
    if not line.strip():
        return None
    fields = line.split("||")
    if len(fields) not in (2, 3):
        raise MalformedLine(
            f"{len(fields)} '||'-separated fields, expected 'CUI||mention' or 'CUI||mention||context'"
        )
    gold, mention = fields[0].strip(), fields[1].strip()
    if not gold:
        raise MalformedLine("empty concept id")
    context = ""
    if len(fields) == 3:
        sentence = fields[2]
        markers = list(_TGT.finditer(sentence))
        if len(markers) != 1 or sentence.count("<tgt>") != 1 or sentence.count("</tgt>") != 1:
            raise MalformedLine("context must mark the mention exactly once with <tgt>...</tgt>")
        marked = markers[0].group(1).strip()
        if marked and mention and marked != mention:
            raise MalformedLine(f"the mention column {mention!r} is not the text marked with <tgt> ({marked!r})")
        mention = marked or mention
        context = (sentence[: markers[0].start()] + markers[0].group(1) + sentence[markers[0].end() :]).strip()
    if not mention:
        raise MalformedLine("empty mention")
    return Query(mention=mention, gold=gold, doc_id="", label="", context=context)


def read_xlbel(path: PathLike, strict: bool = True) -> Iterator[Query]:
    """Queries of an XL-BEL file, either form (see parse_xlbel_line); doc_id = "<file name>:<line>"."""
    path = check_file(path)

    def parse(line: str, line_no: int) -> Optional[Query]:
        query = parse_xlbel_line(line)
        if query is not None:
            query.doc_id = f"{path.name}:{line_no}"
        return query

    return _read_records(path, strict, parse, with_line_no=True)


def parse_jsonl_document(line: str) -> Optional[Tuple[Union[str, int, None], str]]:
    """(id or None, text) of one JSON-lines record, the id as the record has it (a string or an integer); None for a
    blank line."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError as err:
        raise MalformedLine(f"not JSON ({err})") from None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        raise MalformedLine('expected an object with a string "text"')
    doc_id = record.get("id")
    if doc_id is not None and (isinstance(doc_id, bool) or not isinstance(doc_id, (str, int))):
        raise MalformedLine('"id" must be a string or an integer')
    if isinstance(doc_id, int) and not -(2 ** 63) <= doc_id < 2 ** 64:  # the JSON writer cannot echo it
        raise MalformedLine('an integer "id" must fit in 64 bits; write a larger one as a string')
    for field, value in (("text", record["text"]), ("id", doc_id)):
        if isinstance(value, str) and not _encodes(value):
            raise MalformedLine(f'"{field}" holds an unpaired surrogate (\\ud800-\\udfff), which is no character')
    return doc_id, record["text"]


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_jsonl_documents(path: PathLike, strict: bool = True) -> Iterator[Tuple[Union[str, int, None], str]]:
    """(id or None, text) of each record of a JSON-lines file, in file order."""
    return _read_records(check_file(path), strict, parse_jsonl_document)


def _read_records(path: Path, strict: bool, parse: Callable, with_line_no: bool = False) -> Iterator:
    """What `parse` makes of each line of `path` (None: nothing), with the strict / lenient line policy."""
    policy = _CorpusPolicy(path, strict)
    for line_no, line in numbered_lines(path, policy):
        try:
            query = parse(line, line_no) if with_line_no else parse(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
            continue
        if query is not None:
            yield query
    policy.finish()


def queries_from_documents(
    docs: Iterable[Document], labels: Optional[Iterable[str]] = None, split_composites: bool = False
) -> Iterator[Query]:
    """One (mention, gold) Query per mention, in document order, optionally only for the given labels.

    With `split_composites`, a mention whose gold has "|" gives one query per part: BC5CDR's listed
    parts when their number matches the ids, else ``preprocess.split_composite``.
    """
    wanted = None if labels is None else set(labels)
    for doc in docs:
        for mention in doc.mentions:
            if wanted is not None and mention.label not in wanted:
                continue
            if split_composites and "|" in mention.gold:
                from ..preprocess import split_composite

                ids = [g.strip() for g in mention.gold.split("|")]
                if mention.parts and len(mention.parts) == len(ids):
                    pairs = list(zip(mention.parts, ids))
                else:
                    pairs = split_composite(mention.text, mention.gold)
                for text, gold in pairs:
                    yield Query(mention=text, gold=gold, doc_id=doc.id, label=mention.label)
                continue
            yield Query(mention=mention.text, gold=mention.gold, doc_id=doc.id, label=mention.label)


# ----------------------------------------------------------------------------------------------------
# spaCy Docs




def _make_doc_function(nlp_or_make_doc) -> Callable[[str], Doc]:
    make_doc = getattr(nlp_or_make_doc, "make_doc", None)
    if callable(make_doc):
        return make_doc
    if callable(nlp_or_make_doc):
        return nlp_or_make_doc
    raise SapbertError(
        f"document_to_doc needs a spaCy Language (or a text -> Doc function), got {type(nlp_or_make_doc).__name__}"
    )


def split_at_boundaries(doc: Doc, boundaries: Set[int]) -> Tuple[List[str], List[bool]]:
    """(words, spaces) of `doc` with each token cut at every boundary strictly inside it.

    Pieces of a cut token are joined without spaces, so the text is unchanged; a boundary that falls
    on a token edge or in whitespace changes nothing.
    """
    words: List[str] = []
    spaces: List[bool] = []
    for token in doc:
        start = token.idx
        cuts = sorted(b - start for b in boundaries if start < b < start + len(token.text))
        pieces = [token.text[i:j] for i, j in zip([0] + cuts, cuts + [len(token.text)])]
        words.extend(pieces)
        spaces.extend([False] * (len(pieces) - 1) + [bool(token.whitespace_)])
    return words, spaces


def cut_at_boundaries(doc: Doc, boundaries: Set[int]) -> Doc:
    """`doc`, or a Doc of the same text whose tokens are cut at each of `boundaries` that falls inside one
    ("DMD)or" -> "DMD", ")or"), so that mentions with those offsets are exactly token spans."""
    from spacy.tokens import Doc as SpacyDoc

    edges = {token.idx for token in doc} | {token.idx + len(token.text) for token in doc}
    inside = {b for b in boundaries if b not in edges and any(t.idx < b < t.idx + len(t.text) for t in doc)}
    if not inside:
        return doc
    words, spaces = split_at_boundaries(doc, inside)
    return SpacyDoc(doc.vocab, words=words, spaces=spaces)


def _place_mentions(
    make_doc: Callable[[str], Doc], document: Document, label_map: Optional[Mapping[str, str]] = None
) -> Tuple[Doc, List[Mention]]:
    """(Doc, mentions that could not be placed) for one Document; each ent labelled `label_map`[type] (its type when
    the map has none, or without a map)."""
    label_map = label_map or {}
    from spacy.util import filter_spans

    doc = cut_at_boundaries(make_doc(document.text), {offset for m in document.mentions for offset in (m.start, m.end)})
    spans = []
    dropped: List[Mention] = []
    for mention in document.mentions:
        span = doc.char_span(
            mention.start, mention.end, label=label_map.get(mention.label, mention.label), kb_id=mention.gold,
            alignment_mode="expand",
        )
        if span is None or len(span) == 0:
            dropped.append(mention)
        else:
            spans.append((span, mention))
    kept = filter_spans([span for span, _ in spans])
    kept_keys = {(s.start, s.end, s.label_, s.kb_id_) for s in kept}
    for span, mention in spans:
        key = (span.start, span.end, span.label_, span.kb_id_)
        if key in kept_keys:
            kept_keys.discard(key)  # a second mention on the same tokens is a duplicate: dropped
        else:
            dropped.append(mention)
    doc.ents = kept
    return doc, dropped


def document_to_doc(nlp_or_make_doc, document: Document, label_map: Optional[Mapping[str, str]] = None) -> Doc:
    """A spaCy Doc of `document.text` (made with ``nlp.make_doc``) whose ents are the gold mentions.

    Each ent has label = mention label (mapped by `label_map` where it names the type) and ``kb_id_`` = the raw
    gold id string. Tokens are cut where a
    mention starts or ends inside one, so each ent is the annotated text. Overlapping mentions are
    resolved by keeping the longer one (``spacy.util.filter_spans``); mentions that could not be placed
    are reported in one CorpusWarning and listed in ``doc.user_data["sapbert_unplaced_mentions"]``
    as plain (start, end, text, gold) tuples.
    """
    doc, dropped = _place_mentions(_make_doc_function(nlp_or_make_doc), document, label_map)
    doc.user_data["sapbert_unplaced_mentions"] = [(m.start, m.end, m.text, m.gold) for m in dropped]
    if dropped:
        warnings.warn(
            f"document {document.id}: {len(dropped)} of {len(document.mentions)} gold mention(s) could not be "
            f"placed as entities (overlapping another mention), first {dropped[0].text!r} at "
            f"{dropped[0].start}-{dropped[0].end}",
            CorpusWarning,
            stacklevel=2,
        )
    return doc


def documents_to_docs(nlp_or_make_doc, docs: Iterable[Document], label_map: Optional[Mapping[str, str]] = None) -> List[Doc]:
    """document_to_doc for each Document, with a single CorpusWarning for all unplaced mentions."""
    make_doc = _make_doc_function(nlp_or_make_doc)
    out = []
    total_dropped = 0
    total = 0
    affected: List[str] = []
    for document in docs:
        doc, dropped = _place_mentions(make_doc, document, label_map)
        doc.user_data["sapbert_unplaced_mentions"] = [(m.start, m.end, m.text, m.gold) for m in dropped]
        total += len(document.mentions)
        if dropped:
            total_dropped += len(dropped)
            affected.append(document.id)
        out.append(doc)
    if total_dropped:
        warnings.warn(
            f"{total_dropped} of {total} gold mention(s) in {len(affected)} document(s) could not be placed as "
            f"entities (overlapping another mention); first in document {affected[0]}",
            CorpusWarning,
            stacklevel=2,
        )
    return out
