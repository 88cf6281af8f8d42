"""`--format auto`: which reader fits a file, told from its first lines; the file name only breaks ties.

The first non-blank lines (at most SAMPLE_LINES) are classified one by one (`line_shape`) and the
shape of most lines wins, so one damaged line does not change the answer. JSON and OBO are
told from the start of the file. What fits no vocabulary format -- or fits a corpus, or a UMLS file
other than MRCONSO -- is refused with one line naming the file, what was seen and the formats to pass.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from . import MalformedLine, PathLike, VocabularyFormatError, check_file, line_start
from .dictionary import parse_dictionary_line
from .mesh import split_tsv_line
from .scispacy import is_scispacy_line

SAMPLE_LINES = 20
SAMPLE_BYTES = 256 * 1024

VOCABULARY_FORMATS = ("dictionary", "medic", "umls", "obo", "obo-json", "mesh", "mesh-supp", "scispacy")
CORPUS_FORMATS = ("pubtator", "biosyn", "xlbel")

_CUI = re.compile(r"C[0-9]{7}\Z")
_CUI_LIKE = re.compile(r"C[0-9]+\Z")  # followed by a language, also a made-up CUI such as "C1"
_LAT = re.compile(r"[A-Z]{3}\Z")
_MESH_ID = re.compile(r"[CD][0-9]+\Z")
_INT = re.compile(r"-?[0-9]+\Z")
_STANZA = re.compile(r"\[[A-Za-z]+\]\Z")
_OBO_TAG = re.compile(r"[A-Za-z][A-Za-z0-9_-]*:(\s|\Z)")
_PUBTATOR_TEXT = re.compile(r"[^|\t]+\|[ta]\|")
_RELATION = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_BIOSYN_OFFSETS = re.compile(r"\s*-?[0-9]+\|-?[0-9]+\s*\Z")

# What a winning shape that is not a vocabulary format means, for the refusal message.
_NOT_A_VOCABULARY = {
    "pubtator": "a PubTator corpus (PMID|t|title lines, tab-separated mentions), not a vocabulary",
    "biosyn": "a BioSyn .concept mention file (PMID||start|end||type||mention||id), not a vocabulary",
    "xlbel": "an XL-BEL query file with context (CUI||mention||sentence), not a vocabulary",
    "rrf": "a UMLS RRF file other than MRCONSO (which has 18 columns); MRSTY.RRF goes with --mrsty (the umls reader's mrsty option)",
}
_NOT_A_CORPUS = {
    "umls": "a UMLS MRCONSO vocabulary",
    "rrf": "a UMLS RRF file",
    "obo": "an OBO ontology",
    "mesh": "a MeSH descriptor TSV vocabulary",
    "mesh-supp": "a MeSH supplementary TSV vocabulary",
    "medic": "a MEDIC-style vocabulary (ID|ALT||name|synonym)",
    "dictionary": "an id||name vocabulary whose ids are not UMLS CUIs",
}


class FormatDetectionError(VocabularyFormatError):
    """`auto` could not tell a file's format from its content; the message lists the formats to pass."""


def format_from_name(path: PathLike) -> Optional[str]:
    """The vocabulary format a file name suggests (.obo, .json, MRCONSO*, mesh*supp*.tsv, .tsv), else None."""
    name = Path(path).name.lower()
    if name.endswith(".obo"):
        return "obo"
    if name.endswith(".json"):
        return "obo-json"
    if name.endswith(".jsonl"):
        return "scispacy"
    if name.startswith("mrconso"):
        return "umls"
    if name.endswith(".tsv"):
        return "mesh-supp" if name.startswith("mesh") and "supp" in name else "mesh"
    return None


def corpus_format_from_name(path: PathLike) -> Optional[str]:
    """The corpus format a path suggests (.concept: biosyn; xlbel / xl-bel / xl_bel: xlbel; pubtator), else None."""
    text = str(path).lower()
    if text.endswith(".concept"):
        return "biosyn"
    if any(mark in text for mark in ("xlbel", "xl-bel", "xl_bel")):
        return "xlbel"
    if "pubtator" in Path(path).name.lower():
        return "pubtator"
    return None


