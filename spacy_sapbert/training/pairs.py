"""Positive pairs for self-alignment pretraining and fine-tuning, and the ``ID||name1||name2`` pairs file.

Pretraining pairs (SapBERT): every unordered pair of distinct names of one concept; a concept with more
than `max_pairs` (50) pairs keeps a random sample of 50. The reference code sampled with an unseeded
``random.sample``; here each concept's sample comes from ``random.Random(f"{seed}:{concept_id}")``, so
it is reproducible, differs between seeds, and does not depend on the other concepts in the file.

Fine-tuning pairs: each training mention paired with every name of its gold concept.

``PairsFile`` gives random access to a pairs file without loading it: one scan validates every line
(an error names the file and line) and records where each pair's line starts and ends (16 bytes per
pair); pairs are then decoded from a memory map on demand.
"""
from __future__ import annotations

import hashlib
import mmap
import random
from array import array
from itertools import combinations
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import SapbertError, VocabularyFormatError
from ..io import atomic_write
from ..kb import Concept, KnowledgeBase, unique
from ..readers import LinePolicy, PathLike, check_file, line_start, numbered_lines
from .extract import clean_name

__all__ = [
    "Pair",
    "PairsFile",
    "concept_pairs",
    "finetune_pairs",
    "parse_pair_line",
    "read_pairs",
    "save_pairs",
    "write_pairs",
]

Pair = Tuple[str, str, str]  # (concept id, name 1, name 2)


def _unrank_pair(index: int, n: int) -> Tuple[int, int]:
    """The (i, j) of the index-th pair in ``itertools.combinations(range(n), 2)`` order."""
    i = 0
    row = n - 1  # pairs starting with i
    while index >= row:
        index -= row
        i += 1
        row -= 1
    return i, i + 1 + index


def concept_pairs(
    concept_id: str, names: Sequence[str], max_pairs: Optional[int] = 50, rng: Optional[random.Random] = None
) -> List[Pair]:
    """All unordered pairs (id, a, b) of the distinct names of a concept, at most `max_pairs` of them.

    n distinct names give n*(n-1)/2 pairs in ``itertools.combinations`` order. With more than
    `max_pairs`, ``rng.sample`` picks `max_pairs` of them -- the same pairs, in the same order, as
    ``rng.sample(list(combinations(names, 2)), max_pairs)`` (the reference code), without building the
    full list (a concept with 2,000 names has 2 million pairs). `rng` defaults to
    ``random.Random(f"0:{concept_id}")``. max_pairs=None keeps all pairs.
    """
    names = unique(names)
    n = len(names)
    total = n * (n - 1) // 2
    if max_pairs is None or total <= max_pairs:
        return [(concept_id, a, b) for a, b in combinations(names, 2)]
    if rng is None:
        rng = random.Random(f"0:{concept_id}")
    chosen = rng.sample(range(total), max_pairs)
    out = []
    for index in chosen:
        i, j = _unrank_pair(index, n)
        out.append((concept_id, names[i], names[j]))
    return out


def _check_pair(pair: Pair) -> str:
    concept_id, a, b = pair
    for value, what in ((concept_id, "concept id"), (a, "name"), (b, "name")):
        if not value or "||" in value or "\n" in value or "\r" in value or value != value.strip():
            raise SapbertError(f"{what} {value!r} cannot be written to a pairs file (empty, '||', line break or outer spaces)")
    return f"{concept_id}||{a}||{b}\n"


def save_pairs(path: PathLike, pairs: Iterable[Pair]) -> int:
    """Write (id, a, b) pairs as ``ID||a||b`` lines atomically; the number written. `pairs` is streamed."""
    count = 0

    def writer(tmp: Path) -> None:
        nonlocal count
        with open(tmp, "w", encoding="utf8", newline="\n") as out:
            for pair in pairs:
                out.write(_check_pair(pair))
                count += 1
        if not count:  # an earlier output at `path` stays as it was
            raise SapbertError(f"{path}: no pair to write; no concept has two names, or no mention a gold concept in the vocabulary")

    atomic_write(path, writer)
    return count


def write_pairs(
    path: PathLike,
    synonyms: Iterable[Tuple[str, Sequence[str]]],
    max_pairs: Optional[int] = 50,
    seed: int = 0,
    extra: Iterable[Pair] = (),
) -> int:
    """Stream (id, names) items (``extract_synonyms`` / ``read_synonyms``) into a pairs file, then the
    `extra` pairs (e.g. ``translation_pairs``); pair count.

    Concepts with fewer than two distinct names give no pairs. Each concept's cut to `max_pairs` uses
    ``random.Random(f"{seed}:{concept_id}")``. Written atomically, one concept in memory at a time.
    """

    def pairs() -> Iterator[Pair]:
        for concept_id, names in synonyms:
            yield from concept_pairs(concept_id, names, max_pairs, random.Random(f"{seed}:{concept_id}"))
        yield from extra

    return save_pairs(path, pairs())


