"""Abbreviation detection after Schwartz & Hearst (2003), "A simple algorithm for identifying
abbreviation definitions in biomedical text" (PSB 2003), written from the paper's description.

Definitions are found at parentheses, in two patterns:

- ``long form (SF)``: the text in parentheses (up to a first ";" or ",": "(WD; MIM 277900)") is the
  short-form candidate and the words before the parenthesis, in the same sentence, are the long-form
  candidate;
- ``SF (long form)``: when the first pattern gives nothing, the single word before the parenthesis is
  the short-form candidate and the text in parentheses the long-form candidate.

A short-form candidate is valid when it has 2 to 10 characters, at most two words, at least one
letter, and starts with a letter or digit. The long-form candidate is limited to
``min(|SF| + 5, 2 * |SF|)`` words (|SF| = characters of the short form). The long form is then found by
walking both strings from the right: each letter or digit of the short form (others are skipped) must
be matched, case-insensitively, by a character further left in the long-form candidate, and the match
of the short form's first character must begin a word. The long form runs from the beginning of that
word to the end of the candidate; it is rejected when it is not longer than the short form, has too
many words, or contains the short form as a word.

One rule is added to the paper's, because its shortest match can drop a leading word that changes the
meaning ("multiple myeloma (MM)" gave "myeloma", "attenuated adenomatous polyposis coli (AAPC)" gave
"adenomatous polyposis coli"): when the last words of the candidate have first letters (or digits)
that spell the short form's letters and digits exactly, those words are the long form. Such a form
always satisfies the paper's conditions too, so the rule only ever lengthens a long form.

A compound short form also defines its parts, which texts go on to use alone: "hyperparathyroidism-jaw
tumor syndrome (HPT-JT)" defines HPT and JT too ("primary HPT"), and "adrenoleukodystrophy/
adrenomyeloneuropathy (ALD/AMN)" ALD and AMN. That holds only when the short form joins its parts with
one kind of separator ("-" or "/"), the long form splits into as many parts at the same separator ("/"
also at " or ", " and ", " plus "), and each short-form part is a short-form candidate whose long form is
the whole matching long-form part. A part spelled the same in both ("AVP" in "AVP-neurophysin II
(AVP-NPII)") defines nothing. If one part fails, no part is defined.

Further rules, each from a wrong definition seen in NCBI-disease or BC5CDR: the long-form window stops after a
parenthesis left open or closed from outside it, and after a parenthetical that is itself a definition or a list
("COMP (EDM1, McKusick 132400) and COL9A2 genes (EDM2)"), while one inside a word ("poly(ADP-ribose) polymerase")
or a descriptive one ("(insulin-dependent) diabetes mellitus") stays in it; parentheses that a word continues on
both sides ("R-(alpha)-methylhistamine") define nothing; a long form never begins with a function word ("and",
"the", ...) nor ends with a comma; in ``SF (long form)`` the short form has a capital, the long form is the
parenthesis up to its first ";" or ", " when that matches (else the whole of it), and is no abbreviation itself
("C2 (C2D)").

``find_abbreviations`` is a pure function on a string. ``AbbreviationDetector`` (factory
"sapbert_abbreviations") runs it on ``doc.text`` and provides:

- ``doc._.abbreviations``: list of (short-form Span, long-form Span), one per definition;
- ``span._.long_form``: the span's text with every whole-word short form defined anywhere in its doc
  (any occurrence, not only the defining one; a plural "ADs" too) replaced by its long form ("HPT" and "primary
  HPT" both written out), by the definition nearest before the span where a short form has two, and a definition
  inside the span without its parenthesis; else None -- the linker embeds it instead of the span's text, as
  ``evaluate`` does.

Only plain values are stored on the Doc (``doc._.sapbert_abbreviation_offsets``: a list of
(short_start, short_end, long_start, long_end) character offsets), so Docs with the extension set
serialize with DocBin; the Span-valued attributes above are getters computed from it.
"""
from __future__ import annotations

import bisect
import functools
import re
import weakref
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

__all__ = [
    "Abbreviation",
    "AbbreviationDetector",
    "compound_parts",
    "expand_abbreviations",
    "find_abbreviations",
    "install_extensions",
    "long_forms",
    "make_abbreviation_detector",
]

