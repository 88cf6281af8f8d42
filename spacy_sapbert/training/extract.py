"""Synonym sets for self-alignment pretraining: one line ``ID||name|name|...`` per concept.

SapBERT (Liu et al., NAACL 2021) trains on the names of each UMLS concept: names lowercased and
deduplicated per concept (``extract_synonyms``). ``umls_concepts`` reads them from MRCONSO.RRF and adds
the MRREL trade-name relations (the reference notebook merged a drug and its trade names).

Memory: everything here streams. MRCONSO is sorted by CUI, so ``read_mrconso`` holds one CUI's rows at
a time; a 15-million-row MRCONSO is read in a few hundred MB. The two parts that need more than the
current concept are bounded as follows:

* Trade names (``mrrel``) relate *two* concepts, which can be far apart in the file. Instead of keeping
  every concept's names, three passes are made:

  1. MRREL is streamed once; only the tradename pairs are kept (a dict CUI -> partner CUIs; tens of
     thousands of pairs in a full UMLS release);
  2. MRCONSO is streamed once and the names of just the CUIs that occur in those pairs are kept;
  3. MRCONSO is streamed again and each concept is output with its partners' names *appended* to its
     synonyms (never overwriting its own names, which is what the reference notebook did).

  Memory is then proportional to the number of concepts in tradename relations, not to the file. The
  relation is applied in both directions and is not transitive: a concept gets the names its direct
  partners have in MRCONSO (after the language/source filters), not names they got from their partners.
* Semantic types (``mrsty``) are merge-joined with MRCONSO: both files are sorted by CUI, so MRSTY is
  streamed alongside (after one quick pass that checks it is sorted). If either file is not sorted, the
  join falls back to a CUI -> TUIs dict of MRSTY (``read_mrsty``; several hundred MB for a full
  release), with the same result.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Collection, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from ..errors import SapbertError, VocabularyFormatError
from ..io import atomic_write
from ..kb import Concept, unique
from ..normalizer import Normalizer
from ..readers import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines
from ..readers.umls import read_mrconso, read_mrrel_tradenames, read_mrsty, read_mrsty_rows

__all__ = [
    "clean_name",
    "extract_synonyms",
    "parse_synonyms_line",
    "read_synonyms",
    "tradename_partners",
    "umls_concepts",
    "write_synonyms",
]

def clean_name(name: str, lowercase: bool = True) -> str:
    """`name` as the linker's Normalizer writes it (whitespace collapsed, optionally lowercased).

    A "|" inside a name (it separates names in the synonyms file; UMLS strings never contain one) is
    replaced by a space.
    """
    return Normalizer(lowercase=lowercase)(name.replace("|", " "))


def extract_synonyms(concepts: Iterable[Concept], lowercase: bool = True) -> Iterator[Tuple[str, List[str]]]:
    """(concept id, its distinct names) per concept, streamed: one concept in memory at a time.

    Names are cleaned (``clean_name``: whitespace collapsed, lowercased by default as in SapBERT) and
    deduplicated within the concept in first-seen order (canonical name first). Concepts whose names
    are all empty are left out. Concepts with one name are kept (they give no pairs, but the synonyms
    file stays a complete dictionary).
    """
    for concept in concepts:
        names = unique(clean_name(name, lowercase) for name in concept.names)
        if names:
            yield concept.id, names


def name_languages(rows: Iterable[Tuple[str, str, str]], lowercase: bool = True) -> Iterator[Tuple[str, str, str]]:
    """(concept id, language, name) with names cleaned as in `extract_synonyms`, each distinct triple once
    per run of rows of the same concept (MRCONSO is sorted by CUI, so memory stays per concept)."""
    seen: set = set()
    current = None
    for concept_id, language, raw in rows:
        if concept_id != current:
            seen, current = set(), concept_id
        name = clean_name(raw, lowercase)
        if name and (language, name) not in seen:
            seen.add((language, name))
            yield concept_id, language, name


def write_name_languages(path: PathLike, items: Iterable[Tuple[str, str, str]], *, atomic: bool = True) -> Dict[str, int]:
    """Write ``ID<TAB>LAT<TAB>name`` lines atomically (`atomic=False`: into `path` itself, a temporary file its caller
    renames into place); the name count per language."""
    counts: Counter = Counter()

    def writer(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf8", newline="\n") as handle:
            for concept_id, language, name in items:
                handle.write(f"{concept_id}\t{language}\t{name}\n")
                counts[language] += 1

    if atomic:
        atomic_write(path, writer)
    else:
        writer(Path(path))
    return dict(sorted(counts.items()))


def write_synonyms(
    path: PathLike, items: Iterable[Tuple[str, Sequence[str]]], shown_as: Optional[PathLike] = None, *, atomic: bool = True
) -> int:
    """Write ``ID||name|name|...`` lines atomically (temporary file renamed into place); the line count.

    `items` is streamed (e.g. ``extract_synonyms(...)``), so the whole vocabulary is never in memory.
    `shown_as`: the path an error names (the output, when `path` is its temporary file). `atomic=False`: write `path`
    itself (a temporary file that its caller renames into place; a second temporary file inside would be left behind
    by a kill).
    """
    count = 0

    def writer(tmp: Path) -> None:
        nonlocal count
        with open(tmp, "w", encoding="utf8", newline="\n") as out:
            for concept_id, names in items:
                if "||" in concept_id or "\n" in concept_id or not concept_id.strip():
                    raise ValueError(f"concept id {concept_id!r} cannot be written to a synonyms file")
                names = [clean_name(n, lowercase=False) for n in names]
                names = [n for n in names if n]
                if not names:
                    continue
                out.write(f"{concept_id}||{'|'.join(names)}\n")
                count += 1
        if not count:  # an earlier output at `path` stays as it was
            raise SapbertError(f"{shown_as or path}: no concept with a name to write; check the vocabulary and the filters (languages, sources, semantic types)")

    if atomic:
        atomic_write(path, writer)
    else:
        writer(Path(path))
    return count


def parse_synonyms_line(line: str) -> Optional[Tuple[str, List[str]]]:
    """(id, names) of one ``ID||name|name`` line; None for a blank line; MalformedLine otherwise."""
    if not line.strip():
        return None
    parts = line.split("||")
    if len(parts) != 2:
        raise MalformedLine(f"expected 'ID||name|name|...' (one '||'), got {len(parts) - 1} '||'")
    concept_id = parts[0].strip()
    if not concept_id:
        raise MalformedLine("empty concept id")
    names = unique(n.strip() for n in parts[1].split("|"))
    if not names:
        raise MalformedLine("no name after '||'")
    return concept_id, names


def read_synonyms(path: PathLike, strict: bool = True) -> Iterator[Tuple[str, List[str]]]:
    """(id, names) per line of a synonyms file (as written by ``write_synonyms``), streamed.

    A malformed line raises VocabularyFormatError naming the file and line (strict) or is skipped with
    one warning at the end (not strict).
    """
    path = check_file(path)

    def lines() -> Iterator[Tuple[str, List[str]]]:
        policy = LinePolicy(path, strict)
        for line_no, line in numbered_lines(path, policy):
            try:
                parsed = parse_synonyms_line(line)
            except MalformedLine as err:
                policy.reject(line_no, str(err), line)
                continue
            if parsed is not None:
                yield parsed
        policy.finish()

    return lines()


# ----------------------------------------------------------------------------------------------------
# UMLS


def tradename_partners(mrrel: PathLike, strict: bool = True) -> Dict[str, Set[str]]:
    """CUI -> the CUIs it is related to by has_tradename / tradename_of (both directions), from MRREL."""
    partners: Dict[str, Set[str]] = {}
    for cui1, cui2 in read_mrrel_tradenames(mrrel, strict=strict):
        if cui1 == cui2:
            continue
        partners.setdefault(cui1, set()).add(cui2)
        partners.setdefault(cui2, set()).add(cui1)
    return partners


def _with_types(concepts: Iterable[Concept], mrsty: Path, strict: bool) -> Iterator[Concept]:
    """Concepts with `types` from MRSTY: merge-joined on CUI when both files are CUI-sorted, else a dict.

    A first streaming pass checks that MRSTY is sorted (a join cannot tell that a CUI it passed comes
    later in an unsorted file); if MRCONSO goes back to a smaller CUI, the join switches to the dict.
    """
    previous = ""
    for cui, _ in read_mrsty_rows(mrsty, strict):
        if cui < previous:
            table: Optional[Dict[str, List[str]]] = read_mrsty(mrsty, strict=strict)
            break
        previous = cui
    else:
        table = None
    rows = read_mrsty_rows(mrsty, strict)
    pending: Optional[Tuple[str, str]] = next(rows, None) if table is None else None
    last_cui = ""
    for concept in concepts:
        if table is None and concept.id < last_cui:
            table = read_mrsty(mrsty, strict=strict)  # MRCONSO not sorted: fall back to a dict
        last_cui = concept.id
        if table is not None:
            types = table.get(concept.id, [])
        else:
            types = []
            while pending is not None and pending[0] <= concept.id:
                if pending[0] == concept.id:
                    types.append(pending[1])
                pending = next(rows, None)
        concept.types = unique(concept.types + types)
        yield concept


class SeenIds:
    """The concept ids seen so far, for a streamed MRCONSO: UMLS CUIs ("C" and 7 digits) as bits of a 1.25 MB array
    (a set of every CUI of a release would take hundreds of MB), any other id in a set."""

    def __init__(self) -> None:
        self.bits = bytearray(10**7 // 8)
        self.other: Set[str] = set()

    def add(self, concept_id: str) -> bool:
        """Record `concept_id`; whether it was seen before."""
        if len(concept_id) == 8 and concept_id[0] == "C" and concept_id[1:].isdigit() and concept_id[1:].isascii():
            number = int(concept_id[1:])
            byte, bit = number >> 3, 1 << (number & 7)
            seen = bool(self.bits[byte] & bit)
            self.bits[byte] |= bit
            return seen
        seen = concept_id in self.other
        self.other.add(concept_id)
        return seen


def umls_concepts(
    mrconso: PathLike,
    mrsty: Optional[PathLike] = None,
    mrrel: Optional[PathLike] = None,
    languages: Optional[Sequence[str]] = ("ENG",),
    sources: Optional[Sequence[str]] = None,
    exclude_sources: Sequence[str] = (),
    *,
    semantic_types: Optional[Collection[str]] = None,
    keep_suppressed: bool = False,
    strict: bool = True,
) -> Iterator[Concept]:
    """Concepts of MRCONSO.RRF (via ``read_mrconso``: language/source/suppression filters), streamed.

    mrsty: MRSTY.RRF, fills `types` with TUIs (merge-joined, see the module docstring).
    mrrel: MRREL.RRF; for each has_tradename / tradename_of pair the names of each concept are appended
    to the synonyms of the other (the concept keeps its own names and canonical name).
    semantic_types: keep only concepts with at least one of these TUIs (needs `mrsty`).
    A file whose rows of one CUI are not together is refused where the CUI comes again (each concept is one line of
    the synonyms file).
    """
    mrconso = check_file(mrconso)
    mrsty_path = check_file(mrsty) if mrsty is not None else None
    mrrel_path = check_file(mrrel) if mrrel is not None else None
    if semantic_types is not None and mrsty_path is None:
        raise VocabularyFormatError(str(mrconso), None, "filtering by semantic types needs MRSTY.RRF (--mrsty)")
    wanted_types = frozenset(semantic_types) if semantic_types is not None else None

    def read() -> Iterator[Concept]:
        return read_mrconso(
            mrconso,
            languages=languages,
            sources=sources,
            exclude_sources=exclude_sources,
            keep_suppressed=keep_suppressed,
            strict=strict,
        )

    def generate() -> Iterator[Concept]:
        partners: Dict[str, Set[str]] = tradename_partners(mrrel_path, strict) if mrrel_path else {}
        partner_names: Dict[str, List[str]] = {}
        if partners:
            for concept in read():  # pass 2: names of the concepts in tradename relations only
                if concept.id in partners:
                    partner_names.setdefault(concept.id, []).extend(concept.names)
        concepts: Iterable[Concept] = read()  # pass 3 (or the only pass): streamed output
        if mrsty_path is not None:
            concepts = _with_types(concepts, mrsty_path, strict)
        seen = SeenIds()
        for concept in concepts:
            if seen.add(concept.id):  # a CUI's rows apart split its names over several lines: fewer pairs, no error
                raise VocabularyFormatError(
                    str(mrconso), None,
                    f"the rows of CUI {concept.id} are not together (it comes again after other CUIs), as they are in "
                    "MRCONSO.RRF as released; sort the file by CUI first (LC_ALL=C sort -t'|' -k1,1 -s)",
                )
            if wanted_types is not None and not wanted_types.intersection(concept.types):
                continue
            others = partners.get(concept.id)
            if others:
                extra = [name for other in sorted(others) for name in partner_names.get(other, ())]
                concept = Concept(
                    id=concept.id,
                    name=concept.name,
                    synonyms=concept.synonyms + extra,
                    types=concept.types,
                    xrefs=concept.xrefs,
                    alt_ids=concept.alt_ids,
                )
            yield concept

    return generate()