TRANSLATION_PREFIX = "translation:"  # the label of a translation pair: its own, one per line


def translation_pairs(paths: Sequence[PathLike], lowercase: bool = True) -> Iterator[Pair]:
    """XL-BEL's extra classes from ``src||tgt`` lines of bilingual word/phrase dictionaries: each translation pulls its
    two sides together and pushes them from every other class. Lines that share a side (after cleaning, as extraction
    cleans names) are one class, and a pair given twice is one pair: as two classes, one string was the other's
    negative at similarity 1, a saturated term that drowned the real negatives. A class is labelled by its first line
    ("translation:<file number>:<line>"). A line without exactly two non-empty sides names the file and line; blank
    lines are skipped."""
    lines: List[Tuple[str, str, str]] = []  # (label, a, b) of each translation, in reading order
    for file_number, path in enumerate(paths):
        path = check_file(path)
        for line_no, line in numbered_lines(path, LinePolicy(path, strict=True)):
            if not line.strip():
                continue
            sides = line.split("||")
            if len(sides) != 2 or not all(side.strip() for side in sides):
                raise VocabularyFormatError(str(path), line_no, f"expected 'source||target', got {line[:60]!r}")
            a, b = (clean_name(side, lowercase) for side in sides)
            if a != b:
                lines.append((f"{TRANSLATION_PREFIX}{file_number}:{line_no}", a, b))
    from .merge import DisjointSets

    rows: Dict[str, int] = {}  # each cleaned string, numbered in reading order
    for _, a, b in lines:
        rows.setdefault(a, len(rows))
        rows.setdefault(b, len(rows))
    classes = DisjointSets(len(rows))
    for _, a, b in lines:
        classes.union(rows[a], rows[b])
    labels: Dict[int, str] = {}  # a class's root -> the label of its first line
    seen = set()
    for label, a, b in lines:
        if frozenset((a, b)) not in seen:
            seen.add(frozenset((a, b)))
            yield labels.setdefault(classes.find(rows[a]), label), a, b


def parse_pair_line(line: str) -> Optional[Pair]:
    """(id, a, b) of one ``ID||name1||name2`` line; None for a blank line; ValueError otherwise."""
    if not line.strip():
        return None
    fields = line.split("||")
    if len(fields) != 3:
        raise ValueError(f"expected 3 '||'-separated fields (ID||name1||name2), got {len(fields)}")
    concept_id, a, b = (f.strip() for f in fields)
    if not concept_id or not a or not b:
        raise ValueError("empty concept id or name")
    return concept_id, a, b


def read_pairs(path: PathLike) -> Iterator[Pair]:
    """(id, a, b) per line of a pairs file, streamed; a malformed line raises VocabularyFormatError(file, line)."""
    path = check_file(path)

    def lines() -> Iterator[Pair]:
        with open(path, "rb") as handle:
            for line_no, raw in enumerate(handle, 1):
                yield_pair = _decode_pair(path, line_no, raw)
                if yield_pair is not None:
                    yield yield_pair

    return lines()


UTF8_BOM = b"\xef\xbb\xbf"


def _bom_length(line_no: int, raw: bytes) -> int:
    """How many bytes of a first line are a UTF-8 byte order mark (an editor's; it is not part of the id)."""
    return len(UTF8_BOM) if line_no == 1 and raw.startswith(UTF8_BOM) else 0


def _decode_pair(path: Path, line_no: int, raw: bytes) -> Optional[Pair]:
    raw = raw[_bom_length(line_no, raw):].rstrip(b"\r\n")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise VocabularyFormatError(str(path), line_no, f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})") from None
    try:
        return parse_pair_line(text)
    except ValueError as err:
        raise VocabularyFormatError(str(path), line_no, f"{err}: {line_start(text)}") from None