MIN_SHORT_LENGTH = 2
MAX_SHORT_LENGTH = 10
MAX_SHORT_WORDS = 2
MAX_LOWERCASE_SHORT_LENGTH = 6  # a longer candidate without capitals or digits is a word

# lower-case words that never begin a long form: a match that starts with one spans a phrase, not a name
FUNCTION_WORDS = frozenset(("and", "or", "of", "the", "in", "with", "for", "to", "by", "from", "on", "at", "as", "that", "which"))
_SENTENCE_END = re.compile(r"[.!?;](?=\s)")
# a comma before a function word other than "and"/"or" (which close a list: "Wilms tumor, aniridia, ..., and mental
# retardation (WAGR)") starts a clause of its own: a long form does not reach back over it
_CLAUSE_START = re.compile(r",\s+(?=(?:%s)\b)" % "|".join(sorted(FUNCTION_WORDS - {"and", "or"})), re.IGNORECASE)


class Abbreviation(NamedTuple):
    """One abbreviation definition with character offsets (end exclusive) into the searched text."""

    short: str
    long: str
    short_start: int
    short_end: int
    long_start: int
    long_end: int


def is_short_form_candidate(candidate: str) -> bool:
    """2-10 characters, at most two words, at least one letter, first character a letter or digit; without a capital
    or a digit at most MAX_LOWERCASE_SHORT_LENGTH characters ("aku", "dex", "atorva"; "rapamycin" is a word)."""
    return (
        MIN_SHORT_LENGTH <= len(candidate) <= MAX_SHORT_LENGTH
        and len(candidate.split()) <= MAX_SHORT_WORDS
        and candidate[0].isalnum()
        and any(ch.isalpha() for ch in candidate)
        and (len(candidate) <= MAX_LOWERCASE_SHORT_LENGTH or any(ch.isupper() or ch.isdigit() for ch in candidate))
    )


def max_long_form_words(short: str) -> int:
    """The long form of `short` has at most min(|SF| + 5, 2 * |SF|) words."""
    return min(len(short) + 5, 2 * len(short))


def best_long_form_start(short: str, candidate: str) -> Optional[int]:
    """Start offset in `candidate` of the long form of `short`, or None when the characters do not match.

    Walks both strings from the right; every letter/digit of `short` must be found further left in
    `candidate` (case-insensitive) and the match of the first character must start a word.
    """
    s = len(short) - 1
    c = len(candidate) - 1
    while s >= 0:
        char = short[s].lower()
        if not char.isalnum():
            s -= 1
            continue
        while c >= 0 and (
            candidate[c].lower() != char or (s == 0 and c > 0 and candidate[c - 1].isalnum())
        ):
            c -= 1
        if c < 0:
            return None
        c -= 1
        s -= 1
    # the long form starts at the beginning of the word holding the first character's match
    start = c + 1
    while start > 0 and not candidate[start - 1].isspace():
        start -= 1
    return start


def initials_long_form_start(short: str, candidate: str) -> Optional[int]:
    """Start offset in `candidate` of its last words whose first letters or digits spell those of
    `short` (case-insensitive), or None: "multiple myeloma" for "MM", "type 2 diabetes" for "T2D"."""
    letters = [ch.lower() for ch in short if ch.isalnum()]
    initials: List[str] = []
    for word in reversed(list(re.finditer(r"\S+", candidate))):
        first = next((ch.lower() for ch in word.group() if ch.isalnum()), None)
        if first is None:
            continue
        initials.insert(0, first)
        if len(initials) == len(letters):
            return word.start() if initials == letters else None
    return None


def _contains_word(text: str, word: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(word.lower()) + r"(?!\w)", text.lower()) is not None


def _long_form(short: str, candidate: str) -> Optional[Tuple[int, int]]:
    """(start, end) in `candidate` of a valid long form of `short`, or None; a comma, semicolon or colon that ends the
    candidate is left out ("puromycin aminonucleoside, (PAN, 7.5 mg/kg)")."""
    end = len(candidate.rstrip().rstrip(",;:").rstrip())
    candidate = candidate[:end]
    start = initials_long_form_start(short, candidate)
    if start is None:
        start = best_long_form_start(short, candidate)
    if start is None:
        return None
    long = candidate[start:end]
    if len(long) <= len(short) or len(long.split()) > max_long_form_words(short):
        return None
    if long.split()[0] in FUNCTION_WORDS:  # "AMN (and its companion, ...)", "Taxol (the maximum tolerated dose of ...)"
        return None
    if _contains_word(long, short):
        return None
    return start, end


