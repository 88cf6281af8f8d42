"""`ID||name` dictionaries (SapBERT/BioSyn style) and the MEDIC form `ID[|ALT...]||name|syn|...`.

Both are one format: ids left of the first "||" ("|"-separated, the first one primary), names right of
it ("|"-separated, the first one canonical). Bare-digit ids are OMIM numbers and become "OMIM:<digits>";
"MESH:" and "UMLS:" prefixes are dropped ("MESH:D000001" is D000001, as every reader and the corpora's gold ids
name MeSH and UMLS concepts); other ids are kept as they are.
"""
from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Tuple

from ..kb import Concept, unique
from . import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines
from ..preprocess import bare_id

_OMIM_NUMBER = re.compile(r"[0-9]+")


def normalize_dictionary_id(raw: str) -> str:
    """A dictionary id as the readers name concepts: bare OMIM numbers prefixed ("145250" -> "OMIM:145250"), and
    MeSH and UMLS ids bare ("MESH:D000001" -> "D000001"; a gold "MESH:D000001" is compared as D000001)."""
    raw = raw.strip()
    return f"OMIM:{raw}" if _OMIM_NUMBER.fullmatch(raw) else bare_id(raw)


def parse_dictionary_line(line: str) -> Optional[Tuple[List[str], List[str]]]:
    """(ids, names) of one dictionary line, None for a blank line; MalformedLine if it is not one."""
    if not line.strip():
        return None
    if "||" not in line:
        raise MalformedLine("no '||' between ids and names")
    id_part, name_part = line.split("||", 1)
    if "||" in name_part:
        raise MalformedLine("more than one '||' (expected ID[|ALT...]||name[|synonym...])")
    raw_ids = [part.strip() for part in id_part.split("|")]
    if not raw_ids[0]:
        raise MalformedLine("empty id")
    names = unique(part.strip() for part in name_part.split("|"))
    if not names:
        raise MalformedLine("no name after '||'")
    ids = unique(normalize_dictionary_id(raw) for raw in raw_ids)
    return ids, names


def read_dictionary(path: PathLike, strict: bool = True) -> Iterator[Concept]:
    """Concepts of an `id||name` or MEDIC-style dictionary, one per primary id.

    Lines repeating a primary id (the usual `CUI||name` one-name-per-line layout) are merged into one
    concept with all names and alt ids; concepts come in first-seen order of their ids. This keeps one
    entry per id in memory, which the merging needs.
    """
    return _read_dictionary(check_file(path), strict)


def _read_dictionary(path: PathLike, strict: bool) -> Iterator[Concept]:
    policy = LinePolicy(path, strict)
    entries: Dict[str, Tuple[List[str], List[str]]] = {}  # primary id -> (names, alt ids)
    for line_no, line in numbered_lines(path, policy):
        try:
            parsed = parse_dictionary_line(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
            continue
        if parsed is None:
            continue
        ids, names = parsed
        names_so_far, alts_so_far = entries.setdefault(ids[0], ([], []))
        names_so_far.extend(names)
        alts_so_far.extend(ids[1:])
    for concept_id, (names, alt_ids) in entries.items():
        yield Concept(id=concept_id, name=names[0], synonyms=names[1:], alt_ids=alt_ids)
    policy.finish()


def parse_spell_check_line(line: str) -> Optional[Tuple[str, str]]:
    """(misspelling, correction) of one `misspelling||correction` line, None for a blank line."""
    if not line.strip():
        return None
    if "||" not in line:
        raise MalformedLine("no '||' between misspelling and correction")
    wrong, right = (part.strip() for part in line.split("||", 1))
    if not wrong or not right or "||" in right:
        raise MalformedLine("expected 'misspelling||correction'")
    return wrong, right


def read_spell_check(path: PathLike, strict: bool = True) -> Dict[str, str]:
    """Misspelling -> correction from a BioSyn spell-check file (e.g. medic/ncbi-spell-check.txt). A misspelling
    given a second, other correction is a bad line (which one would be meant?); the same pair twice is one."""
    path = check_file(path)
    policy = LinePolicy(path, strict)
    corrections: Dict[str, str] = {}
    first_line: Dict[str, int] = {}
    for line_no, line in numbered_lines(path, policy):
        try:
            pair = parse_spell_check_line(line)
            if pair is not None and corrections.get(pair[0], pair[1]) != pair[1]:
                raise MalformedLine(
                    f"{pair[0]!r} was corrected to {corrections[pair[0]]!r} at line {first_line[pair[0]]}, here to {pair[1]!r}"
                )
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
            continue
        if pair is not None:
            corrections[pair[0]] = pair[1]
            first_line.setdefault(pair[0], line_no)
    policy.finish(stacklevel=2)
    return corrections
