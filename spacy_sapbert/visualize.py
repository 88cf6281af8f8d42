"""displaCy pages of linked entities: each entity shows its id, canonical name and score, the id a link to its source's page.

The page is built from `pipeline.doc_to_json` rows (the same data `link` prints), in displaCy's manual
"ent" format, so spaCy renders it; only the id -> URL mapping and the label text are ours. spaCy's
`kb_url_template` option takes one template for every id, which does not fit a vocabulary that mixes
MeSH, OMIM, HPO and MONDO ids, so the URL is chosen per id by its prefix.
"""
from __future__ import annotations

import html
import re
from typing import Dict, Iterable, List, Optional, Tuple

# (pattern of the whole id, URL template over the pattern's groups); the first match wins.
SOURCE_URLS: Tuple[Tuple[re.Pattern, str], ...] = (
    (re.compile(r"(?:UMLS:)?(C\d{7})"), "https://uts.nlm.nih.gov/uts/umls/concept/{0}"),
    (re.compile(r"(?:MESH:|MSH:)?([CD]\d{6}(?:\d{3})?)"), "https://meshb.nlm.nih.gov/record/ui?ui={0}"),
    (re.compile(r"(?:OMIM|MIM):(P?S?\d{6})"), "https://omim.org/entry/{0}"),
    (re.compile(r"(HP:\d{7})"), "https://hpo.jax.org/browse/term/{0}"),
    (re.compile(r"(MONDO:\d{7})"), "https://monarchinitiative.org/{0}"),
    (re.compile(r"(DOID:\d+)"), "https://disease-ontology.org/?id={0}"),
)


def concept_url(concept_id: str) -> Optional[str]:
    """The web page of a concept id from UMLS, MeSH, OMIM, HPO, MONDO or DOID; None for other ids.

    UMLS CUIs are C + 7 digits; MeSH descriptors D + 6 (or 9) digits and supplementary records
    C + 6 or 9 digits, with or without a "MESH:" prefix (MEDIC writes one).
    """
    for pattern, template in SOURCE_URLS:
        match = pattern.fullmatch(concept_id)
        if match:
            return template.format(match.group(1))
    return None


def entity_caption(row: Dict) -> str:
    """The text displaCy shows after an entity's label: "id · canonical name · score"."""
    parts = [row["kb_id"]]
    if row.get("name"):
        parts.append(row["name"])
    if row.get("score") is not None:
        parts.append(f"{row['score']:.2f}")
    return " · ".join(parts)


def displacy_doc(doc_json: Dict, title: Optional[str] = None) -> Dict:
    """One `doc_to_json` result in displaCy's manual "ent" format, with a linked caption per linked entity.

    displaCy inserts `kb_id` into its HTML as it is, so the caption is escaped here; an entity without
    an id is shown with its label only.
    """
    ents = []
    for row in doc_json["ents"]:
        ent = {"start": row["start"], "end": row["end"], "label": row["label"]}
        if row.get("kb_id"):
            ent["kb_id"] = html.escape(entity_caption(row))
            ent["kb_url"] = html.escape(concept_url(row["kb_id"]) or "#")
        ents.append(ent)
    return {"text": doc_json["text"], "ents": ents, "title": title}


def render_page(doc_jsons: Iterable[Dict]) -> str:
    """A standalone HTML page of the linked documents (displaCy's "ent" style)."""
    from spacy import displacy

    parsed: List[Dict] = [displacy_doc(doc_json) for doc_json in doc_jsons]
    return displacy.render(parsed, style="ent", manual=True, page=True, minify=False)

