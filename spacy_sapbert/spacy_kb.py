"""spaCy's own linking API over a SapBERT index: an `InMemoryLookupKB` export and candidate generators.

spaCy's trainable `EntityLinker` picks, for each entity, one of the candidates its `get_candidates`
function returns, by their prior probability and by how close the entity's KB vector is to an encoding
of the sentence. Here:

- the KB (`lookup_kb`) holds every concept of the index by its primary id, with the mean of its name
  vectors (unit length) as the entity vector, and every stored name as an alias of its concepts with
  equal priors; so `entity_vector_length` is the encoder's dimension (384 for MiniLM, 768 for BERT-base);
- the candidate generators return, for a span, exactly the candidates the pipeline's sapbert_linker
  gives it (`span._.kb_ents`: same k, threshold, type filters, memory), with a prior from the SapBERT
  score: the cosine clipped to [0, 1], or (`temperature`) the softmax of the scores over the candidates.

spaCy passes these functions only the KB (and its vocab), so they find the sapbert_linker of the
pipeline that owns that vocab by its component name (`component`, "sapbert_linker" by default); the
linker must come before the entity_linker in the pipeline (it is usually frozen while the
entity_linker trains).
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable, Iterator, List, Optional, Sequence

import numpy
from spacy.kb import Candidate, InMemoryLookupKB, KnowledgeBase
from spacy.tokens import Doc, Span
from spacy.util import registry
from spacy.vocab import Vocab

from .errors import SapbertError
from .index import ConceptIndex
from .linker import SapbertLinker, live_linker
from .preprocess import resolve_gold_id

NAME_CHUNK = 100_000  # name vectors decoded at a time when averaging them per concept


def name_vectors(index: ConceptIndex, start: int, stop: int) -> numpy.ndarray:
    """The stored vectors of name rows [start, stop) as float32 (decoded from the faiss index, or the
    float16 re-scoring copy of an ivfpq index)."""
    if index.rerank is not None:
        return numpy.asarray(index.rerank[start:stop], dtype="float32")
    try:
        return index.vectors.reconstruct_n(start, stop - start)
    except RuntimeError as err:
        raise SapbertError(f"the {index.index_type!r} index cannot give back its vectors ({err}); build a flat one for the export") from err


def concept_vectors(index: ConceptIndex, chunk: int = NAME_CHUNK) -> numpy.ndarray:
    """One unit vector per concept row: the mean of its names' vectors, read `chunk` names at a time."""
    sums = numpy.zeros((len(index), index.dim), dtype="float32")
    offsets, owners = index.links.offsets, index.links.concepts
    for start in range(0, len(index.names), chunk):
        stop = min(start + chunk, len(index.names))
        vectors = name_vectors(index, start, stop)
        first, last = int(offsets[start]), int(offsets[stop])
        rows_of_pairs = numpy.repeat(numpy.arange(stop - start), numpy.diff(offsets[start : stop + 1]))
        numpy.add.at(sums, numpy.asarray(owners[first:last], "int64"), vectors[rows_of_pairs])
    norms = numpy.linalg.norm(sums, axis=1, keepdims=True)
    return sums / numpy.maximum(norms, 1e-12)


def lookup_kb(linker: SapbertLinker, vocab: Vocab) -> InMemoryLookupKB:
    """spaCy's InMemoryLookupKB of the linker's index: concepts (frequency = number of names, vector =
    `concept_vectors`) and every stored (normalized) name as an alias with equal priors over its concepts."""
    index = linker._require_index()
    kb = InMemoryLookupKB(vocab, entity_vector_length=index.dim)
    ids = list(index.ids)
    n_names = numpy.bincount(numpy.asarray(index.links.concepts, "int64"), minlength=len(ids))
    kb.set_entities(ids, n_names.astype("int64").tolist(), concept_vectors(index))
    offsets, owners = index.links.offsets, index.links.concepts
    for row, name in enumerate(index.names):
        members = owners[int(offsets[row]) : int(offsets[row + 1])]
        kb.add_alias(alias=name, entities=[ids[int(m)] for m in members], probabilities=[1.0 / len(members)] * len(members))
    return kb


