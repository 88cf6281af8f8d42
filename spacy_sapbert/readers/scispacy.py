"""scispaCy's knowledge-base files: JSON lines, one concept per line (its UMLS, MeSH, RxNorm, GO, HPO KBs)::

    {"concept_id": "C0000005", "canonical_name": "(131)I-Macroaggregated Albumin", "aliases": ["MAA"],
     "types": ["T116", "T121"], "definition": "..."}

`concept_id` and `canonical_name` are required strings (an empty canonical name takes the first alias);
`aliases` and `types` are optional lists of strings, `definition` an optional string. A concept id on
several lines is merged by the knowledge base, as for every reader.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, List

from ..kb import Concept
from . import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines


def _string_list(record: dict, key: str) -> List[str]:
    value = record.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise MalformedLine(f"{key!r} must be a list of strings, got {json.dumps(value)[:60]}")
    return [item.strip() for item in value if item.strip()]


def parse_scispacy_line(line: str) -> Concept:
    """The Concept of one scispaCy KB line; MalformedLine when it is not such a JSON object."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise MalformedLine(f"not a JSON object ({err.msg} at column {err.colno})") from None
    if not isinstance(record, dict):
        raise MalformedLine(f"a JSON {type(record).__name__}, not an object")
    concept_id = record.get("concept_id")
    if not isinstance(concept_id, str) or not concept_id.strip():
        raise MalformedLine("no 'concept_id' string")
    name = record.get("canonical_name") or ""
    if not isinstance(name, str):
        raise MalformedLine("'canonical_name' is not a string")
    aliases = _string_list(record, "aliases")
    name = name.strip() or (aliases[0] if aliases else "")
    if not name:
        raise MalformedLine(f"concept {concept_id.strip()} has neither a canonical name nor aliases")
    definition = record.get("definition") or ""
    if not isinstance(definition, str):
        raise MalformedLine("'definition' is not a string")
    return Concept(
        id=concept_id.strip(), name=name, synonyms=aliases, types=_string_list(record, "types"), definition=definition.strip()
    )


def is_scispacy_line(line: str) -> bool:
    """True when `line` parses as a scispaCy KB record (format detection)."""
    try:
        parse_scispacy_line(line)
    except MalformedLine:
        return False
    return True


def read_scispacy_kb(path: PathLike, strict: bool = True) -> Iterator[Concept]:
    """Concepts of a scispaCy knowledge-base JSON-lines file, in file order (blank lines skipped)."""
    return _read(check_file(path), strict)


def _read(path: Path, strict: bool) -> Iterator[Concept]:
    policy = LinePolicy(path, strict)
    for line_no, line in numbered_lines(path, policy):
        if not line.strip():
            continue
        try:
            yield parse_scispacy_line(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
    policy.finish()
