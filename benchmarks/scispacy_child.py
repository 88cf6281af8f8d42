"""scispacy's EntityLinker on the inputs bench_backends.py prepares; runs in scispacy's own environment.

scispacy needs numpy<2, so it cannot share this project's virtual environment: bench_backends.py
(--scispacy-python) writes the knowledge base, documents and queries as JSON, runs this file with that
environment's Python, and scores the ranked candidates it returns with the project's own scoring.
Imports only scispacy, spacy and the standard library.

Usage: python scispacy_child.py INPUT.json OUTPUT.json
"""
from __future__ import annotations

import json
import resource
import sys
import time
from importlib.metadata import version


def main(input_path: str, output_path: str) -> None:
    import spacy
    from scispacy.linking import EntityLinker
    from scispacy.linking_utils import Entity, KnowledgeBase

    with open(input_path, encoding="utf8") as f:
        data = json.load(f)
    entities = [Entity(e["concept_id"], e["canonical_name"], e["aliases"], [], None) for e in data["kb"]]

    start = time.perf_counter()
    kb = KnowledgeBase(entities)
    # No definitions in MEDIC's file: keep every concept; rank without a floor (scored at 0.7 by the parent too).
    linker = EntityLinker.from_kb(kb, filter_for_definitions=False, threshold=0.0, max_entities_per_mention=10,
                                  resolve_abbreviations=False)
    build_s = time.perf_counter() - start

    nlp = spacy.blank("en")

    def docs():
        for d in data["docs"]:
            doc = nlp.make_doc(d["text"])
            spans = [doc.char_span(s, e, label=label, alignment_mode="expand") for s, e, label in d["ents"]]
            doc.ents = spacy.util.filter_spans([s for s in spans if s is not None])
            yield doc

    mentions = sum(len(doc.ents) for doc in docs())
    start = time.perf_counter()
    linked = [linker(doc) for doc in docs()]
    pipe_s = time.perf_counter() - start
    assert sum(len(doc.ents) for doc in linked) == mentions

    queries = data["queries"]
    ranked = []
    for candidates in linker.candidate_generator(queries, linker.k):
        scored = sorted(((c.concept_id, max(c.similarities)) for c in candidates), key=lambda x: -x[1])
        ranked.append(scored[:10])
    report = {
        "names": len(linker.candidate_generator.ann_concept_aliases_list), "build_s": build_s,
        "mentions": mentions, "pipe_s": pipe_s, "ranked": dict(zip(queries, ranked)),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "versions": {"scispacy": version("scispacy"), "spacy": spacy.__version__},
    }
    with open(output_path, "w", encoding="utf8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
