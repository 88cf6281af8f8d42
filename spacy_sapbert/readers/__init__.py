"""Vocabulary readers: one small module per file format, each a generator of `Concept` records.

Every reader reads UTF-8, takes `strict` (True: a malformed line raises `VocabularyFormatError` naming
file and line; False: the line is skipped, and one `VocabularyWarning` at the end says how many were
skipped) and keeps the parsing of one line in a small pure function.

The line-reading and error-policy helpers shared by the format modules are defined here, *before* the
format modules are imported, so that `from . import MalformedLine, ...` inside them always works
(Python runs this file completely before any `spacy_sapbert.readers.<module>` is imported).
"""
from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import SapbertError, VocabularyFormatError
from ..kb import Concept

PathLike = Union[str, Path]


class MalformedLine(ValueError):
    """Raised by the pure per-line parsers; the reader adds the file name and line number."""


class VocabularyNotFoundError(VocabularyFormatError, FileNotFoundError):
    """The vocabulary file does not exist (catchable as FileNotFoundError and as SapbertError)."""


class VocabularyWarning(UserWarning):
    """Lines of a vocabulary file were skipped because they were malformed (strict=False)."""


def check_file(path: PathLike) -> Path:
    """`path` as a Path; raise VocabularyNotFoundError now (not at the first `next()`) if it is missing."""
    path = Path(path)
    if not path.exists():
        raise VocabularyNotFoundError(str(path), None, "file not found")
    if not path.is_file():
        raise VocabularyNotFoundError(str(path), None, "not a file")
    return path


def line_start(line: Union[str, bytes], width: int = 60) -> str:
    """The beginning of a line for an error message (repr, shortened)."""
    return repr(line[:width]) + ("..." if len(line) > width else "")


class LinePolicy:
    """What to do with a bad line: raise (strict) or count it and warn once at the end (not strict)."""

    warning = VocabularyWarning  # the category of the end-of-file warning

    def __init__(self, path: PathLike, strict: bool = True):
        self.path = str(path)
        self.strict = strict
        self.skipped = 0
        self.first: Optional[Tuple[Optional[int], str]] = None

    def reject(self, line_no: Optional[int], problem: str, line: Union[str, bytes, None] = None) -> None:
        """Raise VocabularyFormatError (strict) or remember the bad line (not strict)."""
        message = problem if line is None else f"{problem}: {line_start(line)}"
        if self.strict:
            raise VocabularyFormatError(self.path, line_no, message)
        self.skipped += 1
        if self.first is None:
            self.first = (line_no, problem)

    def finish(self, what: str = "line", stacklevel: int = 3) -> None:
        """Warn once how many lines (or entries) were skipped, if any."""
        if not self.skipped or self.first is None:
            return
        first_no, first_problem = self.first
        first = f"first at line {first_no}" if first_no is not None else "first"
        warnings.warn(
            f"{self.path}: skipped {self.skipped} malformed {what}(s); {first}: {first_problem}",
            self.warning,
            stacklevel=stacklevel,
        )


def numbered_lines(path: Path, policy: LinePolicy) -> Iterator[Tuple[int, str]]:
    """(line number, text without line end) for each line of a UTF-8 file.

    Read in binary and decoded line by line so an invalid byte is reported with its line number
    (and, when not strict, only that line is skipped). Lines end at "\n" ("\r\n" is accepted); a UTF-8
    byte-order mark at the start of a line is dropped. A carriage return inside a line makes it a bad line: a file
    with old Mac (CR) line ends would otherwise be read as one line.
    """
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, 1):
            raw = raw.rstrip(b"\r\n")
            if b"\r" in raw:
                policy.reject(line_no, "a carriage return (\\r) inside the line: the file has CR line ends, or a stray \\r; give it \\n line ends", raw)
                continue
            try:
                text = raw.decode("utf-8", errors="strict")
            except UnicodeDecodeError as err:
                policy.reject(line_no, f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})", raw)
                continue
            if text.startswith("\ufeff"):  # a byte-order mark, also where files were concatenated
                text = text[1:]
            yield line_no, text


# The format modules import the helpers above, so they are imported only now.
from .dictionary import read_dictionary, read_spell_check  # noqa: E402
from .mesh import read_mesh_descriptors, read_mesh_supplementary  # noqa: E402
from .obo import read_obo, read_obo_graph_json  # noqa: E402
from .umls import read_mrconso, read_mrdef, read_mrrel_tradenames, read_mrsty  # noqa: E402
from .scispacy import read_scispacy_kb  # noqa: E402
from .detect import (  # noqa: E402
    VOCABULARY_FORMATS,
    FormatDetectionError,
    detect_corpus_format,
    detect_format,
    format_from_name,
)