def sample_lines(path: Path) -> List[Tuple[int, str]]:
    """(line number, text) of the first non-blank lines; undecodable bytes are replaced (the reader reports them).

    A line longer than SAMPLE_BYTES is cut there (its shape is then usually unknown), and reading stops
    after SAMPLE_LINES non-blank lines or 4 * SAMPLE_BYTES bytes.
    """
    lines: List[Tuple[int, str]] = []
    budget = 4 * SAMPLE_BYTES
    with open(path, "rb") as handle:
        line_no = 0
        while len(lines) < SAMPLE_LINES and budget > 0:
            raw = handle.readline(SAMPLE_BYTES)
            if not raw:
                break
            budget -= len(raw)
            line_no += 1
            if line_no == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise FormatDetectionError(
                    str(path), 1, "starts with a UTF-16 byte-order mark; the readers read UTF-8 (convert it, e.g. iconv -f UTF-16 -t UTF-8)"
                )
            while not raw.endswith(b"\n") and budget > 0:  # the rest of an over-long line is skipped
                rest = handle.readline(SAMPLE_BYTES)
                if not rest:
                    break
                budget -= len(rest)
                if rest.endswith(b"\n"):
                    break
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n").lstrip("\ufeff")
            if text.strip():
                lines.append((line_no, text))
    return lines


def line_shape(line: str) -> Optional[str]:
    """The format one line looks like: a vocabulary format, "pubtator", "biosyn", "xlbel", "rrf" or None."""
    bars = line.split("|")
    if _CUI_LIKE.match(bars[0]) and len(bars) >= 4 and _LAT.match(bars[1]):
        return "umls"  # CUI|LAT|...: an MRCONSO row, maybe a broken one (the reader then says what is wrong)
    if _CUI.match(bars[0]) and len(bars) >= 4 and bars[-1].strip() == "":
        return "rrf"
    if _PUBTATOR_TEXT.match(line):
        return "pubtator"
    tabs = line.split("\t")
    if len(tabs) >= 6 and _INT.match(tabs[1].strip()) and _INT.match(tabs[2].strip()):
        return "pubtator"
    if len(tabs) == 4 and _INT.match(tabs[0].strip()) and _RELATION.match(tabs[1].strip()):
        return "pubtator"  # a relation line
    if len(tabs) >= 4 and _MESH_ID.match(tabs[0].strip()):
        try:
            row = split_tsv_line(line)
        except MalformedLine:
            row = tabs
        if row[0].strip().startswith("D") and len(row) in (4, 5):
            return "mesh"
        if row[0].strip().startswith("C") and len(row) == 4:
            return "mesh-supp"
    doubles = line.split("||")
    if len(doubles) == 5 and _BIOSYN_OFFSETS.match(doubles[1]):
        return "biosyn"
    if len(doubles) == 3 and "<tgt>" in doubles[2]:
        return "xlbel"
    if len(doubles) == 2:
        try:
            parse_dictionary_line(line)
        except MalformedLine:
            return None
        return "medic" if "|" in doubles[0] or "|" in doubles[1] else "dictionary"
    text = line.strip()
    if _STANZA.match(text) or _OBO_TAG.match(text) or text.startswith("!"):
        return "obo"
    return None


def _vote(shapes: List[Optional[str]], lines: List[Tuple[int, str]], name_guess: Optional[str]) -> Tuple[Optional[str], str]:
    """(winning shape or None, what was seen) over the sampled lines' shapes."""
    counts = Counter(shape for shape in shapes if shape)
    first_no, first = lines[0]
    seen = f"line {first_no} is {line_start(first)}"
    if not counts:
        return None, f"no line fits a known format ({seen})"
    best = max(counts.values())
    winners = sorted(shape for shape, count in counts.items() if count == best)
    if best * 2 < len(lines):
        described = ", ".join(f"{shape} {count}" for shape, count in counts.most_common())
        return None, f"only {best} of the first {len(lines)} lines fit one format ({described}; {seen})"
    if len(winners) > 1:
        if name_guess in winners:
            return name_guess, seen
        return None, f"the first lines fit {' and '.join(winners)} equally ({seen})"
    return winners[0], seen


def _refuse(path: Path, what: str, formats: Sequence[str], other_kind: bool = False) -> FormatDetectionError:
    """The error for a file whose format was not told; `other_kind`: it was recognized as another kind of file (a
    corpus given as a vocabulary), so the likely mistake is the file, not a missing --format."""
    option = "--corpus-format" if formats == CORPUS_FORMATS else "--format (--vocab-format)"
    if other_kind:
        wanted = "corpus" if formats == CORPUS_FORMATS else "vocabulary"
        return FormatDetectionError(
            str(path), None, f"{what}: give a {wanted} file here (if it is one after all, pass {option}, one of: {', '.join(formats)})"
        )
    return FormatDetectionError(
        str(path), None, f"cannot tell the format: {what}; pass it with {option}, one of: {', '.join(formats)}"
    )