def priors(scores: Sequence[float], temperature: Optional[float] = None) -> List[float]:
    """Prior probabilities from a mention's candidate scores: the scores clipped to [0, 1] (None), or
    their softmax at `temperature`, which spreads scores that sit close together near 1."""
    if temperature is None:
        return [min(max(score, 0.0), 1.0) for score in scores]
    if not scores:
        return []
    logits = numpy.asarray(scores, dtype="float64") / temperature
    weights = numpy.exp(logits - logits.max())
    return (weights / weights.sum()).tolist()


def span_candidates(
    kb: KnowledgeBase, linker: SapbertLinker, spans: Sequence[Span], temperature: Optional[float] = None
) -> List[List[Candidate]]:
    """For each span, the linker's candidates as spaCy `Candidate`s of `kb`, with `priors` of their scores.

    A candidate the KB does not hold is left out (a KB exported from another index would give vectors
    of other concepts): spaCy could not score it. A span of a label the linker does not link (its `labels`)
    gets none, as it gets no `kb_ents`.
    """
    strings = kb.vocab.strings
    linked = [row for row, span in enumerate(spans) if not linker.labels or span.label_ in linker.labels]
    hits_by_row = dict(zip(linked, linker.link_spans([spans[row] for row in linked])))
    result = []
    for row, span in enumerate(spans):
        hits = [(cid, score) for cid, score in hits_by_row.get(row, []) if kb.contains_entity(cid)]
        alias_hash = strings.add(span.text)
        result.append(
            [
                Candidate(kb, strings.add(cid), 0, kb.get_vector(cid), alias_hash, prior)
                for (cid, _), prior in zip(hits, priors([score for _, score in hits], temperature))
            ]
        )
    return result


def _check_temperature(temperature: Optional[float]) -> None:
    if temperature is not None and not temperature > 0:
        raise SapbertError(f"candidate generator: temperature={temperature!r} must be positive (or null: the scores clipped to [0, 1])")


@registry.misc("spacy-sapbert.CandidateGenerator.v1")
def candidate_generator(
    component: str = "sapbert_linker", temperature: Optional[float] = None
) -> Callable[[KnowledgeBase, Span], Iterable[Candidate]]:
    """`get_candidates` for spaCy's EntityLinker: the SapBERT candidates of one span (priors: see `priors`)."""
    _check_temperature(temperature)

    def get_candidates(kb: KnowledgeBase, span: Span) -> Iterable[Candidate]:
        return span_candidates(kb, live_linker(kb.vocab, component, span.doc), [span], temperature)[0]

    return get_candidates


@registry.misc("spacy-sapbert.CandidateBatchGenerator.v1")
def candidate_batch_generator(
    component: str = "sapbert_linker", temperature: Optional[float] = None
) -> Callable[[KnowledgeBase, Iterable[Span]], Iterable[Iterable[Candidate]]]:
    """`get_candidates_batch` for spaCy's EntityLinker: one encoder batch for the spans of a batch."""
    _check_temperature(temperature)

    def get_candidates_batch(kb: KnowledgeBase, spans: Iterable[Span]) -> Iterator[List[Candidate]]:
        spans = list(spans)
        return iter(span_candidates(kb, live_linker(kb.vocab, component, spans[0].doc if spans else None), spans, temperature))

    return get_candidates_batch


@registry.misc("spacy-sapbert.LinkerKB.v1")
def linker_kb(component: str = "sapbert_linker") -> Callable[[Vocab], KnowledgeBase]:
    """`kb_loader` for the EntityLinker's initialize: `lookup_kb` of the pipeline's sapbert_linker."""

    def load(vocab: Vocab) -> KnowledgeBase:
        return lookup_kb(live_linker(vocab, component), vocab)

    return load


def with_kb_gold_ids(doc: Doc, primary_id: Callable[[str], Optional[str]], counts: Counter) -> Doc:
    """`doc` with each entity's kb_id_ rewritten by `resolve_gold_id` (counted into `counts`; no id: "")."""
    ents = []
    for ent in doc.ents:
        kb_id, outcome = resolve_gold_id(ent.kb_id_, primary_id)
        counts[outcome] += 1
        ents.append(Span(doc, ent.start, ent.end, label=ent.label, kb_id=kb_id or ""))
    doc.ents = ents
    return doc