class PairsFile:
    """Random access to the pairs of an ``ID||a||b`` file: validated once, decoded on demand.

    ``len(pairs)``, ``pairs[i]`` -> (id, a, b). Holds the byte span of every pair (16 bytes each) and a
    read-only memory map of the file; blank lines are skipped. An empty file is an error.
    """

    def __init__(self, path: PathLike):
        import numpy

        self.path = check_file(path)
        offsets = array("q")
        ends = array("q")
        position = 0
        digest = hashlib.sha256()
        with open(self.path, "rb") as handle:
            for line_no, raw in enumerate(handle, 1):
                digest.update(raw)
                if _decode_pair(self.path, line_no, raw) is not None:
                    offsets.append(position + _bom_length(line_no, raw))
                    ends.append(position + len(raw))
                position += len(raw)
        if not offsets:
            raise VocabularyFormatError(str(self.path), None, "no pairs in the file (expected ID||name1||name2 lines)")
        self.digest = digest.hexdigest()[:16]  # of the file's bytes, as io.file_digest: read once, here
        self._starts = numpy.frombuffer(offsets, dtype="int64")
        self._ends = numpy.frombuffer(ends, dtype="int64")
        self._handle = open(self.path, "rb")
        self._map = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ)

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, index: int) -> Pair:
        start, end = int(self._starts[index]), int(self._ends[index])
        fields = self._map[start:end].rstrip(b"\r\n").decode("utf-8").split("||")
        return fields[0].strip(), fields[1].strip(), fields[2].strip()

    def batch(self, indices: Iterable[int]) -> List[Pair]:
        return [self[int(i)] for i in indices]

    def close(self) -> None:
        self._map.close()
        self._handle.close()

    def __enter__(self) -> "PairsFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------------
# fine-tuning pairs


def _lookup(concepts_by_id, concept_id: str) -> Optional[Concept]:
    getter = getattr(concepts_by_id, "get", None)
    return getter(concept_id) if getter is not None else None


def finetune_pairs(
    documents: Iterable,
    concepts_by_id: Union[Mapping[str, Concept], KnowledgeBase],
    labels: Optional[Iterable[str]] = None,
    composites: str = "parts",
    lowercase: bool = True,
    stats: Optional[dict] = None,
) -> List[Pair]:
    """(gold id, mention, name) for each training mention and every name of its gold concept.

    documents: ``read_pubtator`` Documents. concepts_by_id: a KnowledgeBase (alt ids resolve to the
    primary concept) or a dict id -> Concept. labels: only mentions with these types (None: all).

    Choices (the gold strings of NCBI-disease / BC5CDR):

    * "-1" and other no-concept golds (``preprocess.is_cuiless``) are skipped;
    * "A+B" combinations (one mention denoting several concepts at once) are skipped: the mention is no
      synonym of either concept;
    * composite "A|B" golds: with composites="parts" (default) the mention is split into the part texts
      the corpus lists (BC5CDR's 7th column) when their number equals the number of ids, and part i is
      paired with concept i; otherwise the mention is skipped (a heuristic split could pair wrong text
      with a concept). composites="skip" skips every composite;
    * golds not in the vocabulary are skipped (a "MESH:" or "UMLS:" prefix is read bare, as the readers name
      those concepts), and so is a composite's part without concept ("D002544|-1").

    Mentions and names are cleaned like the pretraining names (lowercased by default); a mention that
    equals the name is no pair; exact duplicate pairs are kept once (first-seen order). `stats`, when a
    dict, receives counts of used and skipped mentions.
    """
    from ..preprocess import bare_id, is_cuiless

    if composites not in ("parts", "skip"):
        raise SapbertError(f"composites={composites!r}: use 'parts' or 'skip'")
    wanted = None if labels is None else set(labels)
    counts = {"mentions": 0, "used": 0, "cuiless": 0, "combination": 0, "composite_skipped": 0, "unknown_id": 0, "cuiless_part": 0}
    seen = set()
    out: List[Pair] = []
    for doc in documents:
        for mention in doc.mentions:
            if wanted is not None and mention.label not in wanted:
                continue
            counts["mentions"] += 1
            gold = mention.gold.strip()
            if is_cuiless(gold):
                counts["cuiless"] += 1
                continue
            if "+" in gold or "," in gold:
                counts["combination"] += 1
                continue
            if "|" in gold:
                ids = [g.strip() for g in gold.split("|")]
                if composites == "skip" or len(mention.parts) != len(ids) or not all(ids):
                    counts["composite_skipped"] += 1
                    continue
                items = list(zip(mention.parts, ids))
            else:
                items = [(mention.text, gold)]
            used = False
            for text, concept_id in items:
                if is_cuiless(concept_id):  # "D002544|-1": that part names no concept
                    counts["cuiless_part"] += 1
                    continue
                concept = _lookup(concepts_by_id, bare_id(concept_id))
                if concept is None:
                    counts["unknown_id"] += 1
                    continue
                text = clean_name(text, lowercase)
                if not text:
                    continue
                for name in unique(clean_name(n, lowercase) for n in concept.names):
                    if not name or name == text:
                        continue
                    pair = (concept.id, text, name)
                    if pair not in seen:
                        seen.add(pair)
                        out.append(pair)
                used = True
            counts["used"] += int(used)
    if stats is not None:
        stats.update(counts)
    return out