def _json_format(path: Path, lines: List[Tuple[int, str]]) -> Optional[str]:
    """"obo-json" for a JSON array of objects or an object with "graphs"; "scispacy" for JSON lines whose
    first lines are scispaCy KB records; "" for other JSON; None for no JSON."""
    head = "".join(text.strip() for _, text in lines[:SAMPLE_LINES])
    if head.startswith("{"):
        if '"graphs"' in "".join(text for _, text in lines):
            return "obo-json"
        records = sum(is_scispacy_line(text) for _, text in lines)
        return "scispacy" if records * 2 >= len(lines) else ""
    if head.startswith("[") and not _STANZA.match(lines[0][1].strip()):
        return "obo-json" if head[1:2] in ("{", "]") else ""
    return None


def _sample(path: PathLike, guess_from_name: Callable[[Path], Optional[str]], formats: Sequence[str]):
    """(path, its first non-blank lines, the format its name suggests); a file with no line and an
    uninformative name is refused."""
    path = check_file(path)
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # no format option helps here: the file must be converted
        raise FormatDetectionError(str(path), None, "UTF-16 text; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)")
    if b"\x00" in head:
        raise FormatDetectionError(str(path), None, "a binary file (it holds NUL bytes), not a text vocabulary or corpus")
    lines = sample_lines(path)
    name_guess = guess_from_name(path)
    if not lines and not name_guess:
        raise _refuse(path, "the file has no non-blank line", formats)
    return path, lines, name_guess


def detect_format(path: PathLike) -> str:
    """The vocabulary format of a file, told from its content (see the module docstring); FormatDetectionError if unclear."""
    path, lines, name_guess = _sample(path, format_from_name, VOCABULARY_FORMATS)
    if not lines:
        return name_guess
    json_format = _json_format(path, lines)
    if json_format:
        return json_format
    if json_format == "":
        what = (
            "JSON that is neither an array of terms, an OBO-graph object with 'graphs', nor scispaCy KB lines "
            f"with 'concept_id' (line 1 is {line_start(lines[0][1])})"
        )
        raise _refuse(path, what, VOCABULARY_FORMATS)
    first = lines[0][1].strip()
    if first.startswith("format-version:") or _STANZA.match(first):
        return "obo"
    shapes = [line_shape(text) for _, text in lines]
    # medic and dictionary are one reader: count them together, name it medic if a line has ALT ids or synonyms
    winner, seen = _vote(["dictionary" if shape == "medic" else shape for shape in shapes], lines, name_guess)
    if winner is None:
        raise _refuse(path, seen, VOCABULARY_FORMATS)
    if winner == "dictionary" and "medic" in shapes:
        return "medic"
    if winner in _NOT_A_VOCABULARY:
        raise _refuse(path, f"it looks like {_NOT_A_VOCABULARY[winner]} ({seen})", VOCABULARY_FORMATS, other_kind=True)
    return winner


def _corpus_shape(line: str) -> Optional[str]:
    """line_shape, with a CUI||mention line (the shape of a dictionary line) as XL-BEL v0.0."""
    shape = line_shape(line)
    if shape in ("dictionary", "medic") and _CUI.match(line.split("||", 1)[0].strip()):
        return "xlbel"
    return shape


def detect_corpus_format(path: PathLike) -> str:
    """The corpus format of a file (pubtator, biosyn or xlbel), told from its content; the path breaks ties."""
    path, lines, name_guess = _sample(path, corpus_format_from_name, CORPUS_FORMATS)
    if not lines:
        return name_guess
    if _json_format(path, lines) is not None:
        raise _refuse(path, "it is JSON, which no corpus reader reads", CORPUS_FORMATS)
    shapes = [_corpus_shape(text) for _, text in lines]
    winner, seen = _vote(shapes, lines, name_guess)
    if winner is None:
        raise _refuse(path, seen, CORPUS_FORMATS)
    if winner not in CORPUS_FORMATS:
        raise _refuse(path, f"it looks like {_NOT_A_CORPUS.get(winner, winner)}, not a corpus ({seen})", CORPUS_FORMATS, other_kind=True)
    return winner
