"""UMLS Metathesaurus RRF files: MRCONSO (names), MRSTY (semantic types), MRDEF (definitions), MRREL (tradename relations).

RRF rows are "|"-separated with a trailing "|", so a row of N columns splits into N + 1 items, the last
one empty. Column lists as in MRFILES.RRF.
"""
from __future__ import annotations

from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from ..kb import Concept
from . import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines

MRCONSO_COLUMNS = (
    "CUI", "LAT", "TS", "LUI", "STT", "SUI", "ISPREF", "AUI", "SAUI", "SCUI",
    "SDUI", "SAB", "TTY", "CODE", "STR", "SRL", "SUPPRESS", "CVF",
)
MRSTY_COLUMNS = ("CUI", "TUI", "STN", "STY", "ATUI", "CVF")
MRDEF_COLUMNS = ("CUI", "AUI", "ATUI", "SATUI", "SAB", "DEF", "SUPPRESS", "CVF")
MRREL_COLUMNS = (
    "CUI1", "AUI1", "STYPE1", "REL", "CUI2", "AUI2", "STYPE2", "RELA",
    "RUI", "SRUI", "SAB", "SL", "RG", "DIR", "SUPPRESS", "CVF",
)
SUPPRESSED = frozenset({"O", "E", "Y"})  # obsolete, suppressed by the editors, suppressible
TRADENAME_RELAS = frozenset({"has_tradename", "tradename_of"})


class ConsoRow(NamedTuple):
    """The MRCONSO columns the reader uses."""

    cui: str
    lat: str
    ts: str
    stt: str
    ispref: str
    sab: str
    tty: str
    string: str
    suppress: str


def split_rrf(line: str, columns: Sequence[str]) -> List[str]:
    """The fields of one RRF row (trailing "|" removed); MalformedLine if the count is wrong."""
    fields = line.split("|")
    if len(fields) != len(columns) + 1 or fields[-1] != "":
        got = len(fields) - 1 if fields[-1] == "" else len(fields)
        ending = "" if fields[-1] == "" else " and no '|' at the end"
        raise MalformedLine(f"expected {len(columns)} fields, each followed by '|', got {got} fields{ending}")
    return fields[:-1]


def parse_mrconso_line(line: str) -> ConsoRow:
    """The used columns of one MRCONSO.RRF row."""
    f = split_rrf(line, MRCONSO_COLUMNS)
    if not f[0]:
        raise MalformedLine("empty CUI")
    if not f[14]:
        raise MalformedLine("empty STR")
    return ConsoRow(
        cui=f[0], lat=f[1], ts=f[2], stt=f[4], ispref=f[6], sab=f[11], tty=f[12], string=f[14], suppress=f[16]
    )


def keep_conso_row(
    row: ConsoRow,
    languages: Optional[Collection[str]],
    sources: Optional[Collection[str]],
    exclude_sources: Collection[str],
    keep_suppressed: bool,
) -> bool:
    """Whether a row passes the language, source and suppression filters."""
    if languages is not None and row.lat not in languages:
        return False
    if sources is not None and row.sab not in sources:
        return False
    if row.sab in exclude_sources:
        return False
    return keep_suppressed or row.suppress not in SUPPRESSED


def _preference(row: ConsoRow) -> int:
    """0 for the concept's preferred English name, 1 for a preferred name in another language, else 2."""
    if row.ts == "P" and row.stt == "PF" and row.ispref == "Y":
        return 0 if row.lat == "ENG" else 1
    return 2


def concept_from_rows(rows: Sequence[ConsoRow], types: Iterable[str] = (), definition: str = "") -> Concept:
    """One concept from the (filtered) MRCONSO rows of one CUI: canonical name = preferred name, else first
    row; sources = the rows' SABs."""
    canonical = min(rows, key=_preference)  # min() keeps the first of equally ranked rows
    return Concept(
        id=rows[0].cui,
        name=canonical.string,
        synonyms=[row.string for row in rows],
        types=list(types),
        definition=definition,
        sources=[row.sab for row in rows],
    )