READERS: Dict[str, Callable[..., Iterator[Concept]]] = {
    "dictionary": read_dictionary,
    "medic": read_dictionary,
    "umls": read_mrconso,
    "obo": read_obo,
    "obo-json": read_obo_graph_json,
    "mesh": read_mesh_descriptors,
    "mesh-supp": read_mesh_supplementary,
    "scispacy": read_scispacy_kb,
}
assert tuple(READERS) == VOCABULARY_FORMATS
FORMATS = tuple(READERS) + ("auto",)


def guess_format(path: PathLike) -> str:
    """The reader format a file *name* suggests (.obo, .json, MRCONSO*, mesh*supp*.tsv, .tsv), else dictionary.

    `auto` does not use this: it reads the content (detect_format) and uses the name only to break ties.
    """
    return format_from_name(path) or "dictionary"


def resolve_format(path: PathLike, format: str) -> str:
    """`format`, or for "auto" the format told from the file's content; SapbertError for an unknown name."""
    if format == "auto":
        return detect_format(path)
    if format not in READERS:
        raise SapbertError(f"unknown vocabulary format {format!r}; use one of: {', '.join(FORMATS)}")
    return format


def read_vocabulary(path: PathLike, format: str, **options: Any) -> Iterator[Concept]:
    """Concepts of a vocabulary file in the given format ("auto": told from the file's content, see detect_format).

    `options` go to the format's reader (e.g. strict=False, trees=["C"], languages=None). For "umls",
    `mrsty=<path to MRSTY.RRF>` fills the concepts' semantic types, `mrdef=<path to MRDEF.RRF>` their definitions.
    `key_by="UMLS"` (any format) keys the concepts by their cross-references with that prefix (`rekey_by_xref`).
    """
    fmt = resolve_format(path, format)
    reader = READERS[fmt]
    options = dict(options)
    key_by = options.pop("key_by", None)
    if key_by:
        from .relations import rekey_by_xref

        return rekey_by_xref(read_vocabulary(path, fmt, **options), key_by)
    accepted = [name for name in inspect.signature(reader).parameters if name != "path"]
    accepted += ["mrsty", "mrdef"] if fmt == "umls" else []
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise SapbertError(
            f"option(s) {', '.join(map(repr, unknown))} not accepted by the {fmt!r} vocabulary reader "
            f"(reading {path}); accepted: {', '.join(accepted)}"
        )
    mrsty = options.pop("mrsty", None)
    if mrsty is not None:
        if options.get("semantic_types") is not None:
            raise SapbertError("give the umls reader either the 'mrsty' or the 'semantic_types' option, not both")
        options["semantic_types"] = read_mrsty(mrsty, strict=options.get("strict", True))
    mrdef = options.pop("mrdef", None)
    if mrdef is not None:
        if options.get("definitions") is not None:
            raise SapbertError("give the umls reader either the 'mrdef' or the 'definitions' option, not both")
        options["definitions"] = read_mrdef(mrdef, strict=options.get("strict", True))
    return reader(path, **options)


def vocabulary_specs(
    paths: Sequence[PathLike], format: str = "auto", mesh_trees: Sequence[str] = (), key_by: Optional[str] = None,
    synonym_scopes: Optional[Sequence[str]] = None,
) -> List[Tuple[Path, str, Dict[str, Any]]]:
    """(path, format, reader options) for each file ("auto": told from each file's content, now).

    `mesh_trees` filters MeSH descriptor files by tree; `key_by` keys every file's concepts by their
    cross-references with that prefix (e.g. "UMLS"); `synonym_scopes` keeps the OBO synonyms of those scopes.
    """
    specs = []
    for path in paths:
        fmt = resolve_format(path, format)
        options: Dict[str, Any] = {"trees": list(mesh_trees)} if fmt == "mesh" and mesh_trees else {}
        if synonym_scopes is not None and fmt in ("obo", "obo-json"):
            options["synonym_scopes"] = list(synonym_scopes)
        if key_by:
            options["key_by"] = key_by
        specs.append((Path(path), fmt, options))
    return specs


def read_vocabularies(specs: Sequence[Tuple[PathLike, str, Dict[str, Any]]], **common: Any) -> List[Concept]:
    """The concepts of several vocabulary files, merged by concept id (names, types and xrefs appended)."""
    from ..kb import KnowledgeBase

    kb = KnowledgeBase()
    for path, fmt, options in specs:
        for concept in read_vocabulary(path, fmt, **{**common, **options}):
            kb.add(concept)
    return list(kb)


__all__ = [
    "FORMATS",
    "FormatDetectionError",
    "detect_corpus_format",
    "detect_format",
    "resolve_format",
    "read_vocabularies",
    "vocabulary_specs",
    "MalformedLine",
    "VocabularyNotFoundError",
    "VocabularyWarning",
    "guess_format",
    "read_dictionary",
    "read_mesh_descriptors",
    "read_mesh_supplementary",
    "read_mrconso",
    "read_mrdef",
    "read_mrrel_tradenames",
    "read_mrsty",
    "read_obo",
    "read_obo_graph_json",
    "read_scispacy_kb",
    "read_spell_check",
    "read_vocabulary",
]