def _closing_parenthesis(text: str, open_at: int) -> Optional[int]:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
        elif text[i] == "\n" and i > open_at:
            return None
    return None


@functools.lru_cache(maxsize=8)
def _sentence_ends(text: str) -> List[int]:
    """Where each sentence of `text` ends (after its punctuation), found once per text: each parenthesis looks up the
    last one before it (a scan from the start for each made a long document's detection quadratic)."""
    return [match.end() for match in _SENTENCE_END.finditer(text)]


def _window_before(text: str, end: int, max_words: int) -> Tuple[int, str]:
    """(offset, text) of at most `max_words` words before `end`, not reaching back over a sentence end or a
    parenthesis that closes off what came before (`_parenthesis_start`)."""
    ends = _sentence_ends(text)
    before = bisect.bisect_left(ends, end)  # the sentence ends that text[:end] shows: their lookahead lies before `end`
    sentence_start = ends[before - 1] if before else 0
    line_start = text.rfind("\n", 0, end) + 1
    begin = max(sentence_start, line_start)
    clauses = list(_CLAUSE_START.finditer(text, begin, end))  # "Pendred, the disease gene (PDS)": a new clause
    begin = clauses[-1].end() if clauses else begin
    begin = _parenthesis_start(text, begin, end)
    words = list(re.finditer(r"\S+", text[begin:end]))
    if not words:
        return end, ""
    first = words[max(0, len(words) - max_words)]
    offset = _parenthesis_start(text, begin + first.start(), end)  # cut by the word limit inside one: after it
    words = list(re.finditer(r"\S+", text[offset:end]))
    if not words:
        return end, ""
    offset += words[0].start()
    return offset, text[offset:end]


def find_abbreviations(text: str) -> List[Abbreviation]:
    """All abbreviation definitions in `text`, in order of their parentheses.

    >>> [(a.short, a.long) for a in find_abbreviations("causing Wilson disease (WD).")]
    [('WD', 'Wilson disease')]
    """
    found: List[Abbreviation] = []
    for open_match in re.finditer(r"\(", text):
        open_at = open_match.start()
        close_at = _closing_parenthesis(text, open_at)
        if close_at is None:
            continue
        inner_start, inner_end = open_at + 1, close_at
        if _inside_a_word(text, open_at, close_at):
            continue
        abbreviation = _long_form_before(text, open_at, inner_start, inner_end)
        if abbreviation is None:
            abbreviation = _short_form_before(text, open_at, inner_start, inner_end)
        if abbreviation is not None:
            found.append(abbreviation)
            found.extend(compound_parts(abbreviation))
    return found


def _parenthesis_start(text: str, begin: int, end: int) -> int:
    """Where a long-form window within text[begin:end] may start: after a parenthesis left open or closed from
    outside it ("(tryptophan (TRP)", "criteria) was 15% (CR)"), and after a parenthetical of its own that is a
    definition or a list ("COMP (EDM1, McKusick 132400) and COL9A2 genes (EDM2)", "(T0) and after 30 minutes
    (T30)"). A parenthesis inside a word ("poly(ADP-ribose) polymerase") or a descriptive one ("(insulin-dependent)
    diabetes mellitus") stays inside the window."""
    closes: List[int] = []  # the open ")" found walking left, innermost last
    for i in range(end - 1, begin - 1, -1):
        if text[i] == ")":
            closes.append(i)
        elif text[i] == "(":
            if not closes:
                return i + 1  # opened before the long form and never closed
            close_at = closes.pop()
            inner = text[i + 1:close_at].strip()
            if not closes and not _inside_a_word(text, i, close_at, either_side=True) and (
                ";" in inner or ", " in inner or is_short_form_candidate(inner)
            ):
                return close_at + 1
    return closes[0] + 1 if closes else begin