def read_mrconso(
    path: PathLike,
    languages: Optional[Sequence[str]] = ("ENG",),
    sources: Optional[Sequence[str]] = None,
    exclude_sources: Sequence[str] = (),
    keep_suppressed: bool = False,
    semantic_types: Optional[Dict[str, List[str]]] = None,
    definitions: Optional[Dict[str, str]] = None,
    strict: bool = True,
) -> Iterator[Concept]:
    """Concepts from MRCONSO.RRF, streamed: one per run of consecutive rows with the same CUI.

    MRCONSO is sorted by CUI, so only the rows of the current CUI are held in memory (the full file
    is several GB). languages=None keeps every LAT; sources=None every SAB. Rows with SUPPRESS O/E/Y
    are dropped unless keep_suppressed. `semantic_types` (from read_mrsty) fills `types` with TUIs,
    `definitions` (from read_mrdef) the definitions.
    In an unsorted file a CUI split into several runs yields several concepts with the same id
    (KnowledgeBase merges them).
    """
    return _read_mrconso(
        check_file(path),
        frozenset(languages) if languages is not None else None,
        frozenset(sources) if sources is not None else None,
        frozenset(exclude_sources),
        keep_suppressed,
        semantic_types or {},
        definitions or {},
        strict,
    )


def _read_mrconso(
    path: PathLike,
    languages: Optional[Collection[str]],
    sources: Optional[Collection[str]],
    exclude_sources: Collection[str],
    keep_suppressed: bool,
    semantic_types: Dict[str, List[str]],
    definitions: Dict[str, str],
    strict: bool,
) -> Iterator[Concept]:
    rows: List[ConsoRow] = []

    def concept() -> Concept:
        cui = rows[0].cui
        return concept_from_rows(rows, semantic_types.get(cui, ()), definitions.get(cui, ""))

    for row in _kept_rows(path, languages, sources, exclude_sources, keep_suppressed, strict):
        if rows and row.cui != rows[0].cui:
            yield concept()
            rows = []
        rows.append(row)
    if rows:
        yield concept()