def _inside_a_word(text: str, open_at: int, close_at: int, either_side: bool = False) -> bool:
    """True for parentheses that a word continues on both sides of, as in a chemical name
    ("R-(alpha)-methylhistamine"): no definition; with `either_side`, on one side ("(RS)-1-aminoindan")."""
    glued_before = open_at > 0 and not text[open_at - 1].isspace() and text[open_at - 1] not in "([{"
    after = text[close_at + 1:close_at + 2]
    glued_after = after.isalnum() or after == "-"
    return (glued_before or glued_after) if either_side else (glued_before and glued_after)


# where a long form splits for each separator of a compound short form
_LONG_FORM_SPLITS = {"-": re.compile(r"-"), "/": re.compile(r"\s*/\s*|\s+(?:or|and|plus)\s+")}


def _parts(text: str, separator: re.Pattern) -> List[Tuple[int, int]]:
    """(start, end) of the stripped pieces of `text` between the matches of `separator`."""
    bounds, start = [], 0
    for match in separator.finditer(text):
        bounds.append(_strip_span(text, start, match.start()))
        start = match.end()
    bounds.append(_strip_span(text, start, len(text)))
    return bounds


def compound_parts(abbreviation: Abbreviation) -> List[Abbreviation]:
    """The definitions of the parts of a compound short form (module docstring), with offsets into the
    same text; [] when the short form is no compound or a part does not match its long-form part.

    >>> [(a.short, a.long) for a in compound_parts(find_abbreviations("in adrenoleukodystrophy/adrenomyeloneuropathy (ALD/AMN)")[0])]
    [('ALD', 'adrenoleukodystrophy'), ('AMN', 'adrenomyeloneuropathy')]
    """
    separators = set(re.findall(r"[-/]", abbreviation.short))
    if len(separators) != 1:
        return []
    separator = separators.pop()
    short_parts = _parts(abbreviation.short, re.compile(re.escape(separator)))
    long_parts = _parts(abbreviation.long, _LONG_FORM_SPLITS[separator])
    if len(long_parts) != len(short_parts):
        return []
    parts = []
    for (short_start, short_end), (long_start, long_end) in zip(short_parts, long_parts):
        short, long = abbreviation.short[short_start:short_end], abbreviation.long[long_start:long_end]
        if not is_short_form_candidate(short):
            return []
        if short.lower() == long.lower():
            continue
        bounds = _long_form(short, long)
        if bounds is None or bounds[0] != 0:
            return []
        parts.append(Abbreviation(
            short, long, abbreviation.short_start + short_start, abbreviation.short_start + short_end,
            abbreviation.long_start + long_start, abbreviation.long_start + long_end,
        ))
    return parts


def _strip_span(text: str, start: int, end: int) -> Tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _long_form_before(text: str, open_at: int, inner_start: int, inner_end: int) -> Optional[Abbreviation]:
    """`long form (SF)`."""
    cut = inner_end
    for separator in (";", ","):
        pos = text.find(separator, inner_start, cut)
        if pos != -1:
            cut = pos
    short_start, short_end = _strip_span(text, inner_start, cut)
    short = text[short_start:short_end]
    if not short or not is_short_form_candidate(short):
        return None
    offset, window = _window_before(text, open_at, max_long_form_words(short))
    bounds = _long_form(short, window)
    if bounds is None:
        return None
    long_start, long_end = offset + bounds[0], offset + bounds[1]
    return Abbreviation(short, text[long_start:long_end], short_start, short_end, long_start, long_end)


def _short_form_before(text: str, open_at: int, inner_start: int, inner_end: int) -> Optional[Abbreviation]:
    """`SF (long form)`."""
    before = text[:open_at].rstrip()
    if not before or before[-1] in ")]}":
        return None
    short_end = len(before)
    short_start = short_end
    while short_start > 0 and not before[short_start - 1].isspace():
        short_start -= 1
    short = text[short_start:short_end]
    if not is_short_form_candidate(short) or len(short.split()) != 1 or not any(ch.isupper() for ch in short):
        return None  # a word without a capital before a parenthesis is a word ("seen (standardized incidence ratio 35)")
    first_item = inner_end
    for separator in (";", ", "):  # "(3,4-methylenedioxymethamphetamine, ecstasy)" (a comma inside a word stays)
        pos = text.find(separator, inner_start, first_item)
        if pos != -1:
            first_item = pos
    # the parenthesis up to its first ";" or ", ", else the whole of it ("WAGR (Wilms tumor, aniridia, ...)")
    for cut in dict.fromkeys((first_item, inner_end)):
        long_start, long_end = _strip_span(text, inner_start, cut)
        candidate = text[long_start:long_end]
        if not candidate or len(candidate.split()) > max_long_form_words(short) or _looks_like_a_short_form(candidate):
            continue
        bounds = _long_form(short, candidate)
        if bounds is not None and bounds[0] == 0:  # the whole candidate must be the long form
            return Abbreviation(short, candidate, short_start, short_end, long_start, long_end)
    return None


def _looks_like_a_short_form(candidate: str) -> bool:
    """Another abbreviation, or a word or two that begin with one, not a long form: its first part (up to a space or
    hyphen) has two or more capitals ("C2 (C2D)", "occult HBV (HBsAg-negative)"); a longer phrase may begin with one
    ("PSF (PTB associated splicing factor)")."""
    first = re.split(r"[\s-]", candidate, maxsplit=1)[0]
    return sum(ch.isupper() for ch in first) >= 2 and len(candidate.split()) <= 2


def long_forms(abbreviations: Iterable[Abbreviation], at: Optional[int] = None, end: Optional[int] = None) -> Dict[str, str]:
    """Short form -> long form. For a mention at offsets [`at`, `end`): of a short form defined twice, the definition
    nearest before it (one that starts inside the mention counts as before), else the first after ("diabetes mellitus
    (DM) ... dystrophia myotonica (DM)": each DM its own). `at` None: the first definition."""
    out: Dict[str, str] = {}
    last = at if end is None or at is None else max(at, end - 1)
    for abbreviation in sorted(abbreviations, key=_definition_start):
        if at is None:
            out.setdefault(abbreviation.short, abbreviation.long)
        elif abbreviation.short not in out or _definition_start(abbreviation) <= last:
            out[abbreviation.short] = abbreviation.long
    return out


def _definition_start(abbreviation: Abbreviation) -> int:
    return min(abbreviation.short_start, abbreviation.long_start)


def expand_abbreviations(
    text: str, mention: str, abbreviations: Optional[Sequence[Abbreviation]] = None, at: Optional[int] = None
) -> str:
    """`mention` with each whole-word short form defined in `text` replaced by its long form (`replace_short_forms`);
    `at`: where the mention starts in `text`, which picks a short form's definition when it has several.

    `abbreviations` (from ``find_abbreviations(text)``) can be given to avoid searching `text` again.

    >>> expand_abbreviations("Wilson disease (WD) is rare.", "WD gene")
    'Wilson disease gene'
    """
    found = find_abbreviations(text) if abbreviations is None else abbreviations
    return replace_short_forms(mention, long_forms(found, at, None if at is None else at + len(mention)))


def replace_short_forms(mention: str, mapping: Mapping[str, str]) -> str:
    """`mention` with each whole-word short form of `mapping` (short form -> long form) replaced by its long form,
    a plural too ("ADs"); a definition inside the mention loses its parenthesis ("von Hippel-Lindau (VHL) disease"
    -> "von Hippel-Lindau disease", not "von Hippel-Lindau (von Hippel-Lindau) disease")."""
    if not mapping:
        return mention
    if "(" in mention:
        for short, long in mapping.items():
            if long in mention:  # "LF (SF)", "LF (SF; EC 1.1.1.49)" -> "LF"; "SF (LF)" -> "LF"
                mention = re.sub(re.escape(long) + r"\s*\(\s*" + re.escape(short) + r"\s*(?:[;,][^()]*)?\)", lambda _: long, mention)
                mention = re.sub(r"(?<!\w)" + re.escape(short) + r"\s*\(\s*" + re.escape(long) + r"\s*\)", lambda _: long, mention)
    return _short_form_pattern(tuple(sorted(mapping, key=len, reverse=True))).sub(lambda match: mapping[match.group(1)], mention)