def _kept_rows(
    path: PathLike,
    languages: Optional[Collection[str]],
    sources: Optional[Collection[str]],
    exclude_sources: Collection[str],
    keep_suppressed: bool,
    strict: bool,
) -> Iterator[ConsoRow]:
    """The MRCONSO rows that pass the filters, streamed; a malformed line goes to the line policy."""
    policy = LinePolicy(path, strict)
    for line_no, line in numbered_lines(path, policy):
        if not line.strip():
            continue
        try:
            row = parse_mrconso_line(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
            continue
        if keep_conso_row(row, languages, sources, exclude_sources, keep_suppressed):
            yield row
    policy.finish()


def read_mrconso_languages(
    path: PathLike,
    languages: Optional[Sequence[str]] = ("ENG",),
    sources: Optional[Sequence[str]] = None,
    exclude_sources: Sequence[str] = (),
    keep_suppressed: bool = False,
    strict: bool = True,
) -> Iterator[Tuple[str, str, str]]:
    """(CUI, LAT, string) of each MRCONSO row that `read_mrconso` with the same filters keeps, streamed:
    the language of every name (XL-BEL's multilingual SAP trains on all of them)."""
    rows = _kept_rows(
        check_file(path), frozenset(languages) if languages is not None else None,
        frozenset(sources) if sources is not None else None, frozenset(exclude_sources), keep_suppressed, strict,
    )
    return ((row.cui, row.lat, row.string) for row in rows)


def parse_mrsty_line(line: str) -> Tuple[str, str]:
    """(CUI, TUI) of one MRSTY.RRF row."""
    f = split_rrf(line, MRSTY_COLUMNS)
    if not f[0] or not f[1]:
        raise MalformedLine("empty CUI or TUI")
    return f[0], f[1]


def read_mrsty(path: PathLike, strict: bool = True) -> Dict[str, List[str]]:
    """CUI -> its semantic type ids (TUIs, e.g. "T116") from MRSTY.RRF, in file order."""
    types: Dict[str, List[str]] = {}
    for cui, tui in read_mrsty_rows(path, strict):
        tuis = types.setdefault(cui, [])
        if tui not in tuis:
            tuis.append(tui)
    return types


def read_mrsty_rows(path: PathLike, strict: bool = True) -> Iterator[Tuple[str, str]]:
    """(CUI, TUI) of each MRSTY.RRF row, streamed."""
    return parsed_rows(check_file(path), strict, parse_mrsty_line)


def parse_mrdef_line(line: str) -> Tuple[str, str, str, str]:
    """(CUI, SAB, DEF, SUPPRESS) of one MRDEF.RRF row."""
    f = split_rrf(line, MRDEF_COLUMNS)
    if not f[0] or not f[5].strip():
        raise MalformedLine("empty CUI or DEF")
    return f[0], f[4], f[5].strip(), f[6]


def read_mrdef(
    path: PathLike, sources: Optional[Sequence[str]] = None, keep_suppressed: bool = False, strict: bool = True
) -> Dict[str, str]:
    """CUI -> one definition from MRDEF.RRF: of the first source in `sources` that defines the CUI (None: any
    source), else the first in file order; rows with SUPPRESS O/E/Y are left out unless keep_suppressed."""
    path = check_file(path)
    policy = LinePolicy(path, strict)
    rank = {sab: i for i, sab in enumerate(sources or ())}
    best: Dict[str, Tuple[int, str]] = {}
    for line_no, line in numbered_lines(path, policy):
        if not line.strip():
            continue
        try:
            cui, sab, definition, suppress = parse_mrdef_line(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
            continue
        if (suppress in SUPPRESSED and not keep_suppressed) or (sources and sab not in rank):
            continue
        order = rank.get(sab, 0)
        if cui not in best or order < best[cui][0]:
            best[cui] = (order, definition)
    policy.finish(stacklevel=2)
    return {cui: definition for cui, (_, definition) in best.items()}


def parse_mrrel_tradename(line: str) -> Optional[Tuple[str, str]]:
    """(CUI1, CUI2) of one MRREL.RRF row if its RELA is has_tradename / tradename_of, else None."""
    f = split_rrf(line, MRREL_COLUMNS)
    if f[7] not in TRADENAME_RELAS:
        return None
    if not f[0] or not f[4]:
        raise MalformedLine("empty CUI1 or CUI2")
    return f[0], f[4]


def parse_mrrel_relation(line: str) -> Optional[Tuple[str, str, str]]:
    """(CUI1, RELA or else REL, CUI2) of one MRREL.RRF row; None for a suppressed row or a self-relation."""
    f = split_rrf(line, MRREL_COLUMNS)
    if not f[0] or not f[4] or not f[3]:
        raise MalformedLine("empty CUI1, REL or CUI2")
    if f[14] in SUPPRESSED or f[0] == f[4]:
        return None
    return f[0], f[7] or f[3], f[4]


def read_mrrel_tradenames(path: PathLike, strict: bool = True) -> Iterator[Tuple[str, str]]:
    """(CUI1, CUI2) pairs of the MRREL rows relating a drug and its trade name (streamed)."""
    return parsed_rows(check_file(path), strict, parse_mrrel_tradename)


def read_mrrel(path: PathLike, strict: bool = True) -> Iterator[Tuple[str, str, str]]:
    """(CUI1, relation, CUI2) triples of every MRREL row (`parse_mrrel_relation`), streamed: the UMLS
    relations of a knowledge-graph embedding. A malformed row names the file and line."""
    return parsed_rows(check_file(path), strict, parse_mrrel_relation)


def parsed_rows(path: PathLike, strict: bool, parse: Callable[[str], Any]) -> Iterator[Any]:
    """What `parse` makes of each non-blank line of an RRF file (None: skipped), streamed; a malformed
    line raises naming the file and line, or (not strict) is counted and warned about at the end."""
    policy = LinePolicy(path, strict)
    for line_no, line in numbered_lines(path, policy):
        if not line.strip():
            continue
        try:
            item = parse(line)
        except MalformedLine as err:
            policy.reject(line_no, str(err), line)
            continue
        if item is not None:
            yield item
    policy.finish()