@functools.lru_cache(maxsize=256)
def _short_form_pattern(short_forms: Tuple[str, ...]) -> re.Pattern:
    """Any of `short_forms` as a whole word, the longest first, as group 1, with the plural "s" of one that ends in a
    capital (a doc's short forms, reused for each of its entities)."""
    return re.compile(r"(?<!\w)(" + "|".join(re.escape(short) for short in short_forms) + r")(?:(?<=[A-Z])s)?(?!\w)")


# ---------------------------------------------------------------------------------------------------
# spaCy

OFFSETS_ATTR = "sapbert_abbreviation_offsets"


def _offsets(doc: Doc) -> List[Tuple[int, int, int, int]]:
    value = doc._.get(OFFSETS_ATTR)
    return [tuple(item) for item in value] if value else []


def _doc_abbreviations(doc: Doc) -> List[Tuple[Span, Span]]:
    pairs = []
    for short_start, short_end, long_start, long_end in _offsets(doc):
        short = doc.char_span(short_start, short_end, alignment_mode="expand")
        long = doc.char_span(long_start, long_end, alignment_mode="expand")
        if short is not None and long is not None and len(short) and len(long):
            pairs.append((short, long))
    return pairs


# Each doc's definitions as Abbreviations, with the offsets they were made from: a linker asks once per entity, and
# doc.text is built anew each time it is read (a long document with thousands of entities took quadratic time).
_ABBREVIATION_LISTS: "weakref.WeakKeyDictionary[Doc, Tuple[list, List[Abbreviation]]]" = weakref.WeakKeyDictionary()


def _doc_abbreviation_list(doc: Doc) -> List[Abbreviation]:
    offsets = _offsets(doc)
    if not offsets:
        return []
    cached = _ABBREVIATION_LISTS.get(doc)
    if cached is not None and cached[0] == offsets:
        return cached[1]
    text = doc.text
    found = [Abbreviation(text[ss:se], text[ls:le], ss, se, ls, le) for ss, se, ls, le in offsets]
    _ABBREVIATION_LISTS[doc] = (offsets, found)
    return found


def _span_long_form(span: Span) -> Optional[str]:
    """The span's text with the short forms defined in its doc written out ("primary HPT" -> "primary
    hyperparathyroidism"), as `expand_abbreviations` gives `evaluate` its queries; None when it holds none."""
    expanded = replace_short_forms(span.text, long_forms(_doc_abbreviation_list(span.doc), span.start_char, span.end_char))
    return expanded if expanded != span.text else None


def long_form_of(span: Span) -> Optional[str]:
    """What a linker searches for `span` in place of its text, or None: the long form this module's detector gives
    when it ran on the span's doc, else `span._.long_form` as another detector set it (scispacy's: a Span). Read
    from the detector's offsets, not the extension, which scispacy's detector re-registers as a plain attribute."""
    if Doc.has_extension(OFFSETS_ATTR) and span.doc._.get(OFFSETS_ATTR) is not None:
        return _span_long_form(span)
    long_form = span._.get("long_form") if Span.has_extension("long_form") else None
    if isinstance(long_form, Span):
        long_form = long_form.text
    return long_form or None


def install_extensions() -> None:
    """Register the Doc/Span extensions (once; existing ones are left alone)."""
    if not Doc.has_extension(OFFSETS_ATTR):
        Doc.set_extension(OFFSETS_ATTR, default=None)
    if not Doc.has_extension("abbreviations"):
        Doc.set_extension("abbreviations", getter=_doc_abbreviations)
    if not Span.has_extension("long_form"):
        Span.set_extension("long_form", getter=_span_long_form)


def short_form_labels(doc: Doc) -> Tuple[Dict[str, str], Set[str]]:
    """What the entities say of each short form defined in `doc`: the label of the entity whose whole long form
    lies inside it and names it (`_names_the_entity`; the first definition that has one), and the short forms whose
    long forms overlap no entity at all. A long form only partly inside an entity says neither: "Wiskott-Aldrich
    syndrome protein (WASP)" names a protein, though "Wiskott-Aldrich syndrome" is a disease."""
    labels: Dict[str, str] = {}
    outside: Set[str] = set()
    text = doc.text
    for short_start, short_end, long_start, long_end in _offsets(doc):
        short = text[short_start:short_end]
        inside = [e for e in doc.ents if e.start_char <= long_start and long_end <= e.end_char]
        named = [e for e in inside if _names_the_entity(text, e, short, long_start, long_end)]
        if named:
            labels.setdefault(short, named[0].label_)
        elif not any(e.start_char < long_end and long_start < e.end_char for e in doc.ents):
            outside.add(short)
    return labels, outside - set(labels)


# words after which what follows in an entity is no longer its head: "deficiency of aspartoacylase (ASPA)"
HEAD_BREAKERS = frozenset(("of", "with", "by", "in", "to", "for", "from", "on", "at", "after", "against"))


def _names_the_entity(text: str, entity: Span, short: str, long_start: int, long_end: int) -> bool:
    """Whether a long form inside `entity` is the thing the entity names, so that its short form takes the entity's
    label: it ends the entity (or only its own "(SF)" follows) and no preposition comes before it there. A gene or an
    agent inside a disease phrase is not: "glucose-6-phosphate dehydrogenase (G6PD) deficiency", "deficiency of
    aspartoacylase (ASPA)", "infection by hepatitis B virus (HBV)"."""
    after = text[long_end:entity.end_char].strip()
    if after and after not in (f"({short})", f"[{short}]"):
        return False
    before = text[entity.start_char:long_start].lower().split()
    return not HEAD_BREAKERS.intersection(before)


def entities_with_short_forms(doc: Doc) -> List[Span]:
    """`doc.ents` with short forms following their long forms: every whole-word occurrence of a short
    form whose long form names an entity (`_names_the_entity`) becomes an entity with that entity's label (where it
    aligns to tokens and overlaps no entity), and an entity that is exactly a short form whose long form
    overlaps no entity is dropped.

    A NER that finds "atrial fibrillation" often misses the "AF" defined beside it and used later; and
    it takes "HT" for a disease even where the text defined it as "hormone therapy (HT)".
    """
    labels, outside = short_form_labels(doc)
    ents = [e for e in doc.ents if e.text not in outside]
    taken = [(e.start_char, e.end_char) for e in ents]
    for short, label in labels.items():
        for match in re.finditer(r"(?<!\w)" + re.escape(short) + r"(?!\w)", doc.text):
            start, end = match.span()
            span = doc.char_span(start, end, label=label)
            if span is None or any(a < end and start < b for a, b in taken):
                continue
            taken.append((start, end))
            ents.append(span)
    return sorted(ents, key=lambda span: span.start)


class AbbreviationDetector:
    """Pipeline component: finds Schwartz-Hearst abbreviation definitions in ``doc.text``; with
    `label_short_forms`, makes the short forms in ``doc.ents`` follow their long forms (see
    ``entities_with_short_forms``)."""

    def __init__(self, nlp: Optional[Language] = None, name: str = "sapbert_abbreviations", label_short_forms: bool = False):
        self.name = name
        self.label_short_forms = label_short_forms
        install_extensions()

    def __call__(self, doc: Doc) -> Doc:
        doc._.set(
            OFFSETS_ATTR,
            [(a.short_start, a.short_end, a.long_start, a.long_end) for a in find_abbreviations(doc.text)],
        )
        if self.label_short_forms:
            kept = entities_with_short_forms(doc)
            spans = {(ent.start, ent.end, ent.label) for ent in kept}
            covered = {i for ent in kept for i in range(ent.start, ent.end)}
            # the tokens of a dropped entity become O, except those a new short-form entity took ("HT-B" dropped, "HT" kept)
            outside = [doc[i:i + 1] for ent in doc.ents if (ent.start, ent.end, ent.label) not in spans
                       for i in range(ent.start, ent.end) if i not in covered]
            doc.set_ents(kept, outside=outside, default="unmodified")  # missing and blocked tokens stay so
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 128) -> Iterable[Doc]:
        for doc in docs:
            yield self(doc)


@Language.factory("sapbert_abbreviations", default_config={"label_short_forms": False})
def make_abbreviation_detector(nlp: Language, name: str, label_short_forms: bool) -> AbbreviationDetector:
    """Factory of the "sapbert_abbreviations" component. `label_short_forms`: put it after the NER to
    label every occurrence of a short form whose long form the NER found, with the same label, and to
    unlabel the short forms whose long forms it did not find."""
    return AbbreviationDetector(nlp, name, label_short_forms)
