"""Benchmark evaluation with the BioSyn/SapBERT protocol, and the baselines it is compared with.

Queries are preprocessed as BioSyn did (abbreviations resolved from the document, then the
`Normalizer`: lowercase, punctuation to spaces, NCBI spell-check list); dictionary names get the same
normalization. The encoder systems are scored through the `sapbert_linker` component's own search
(`LinkerRetriever`), with the normalizer saved in its index, so every figure is that of a pipeline
built with the same settings (`build-index --remove-punctuation --spell-check ...`). A composite
mention (`A|B` gold) is split into parts and is a hit at k only when every part is; as in BioSyn's
scorer, a part is right when its prediction shares an id with the mention's gold set. A predicted
concept hits when any of its ids (primary or alternative, e.g. MEDIC AltDiseaseIDs) is in the gold
set (`A+B` gives {A, B}).

Two dictionary protocols: `strict` (vocabulary names only) and `biosyn` (vocabulary plus the
training (and dev) mentions as extra names of their gold concepts, as the published tables use).

With a mention memory (kNN-BioEL) the evaluated encoder runs a second time with the memory's votes
mixed into its concept scores; `tune_memory` chooses the mixture's settings by a grid search on the
corpus at hand, which must be a dev set.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc

from .abbreviations import expand_abbreviations, find_abbreviations
from .extras import require
from .index import (
    META_FILE,
    Candidate,
    ConceptIndex,
    check_vector_settings,
    encoder_settings,
    name_table,
    vocabulary_hash,
)
from .kb import Concept, KnowledgeBase
from .memory import MIXTURES, MemorySettings
from .normalizer import Normalizer
from .preprocess import gold_ids, is_cuiless, split_composite
from .readers.corpora import Document, Query, detect_corpus_format

KS = tuple(range(1, 11))
PROTOCOLS = ("strict", "biosyn")


@dataclass
class EvalMention:
    """One scored mention: its query strings as written (one, or one per composite part, abbreviations
    resolved), normalized later by the system that searches them, and its gold id set."""

    text: str
    gold: str
    queries: List[str]
    doc_id: str = ""

    @property
    def gold_set(self) -> set:
        return gold_ids(self.gold)


@dataclass
class Preprocessing:
    """The protocol's query handling: abbreviation resolution, then the `Normalizer` of names and queries."""

    lowercase: bool = True
    remove_punctuation: bool = True
    abbreviations: bool = True
    spell_check: Mapping[str, str] = field(default_factory=dict)

    @property
    def normalizer(self) -> Normalizer:
        return Normalizer(self.lowercase, self.remove_punctuation).with_spell_check(self.spell_check)


# queries ----------------------------------------------------------------------------------------


def mention_parts(text: str, gold: str, listed_parts: Sequence[str] = ()) -> List[str]:
    """The texts to search for one mention: the listed parts (BC5CDR), its composite split, or itself."""
    if "|" not in gold:
        return [text]
    n_ids = len([g for g in gold.split("|") if g.strip()])
    if listed_parts and len(listed_parts) == n_ids:
        return list(listed_parts)
    return [part for part, _ in split_composite(text, gold, pair_in_order=False)]


def mentions_from_documents(
    documents: Iterable[Document], prep: Preprocessing, labels: Optional[Iterable[str]] = None
) -> Tuple[List[EvalMention], int]:
    """Scored mentions of annotated documents, and how many had no concept (`-1`) and were left out."""
    wanted = set(labels) if labels else None
    mentions: List[EvalMention] = []
    cuiless = 0
    for document in documents:
        abbreviations = find_abbreviations(document.text) if prep.abbreviations else []
        for mention in document.mentions:
            if wanted is not None and mention.label not in wanted:
                continue
            if is_cuiless(mention.gold):
                cuiless += 1
                continue
            parts = mention_parts(mention.text, mention.gold, mention.parts)
            if abbreviations:
                parts = [expand_abbreviations(document.text, part, abbreviations) for part in parts]
            mentions.append(EvalMention(mention.text, mention.gold, parts, document.id))
    return mentions, cuiless


def mentions_from_queries(queries: Iterable[Query], prep: Preprocessing) -> Tuple[List[EvalMention], int]:
    """Scored mentions of query-only corpora (BioSyn .concept, XL-BEL): no document text to expand from."""
    mentions: List[EvalMention] = []
    cuiless = 0
    for query in queries:
        if is_cuiless(query.gold):
            cuiless += 1
            continue
        parts = mention_parts(query.mention, query.gold)
        mentions.append(EvalMention(query.mention, query.gold, parts, query.doc_id))
    return mentions, cuiless


# dictionaries -----------------------------------------------------------------------------------


def normalized_concepts(concepts: Iterable[Concept], normalizer: Normalizer) -> List[Concept]:
    """Concepts whose names went through the normalizer (for the string baselines and DHNS)."""
    out = []
    for concept in concepts:
        names = [n for n in (normalizer(name) for name in concept.names) if n]
        if names:
            out.append(Concept(concept.id, names[0], names[1:], concept.types, concept.xrefs, concept.alt_ids))
    return out


def training_names(mentions: Iterable[EvalMention], kb: KnowledgeBase) -> List[Tuple[str, str]]:
    """(concept id, mention text) for every single-concept training mention, the biosyn protocol's extra names."""
    out = []
    for mention in mentions:
        ids = mention.gold_set
        if len(ids) == 1 and len(mention.queries) == 1:
            concept = kb.get(next(iter(ids)))
            if concept is not None:
                out.append((concept.id, mention.queries[0]))
    return out


def with_extra_names(concepts: Sequence[Concept], extra: Iterable[Tuple[str, str]]) -> List[Concept]:
    """Copies of `concepts` with the extra (id, name) pairs appended as synonyms."""
    added: Dict[str, List[str]] = {}
    for concept_id, name in extra:
        added.setdefault(concept_id, []).append(name)
    return [
        Concept(c.id, c.name, c.synonyms + added[c.id], c.types, c.xrefs, c.alt_ids) if c.id in added else c
        for c in concepts
    ]


# retrievers -------------------------------------------------------------------------------------


class ExactMatchRetriever:
    """Baseline: the concepts having a name equal to the query string (score 1), else nothing."""

    name = "exact match"

    def __init__(self, concepts: Sequence[Concept]):
        self._by_name: Dict[str, List[str]] = {}
        for concept in concepts:
            for name in concept.names:
                ids = self._by_name.setdefault(name, [])
                if concept.id not in ids:
                    ids.append(concept.id)

    def rank(self, texts: Sequence[str], k: int) -> List[List[Candidate]]:
        return [[(cid, 1.0) for cid in self._by_name.get(text, [])[:k]] for text in texts]


# TF-IDF cosines are rounded to this many decimals before ranking (see TfidfRetriever.rank).
SCORE_DECIMALS = 6


class TfidfRetriever:
    """Baseline: cosine nearest neighbours over TF-IDF character 3-grams (scispaCy's candidate generator method)."""

    name = "tf-idf char 3-grams"

    def __init__(self, concepts: Sequence[Concept], chunk: int = 256):
        TfidfVectorizer = require("sklearn.feature_extraction.text").TfidfVectorizer

        self.concepts = list(concepts)
        self.ids = [concept.id for concept in self.concepts]
        names, self.links = name_table(self.concepts, Normalizer(lowercase=False))
        self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), dtype=numpy.float32)
        self.matrix = self.vectorizer.fit_transform(names).T.tocsr()
        self.chunk = chunk

    def rank(self, texts: Sequence[str], k: int) -> List[List[Candidate]]:
        """Concepts by their best name's cosine, best first. Equal scores are common (names that are word
        permutations of each other have the same 3-grams) and are ordered by name row, so the ranking
        does not depend on the CPU: numpy's argpartition leaves ties in a SIMD-dependent order, and the
        last float32 digit of a score can differ between code paths, hence the rounding."""
        depth = min(self.matrix.shape[1], 8 * k + 32)
        out: List[List[Candidate]] = []
        for start in range(0, len(texts), self.chunk):
            scores = (self.vectorizer.transform(texts[start : start + self.chunk]) @ self.matrix).toarray()
            scores = numpy.round(scores, SCORE_DECIMALS)
            floors = -numpy.partition(-scores, depth - 1, axis=1)[:, depth - 1]
            for row, floor in zip(scores, floors):
                candidates = numpy.flatnonzero(row >= max(floor, numpy.finfo(row.dtype).tiny))  # in name-row order
                order = candidates[numpy.argsort(-row[candidates], kind="stable")]
                out.append(self.links.concept_hits(row[order], order, k, self.ids))
        return out


class NormalizedBaseline:
    """A string baseline over normalized names and queries (the linker normalizes inside itself)."""

    def __init__(self, make: Callable[[Sequence[Concept]], object], normalizer: Normalizer, concepts: Sequence[Concept]):
        self.retriever = make(normalized_concepts(concepts, normalizer))
        self.normalizer = normalizer

    def rank(self, texts: Sequence[str], k: int) -> List[List[Candidate]]:
        return self.retriever.rank([self.normalizer.query(text) for text in texts], k)


def evaluation_linker(encoder, index: ConceptIndex, memory_settings: Optional[MemorySettings] = None):
    """The shipped `sapbert_linker` component over `encoder` and `index`, set up for scoring: it
    normalizes with the index's normalizer and returns max(KS) candidates per query, without threshold."""
    from spacy.vocab import Vocab

    from .linker import SapbertLinker

    linker = SapbertLinker(
        Vocab(),
        model=encoder.name,
        pooling=encoder.pooling,
        max_length=encoder.max_length,
        batch_size=encoder.batch_size,
        device=str(encoder.device),
        k=max(KS),
        max_entities_per_mention=max(KS),
        threshold=float("-inf"),
        lowercase=index.normalizer.lowercase,
        remove_punctuation=index.normalizer.remove_punctuation,
        normalize=index.normalize,
        index_type=index.index_type,
        use_long_form=False,  # the evaluation resolves abbreviations from the document itself
        **(memory_settings or MemorySettings()).to_dict(),
    )
    linker.encoder = encoder
    linker.index = index
    linker.normalizer = index.normalizer
    return linker


class LinkerRetriever:
    """An encoder system scored through the component's own search (`SapbertLinker.search_texts`);
    with `memory` (annotated (text, concept id) pairs) its mention memory is filled (kNN-BioEL)."""

    def __init__(
        self,
        name: str,
        encoder,
        index: ConceptIndex,
        memory: Sequence[Tuple[str, str]] = (),
        settings: Optional[MemorySettings] = None,
    ):
        self.name = name
        self.linker = evaluation_linker(encoder, index, settings)
        if memory:
            self.linker.add_mentions(memory)

    def rank(self, texts: Sequence[str], k: int) -> List[List[Candidate]]:
        return [hits[:k] for hits in self.linker.search_texts(texts)]

    def add_names(self, extra: Iterable[Tuple[str, str]]) -> None:
        """The biosyn protocol's extra names, added to the index (only the new names are encoded)."""
        encoder = self.linker.encoder
        self.linker.index.add_names(extra, lambda names: encoder.encode(names, progress=True))


# memory_mixture first: the published mixture comes first in grid order, so it wins ties
MEMORY_GRID: Dict[str, Sequence[Any]] = {
    "memory_mixture": MIXTURES,
    "memory_k": (1, 2, 4, 8, 16),
    "memory_weight": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9),
    "concept_temperature": (0.01, 0.02, 0.05, 0.1),
    "memory_temperature": (0.01, 0.05, 0.1, 0.5, 1.0),
}


def tune_memory(
    retriever: LinkerRetriever,
    mentions: Sequence[EvalMention],
    kb: KnowledgeBase,
    grid: Mapping[str, Sequence[Any]] = MEMORY_GRID,
    k: int = max(KS),
) -> List[Dict[str, Any]]:
    """Every combination of the grid's settings (the mixture among them) with its acc@1, acc@5 and MRR, best first.

    Best means highest acc@1, then acc@5, then MRR; ties keep grid order. Each query is encoded and
    searched once; only the mixture is recomputed per combination. Run it on a dev set only.
    """
    import itertools

    linker = retriever.linker
    if not linker.memory_active:
        from .errors import SapbertError

        raise SapbertError("tune_memory needs a linker whose mention memory has entries")
    normalized = {q: linker.normalizer.query(q) for m in mentions for q in m.queries}
    distinct = sorted(set(normalized.values()))
    concepts, votes = linker.retrieve(distinct, max(grid["memory_k"]))
    keys = list(grid)
    rows = []
    for values in itertools.product(*(grid[key] for key in keys)):
        settings = MemorySettings(**dict(zip(keys, values)))
        ranked = {q: settings.mix(hits, near)[:k] for q, hits, near in zip(distinct, concepts, votes)}
        ranks = [mention_rank([gold_rank(ranked[normalized[q]], m.gold_set, kb) for q in m.queries]) for m in mentions]
        metrics = metrics_from_ranks(ranks)
        rows.append({**settings.to_dict(), "acc@1": metrics["acc@1"], "acc@5": metrics["acc@5"], "mrr": metrics["mrr"]})
    return sorted(rows, key=lambda row: (-row["acc@1"], -row["acc@5"], -row["mrr"]))


# How build_encoder_index builds its indexes (the names are normalized by the index's Normalizer).
EVAL_INDEX = {"normalize": True, "index_type": "flat"}
# Part of the cache key of encoded vocabularies: raise it when an index format change alters what evaluation
# reads from a cached index. Format 8 added definitions, which evaluation does not read, so format 7 caches stay.
CACHE_INDEX_FORMAT = 7


def build_encoder_index(
    encoder,
    concepts: Sequence[Concept],
    cache_dir: Optional[Path] = None,
    vocabulary: Optional[str] = None,
    normalizer: Normalizer = Normalizer(),
) -> ConceptIndex:
    """The strict concept index for an encoder, reused from `cache_dir` when the same one was built before.

    The cache folder's name is `index_cache_key` of everything the vectors depend on: the encoder's
    fingerprint (weights and tokenizer), pooling, max_length, the index settings and the content of
    the concepts and the normalizer (lowercase, punctuation, spelling corrections). A cached index is
    checked against them again when it is read. `vocabulary`: vocabulary_hash(KnowledgeBase(concepts))
    when the caller has it already.
    """
    settings = {**encoder_settings(encoder), **normalizer.settings(), "normalize": EVAL_INDEX["normalize"]}
    merged: List[KnowledgeBase] = []

    def knowledge_base() -> KnowledgeBase:
        """The concepts merged by id, once for both the vocabulary hash and the build."""
        if not merged:
            merged.append(KnowledgeBase(concepts))
        return merged[0]

    def build() -> ConceptIndex:
        return ConceptIndex.build(
            knowledge_base(), lambda names: encoder.encode(names, progress=True), encoder=settings, normalizer=normalizer, **EVAL_INDEX
        )

    if not cache_dir:
        return build()
    vocabulary = vocabulary or vocabulary_hash(knowledge_base())
    path = Path(cache_dir) / index_cache_key(settings, vocabulary)
    if not (path / META_FILE).exists():
        index = build()
        index.to_disk(path)
        return index
    index = ConceptIndex.from_disk(path)
    rebuild = f"delete {path} to encode it again"
    check_vector_settings(
        index.settings, settings, what=f"the cached index in {path}", rebuild=rebuild,
        current_source="this run uses", encoder_source="this run's encoder has",
    )
    if index.vocabulary_hash != vocabulary or index.index_type != EVAL_INDEX["index_type"]:
        from .errors import IndexFormatError

        raise IndexFormatError(
            f"the cached index in {path} was built from the vocabulary {index.vocabulary_hash!r} "
            f"({index.index_type}) but this run's is {vocabulary!r} ({EVAL_INDEX['index_type']}); {rebuild}"
        )
    return index


@contextlib.contextmanager
def index_cache(cache_dir: Optional[Path]) -> Iterator[Path]:
    """`cache_dir`, or without one a temporary folder for one run, so that no strict index of a run
    (the encoder's, the memory system's, the tuning's) is encoded twice."""
    if cache_dir is not None:
        yield Path(cache_dir)
        return
    with tempfile.TemporaryDirectory(prefix="sapbert-eval-index-") as tmp:
        yield Path(tmp)


def index_cache_key(settings: Mapping, vocabulary: str) -> str:
    """The cache folder name of an index: a hash of its VECTOR_SETTINGS (encoder fingerprint, pooling,
    max_length, the normalizer's settings, normalize), the index type, the vocabulary_hash and the index format."""
    blob = json.dumps([CACHE_INDEX_FORMAT, dict(settings), EVAL_INDEX, vocabulary], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf8")).hexdigest()[:16]


# scoring ----------------------------------------------------------------------------------------


def gold_rank(candidates: Sequence[Candidate], gold: set, kb: KnowledgeBase) -> Optional[int]:
    """1-based rank of the first candidate sharing an id (primary or alternative) with `gold`, else None."""
    for rank, (cid, _) in enumerate(candidates, 1):
        concept = kb.get(cid)
        ids = concept.all_ids if concept is not None else [cid]
        if gold.intersection(ids):
            return rank
    return None


def mention_rank(part_ranks: Sequence[Optional[int]]) -> Optional[int]:
    """A composite mention ranks as its worst part; None when any part was not found."""
    if any(r is None for r in part_ranks):
        return None
    return max(part_ranks)  # type: ignore[type-var]


def metrics_from_ranks(ranks: Sequence[Optional[int]], ks: Sequence[int] = KS) -> Dict[str, float]:
    """acc@k for every k in `ks` and the mean reciprocal rank (0 for a miss)."""
    n = len(ranks)
    if n == 0:
        return {**{f"acc@{k}": 0.0 for k in ks}, "mrr": 0.0}
    out = {f"acc@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in ks}
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n
    return out


def score_retriever(
    retriever, mentions: Sequence[EvalMention], kb: KnowledgeBase, k: int = max(KS)
) -> Tuple[Dict[str, float], List[Optional[int]]]:
    """Metrics and per-mention ranks; every distinct query string is searched once."""
    distinct = sorted({q for m in mentions for q in m.queries})
    ranked = dict(zip(distinct, retriever.rank(distinct, k))) if distinct else {}
    ranks = [mention_rank([gold_rank(ranked[q], m.gold_set, kb) for q in m.queries]) for m in mentions]
    return metrics_from_ranks(ranks), ranks


def missing_gold(mentions: Iterable[EvalMention], kb: KnowledgeBase) -> Tuple[int, List[str]]:
    """How many mentions have no gold id in the vocabulary, and which gold ids are absent."""
    count = 0
    absent = set()
    for mention in mentions:
        ids = mention.gold_set
        lacking = {i for i in ids if i not in kb}
        absent |= lacking
        if lacking == ids:
            count += 1
    return count, sorted(absent)


# end to end -------------------------------------------------------------------------------------


class Entity(NamedTuple):
    """A gold mention or a predicted entity for end-to-end scoring: offsets, label and the ids it stands for
    (a gold's ids; a prediction's linked concept with its alternative ids; empty: no id)."""

    start: int
    end: int
    label: str
    ids: frozenset


def _prf(right_predictions: int, predictions: int, found_golds: int, golds: int) -> Dict[str, float]:
    precision = right_predictions / predictions if predictions else 0.0
    recall = found_golds / golds if golds else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tp": right_predictions,
        "fp": predictions - right_predictions,
        "fn": golds - found_golds,
    }


def _match_counts(golds: Sequence[Entity], predictions: Sequence[Entity], same: Callable[[Entity, Entity], bool]) -> Tuple[int, int]:
    """(predictions that match some gold, golds matched by some prediction) under `same`."""
    right = sum(1 for p in predictions if any(same(g, p) for g in golds))
    found = sum(1 for g in golds if any(same(g, p) for p in predictions))
    return right, found


def _same_span(g: Entity, p: Entity) -> bool:
    return (g.start, g.end) == (p.start, p.end)


def _overlap(g: Entity, p: Entity) -> bool:
    return g.start < p.end and p.start < g.end


def score_end_to_end(documents: Sequence[Tuple[Sequence[Entity], Sequence[Entity]]]) -> Dict[str, Any]:
    """Scores of (gold entities, predicted entities) per document; pure.

    - (span, id), strict: a prediction is right when a gold has its offsets and shares an id with it;
      golds without an id and predictions without a link take no part. Top-level keys.
    - (span, id), overlap: the same with any character overlap instead of equal offsets; precision
      counts the predictions that overlap a right gold, recall the golds that a right prediction overlaps.
    - ner: strict spans with the label, per label and over all labels (`micro`), every gold and every
      prediction taking part whether or not it has an id.
    """
    strict = [0, 0, 0, 0]
    overlap = [0, 0, 0, 0]
    ner: Dict[str, List[int]] = {}
    for golds, predictions in documents:
        linked_golds = [g for g in golds if g.ids]
        linked = [p for p in predictions if p.ids]
        for counts, same_place in ((strict, _same_span), (overlap, _overlap)):
            right, found = _match_counts(linked_golds, linked, lambda g, p: same_place(g, p) and bool(g.ids & p.ids))
            counts[0] += right
            counts[1] += len(linked)
            counts[2] += found
            counts[3] += len(linked_golds)
        for label in {e.label for e in golds} | {e.label for e in predictions}:
            label_golds = [g for g in golds if g.label == label]
            label_predictions = [p for p in predictions if p.label == label]
            right, found = _match_counts(label_golds, label_predictions, _same_span)
            for key in (label, "micro"):
                counts = ner.setdefault(key, [0, 0, 0, 0])
                counts[0] += right
                counts[1] += len(label_predictions)
                counts[2] += found
                counts[3] += len(label_golds)
    return {
        **_prf(*strict),
        "overlap": _prf(*overlap),
        "ner": {label: _prf(*counts) for label, counts in sorted(ner.items())},
    }


def gold_mention_doc(nlp, document: Document, label_map: Dict[str, str], wanted: Optional[set] = None) -> Doc:
    """The Doc of a document whose ents are its gold mentions of the `wanted` types (all when None), placed
    as `document_to_doc` places them, with labels mapped and no ids: linked as if a perfect NER had found them."""
    from spacy.tokens import Span

    from .readers.corpora import document_to_doc

    mentions = [m for m in document.mentions if wanted is None or m.label in wanted]
    doc = document_to_doc(nlp, dataclasses.replace(document, mentions=mentions))
    doc.ents = [Span(doc, ent.start, ent.end, label=label_map.get(ent.label_, ent.label_)) for ent in doc.ents]
    return doc


def mention_finders(nlp) -> List[str]:
    """The pipeline's components that set doc.ents (NER, entity ruler, dictionary matcher)."""
    return [name for name in nlp.pipe_names if "doc.ents" in nlp.get_pipe_meta(name).assigns]


def evaluate_end_to_end(
    nlp,
    documents: Sequence[Document],
    labels: Optional[Iterable[str]] = None,
    label_map: Optional[Dict[str, str]] = None,
    gold_mentions: bool = False,
) -> Dict[str, Any]:
    """Run a whole pipeline on raw document texts and score it against the gold mentions (score_end_to_end).

    A predicted id stands for its concept's primary and alternative ids, taken from the sapbert_linker
    that links the entity's label (there may be several); a gold id `A|B` for each of its parts, `-1`
    for none. Gold types are mapped to NER labels with `label_map` (default: ner_corpus's, NCBI-disease's
    types -> Disease), so NER scores compare like with like; `labels` keeps gold mentions of those types.
    `gold_mentions`: the components that find mentions are left out and the rest of the pipeline (linkers,
    an entity_linker) links the gold mentions: (span, id) recall is then linking accuracy.
    """
    from .ner_corpus import DEFAULT_LABEL_MAP
    from .pipeline import linker_for_label, require_linkers

    linkers = [linker for _, linker in require_linkers(nlp)]
    wanted = set(labels) if labels else None
    mapping = DEFAULT_LABEL_MAP if label_map is None else label_map
    if gold_mentions:
        with nlp.select_pipes(disable=mention_finders(nlp)):
            docs = list(nlp.pipe(gold_mention_doc(nlp, d, mapping, wanted) for d in documents))
    else:
        docs = list(nlp.pipe(d.text for d in documents))
    scored = []
    for document, doc in zip(documents, docs):
        golds = [
            Entity(m.start, m.end, mapping.get(m.label, m.label), frozenset() if is_cuiless(m.gold) else frozenset(gold_ids(m.gold)))
            for m in document.mentions
            if wanted is None or m.label in wanted
        ]
        predictions = []
        for ent in doc.ents:
            ids: frozenset = frozenset()
            if ent.kb_id_:
                linker = linker_for_label(linkers, ent.label_)
                concept = linker.concept(ent.kb_id_) if linker is not None else None
                ids = frozenset(concept.all_ids if concept is not None else [ent.kb_id_])
            predictions.append(Entity(ent.start_char, ent.end_char, ent.label_, ids))
        scored.append((golds, predictions))
    return score_end_to_end(scored)


def end_to_end_table(scores: Dict[str, Any]) -> str:
    """A Markdown table of score_end_to_end's result: (span, id) strict and overlap, then NER per label."""
    rows = [("(span, id), strict", scores), ("(span, id), overlap", scores["overlap"])]
    rows += [(f"NER {label}", ner) for label, ner in scores["ner"].items()]
    lines = ["| scored | P | R | F1 | tp | fp | fn |", "|---|---|---|---|---|---|---|"]
    for name, s in rows:
        lines.append(
            f"| {name} | {100 * s['precision']:.1f} | {100 * s['recall']:.1f} | {100 * s['f1']:.1f} | {s['tp']} | {s['fp']} | {s['fn']} |"
        )
    return "\n".join(lines)


# the benchmark run ------------------------------------------------------------------------------


@dataclass
class System:
    """A named way to rank concepts; `make` builds its retriever for a dictionary (list of concepts)."""

    name: str
    make: Callable[[Sequence[Concept]], object]


def run_protocols(
    systems: Sequence[System],
    concepts: Sequence[Concept],
    mentions: Sequence[EvalMention],
    extra_names: Sequence[Tuple[str, str]],
    protocols: Sequence[str] = PROTOCOLS,
    progress: bool = True,
) -> Dict[str, Dict[str, Dict[str, float]]]:
    """{system: {protocol: metrics}} with every system on the same mentions and dictionaries."""
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown:
        from .errors import SapbertError

        raise SapbertError(f"unknown protocol(s) {unknown}; choose from {list(PROTOCOLS)}")
    kb = KnowledgeBase(concepts)
    results: Dict[str, Dict[str, Dict[str, float]]] = {}
    steps = [(s, p) for s in systems for p in protocols]
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc="evaluating", unit="run")
    retrievers: Dict[str, object] = {}
    for system, protocol in steps:
        retriever = retrievers.get(system.name)
        if protocol == "strict" or retriever is None:
            retriever = system.make(concepts)
        if protocol == "biosyn":
            if hasattr(retriever, "add_names"):
                retriever.add_names(extra_names)  # only the new names are encoded
            else:
                retriever = system.make(with_extra_names(concepts, extra_names))
        retrievers[system.name] = retriever
        metrics, _ = score_retriever(retriever, mentions, kb)
        results.setdefault(system.name, {})[protocol] = metrics
    return results


def markdown_table(report: Mapping) -> str:
    """The report's results as a Markdown table: one row per system and protocol."""
    lines = [
        f"{report.get('title', 'evaluation')}: {report['n_mentions']} mentions"
        f" ({report['n_missing_gold']} with no gold id in the vocabulary{' left out' if report.get('reachable_only') else ''}, "
        f"{report['n_cuiless']} without concept left out)",
        "",
        "| system | protocol | acc@1 | acc@5 | acc@10 | MRR |",
        "|---|---|---|---|---|---|",
    ]
    for system, by_protocol in report["results"].items():
        for protocol, m in by_protocol.items():
            lines.append(
                f"| {system} | {protocol} | {100 * m['acc@1']:.1f} | {100 * m['acc@5']:.1f} | "
                f"{100 * m['acc@10']:.1f} | {m['mrr']:.3f} |"
            )
    return "\n".join(lines)


def plot_curves(report: Mapping, path: os.PathLike) -> None:
    """A PNG of acc@k against k, one line per system and protocol."""
    require("matplotlib").use("Agg")
    plt = require("matplotlib.pyplot")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, by_protocol in report["results"].items():
        for protocol, m in by_protocol.items():
            ks = sorted(int(key.split("@")[1]) for key in m if key.startswith("acc@"))
            ax.plot(ks, [100 * m[f"acc@{k}"] for k in ks], marker="o", label=f"{system} ({protocol})")
    ax.set_xlabel("k")
    ax.set_ylabel("acc@k (%)")
    ax.set_title(report.get("title", "evaluation"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    from .io import atomic_write

    atomic_write(Path(path), lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)


def read_corpus(path: Path, corpus_format: str, prep: Preprocessing, labels: Optional[Sequence[str]] = None):
    """(scored mentions, cui-less count, documents or None) of a corpus file."""
    from .readers.corpora import read_biosyn_concepts, read_pubtator, read_xlbel

    if corpus_format == "pubtator":
        documents = list(read_pubtator(path))
        mentions, cuiless = mentions_from_documents(documents, prep, labels)
        return mentions, cuiless, documents
    readers = {"biosyn": read_biosyn_concepts, "xlbel": read_xlbel}
    if corpus_format not in readers:
        from .errors import SapbertError

        raise SapbertError(f"corpus format {corpus_format!r} is not supported; choose from pubtator, biosyn, xlbel")
    queries = [q for q in readers[corpus_format](path) if not labels or q.label in labels]
    mentions, cuiless = mentions_from_queries(queries, prep)
    return mentions, cuiless, None


def model_label(model: str) -> str:
    """A readable system name: the hub name, or the folder name (with its parent when that is generic)."""
    from .encoder import offline_default_model

    path = Path(model)
    if not path.is_dir():
        return model
    default = offline_default_model()
    if default and path.resolve() == Path(default).resolve():
        return "all-MiniLM-L6-v2"
    return f"{path.parent.name}/{path.name}" if path.name in ("model", "encoder") else path.name


def run_benchmark(
    corpus: Path,
    vocabularies: Sequence[Tuple[Path, str, Mapping]],
    *,
    model: Optional[str],
    pooling: str = "cls",
    max_length: int = 25,
    batch_size: int = 128,
    device: str = "auto",
    corpus_format: str = "auto",
    labels: Optional[Sequence[str]] = None,
    train: Sequence[Path] = (),
    protocols: Sequence[str] = PROTOCOLS,
    baselines: bool = False,
    baseline_model: Optional[str] = None,
    baseline_pooling: Optional[str] = None,
    prep: Optional[Preprocessing] = None,
    cache_dir: Optional[Path] = None,
    title: Optional[str] = None,
    memory: Sequence[Path] = (),
    memory_settings: Optional[MemorySettings] = None,
    tune: bool = False,
    backend: str = "torch",
    reachable_only: bool = False,
) -> dict:
    """Evaluate an encoder (and, with `baselines`, exact match, TF-IDF and the untuned encoder) on one corpus.

    `memory`: annotated corpora whose mentions fill a mention memory; the encoder is then also run
    with it (`memory_settings`, default the paper's), or, with `tune`, with the settings that
    `tune_memory` finds best on this corpus (a dev set). `backend`: how the evaluated encoder runs
    (torch, onnx, onnx-int8); the untuned baseline encoder runs on torch. `reachable_only`: score only
    the mentions with a gold id in the vocabulary (an open subset, e.g. XL-BEL over open ontologies);
    the others are counted in the report, never silently dropped.
    """
    from .encoder import Encoder, default_pooling
    from .readers import read_vocabularies

    prep = prep or Preprocessing()
    normalizer = prep.normalizer
    corpus_format = detect_corpus_format(corpus) if corpus_format == "auto" else corpus_format
    kb = KnowledgeBase(read_vocabularies(vocabularies))
    concepts = list(kb)
    mentions, cuiless, _ = read_corpus(corpus, corpus_format, prep, labels)
    extra: List[Tuple[str, str]] = []
    for path in train:
        train_mentions, _, _ = read_corpus(path, detect_corpus_format(path), prep, labels)
        # training mentions become names as they are searched: query-normalized (spelling corrected)
        extra += [(concept_id, normalizer.query(text)) for concept_id, text in training_names(train_mentions, kb)]
    n_missing, absent = missing_gold(mentions, kb)
    if reachable_only:
        mentions = [m for m in mentions if any(i in kb for i in m.gold_set)]
    memory_mentions: List[Tuple[str, str]] = []
    for path in memory:
        memory_corpus, _, _ = read_corpus(path, detect_corpus_format(path), prep, labels)
        memory_mentions += [(text, concept_id) for concept_id, text in training_names(memory_corpus, kb)]

    vocabulary = vocabulary_hash(kb)  # of the concepts as read; the normalizer is part of the cache key

    encoders: Dict[Tuple[str, str, str], Encoder] = {}

    def encoder_retriever(
        name: str, model_name: str, model_pooling: str, memory_mentions=(), settings=None, model_backend: str = "torch"
    ):
        """A function dictionary -> LinkerRetriever; each model is loaded once."""
        key = (model_name, model_pooling, model_backend)
        if key not in encoders:
            encoders[key] = Encoder(
                model_name, pooling=model_pooling, max_length=max_length, batch_size=batch_size, device=device,
                backend=model_backend,
            )
        encoder = encoders[key]

        def make(dictionary: Sequence[Concept]) -> LinkerRetriever:
            known = vocabulary if dictionary is concepts else None
            index = build_encoder_index(encoder, dictionary, cache, known, normalizer)
            return LinkerRetriever(name, encoder, index, memory_mentions, settings)

        return make

    def encoder_system(name: str, model_name: str, model_pooling: str, model_backend: str = "torch") -> System:
        return System(name, encoder_retriever(name, model_name, model_pooling, model_backend=model_backend))

    label = model_label(model) + (f" ({backend})" if backend != "torch" else "") if model else ""

    def baseline_system(retriever_class) -> System:
        return System(retriever_class.name, lambda dictionary: NormalizedBaseline(retriever_class, normalizer, dictionary))

    with index_cache(cache_dir) as cache:
        systems: List[System] = []
        if baselines:
            systems += [baseline_system(ExactMatchRetriever), baseline_system(TfidfRetriever)]
            if baseline_model and (model is None or Path(baseline_model).resolve() != Path(model).resolve()):
                pooling_ = baseline_pooling or default_pooling(baseline_model)
                systems.append(encoder_system(f"untuned {model_label(baseline_model)}", baseline_model, pooling_))
        if model:
            systems.append(encoder_system(label, model, pooling, backend))
        memory_report = None
        if model and memory_mentions:
            settings = memory_settings or MemorySettings()
            grid_rows: List[Dict[str, Any]] = []
            if tune:
                tuning = encoder_retriever("tuning", model, pooling, memory_mentions, settings, backend)(concepts)
                grid_rows = tune_memory(tuning, mentions, kb)
                best = grid_rows[0]
                settings = MemorySettings(**{key: best[key] for key in MEMORY_GRID})
            name = f"{label} + memory" + (" (tuned here)" if tune else "")
            systems.append(System(name, encoder_retriever(name, model, pooling, memory_mentions, settings, backend)))
            memory_report = {
                "corpora": [str(p) for p in memory],
                "n_entries": len(set(memory_mentions)),
                "settings": settings.to_dict(),
                "tuned_on_this_corpus": tune,
                "grid": grid_rows,
            }
        results = run_protocols(systems, concepts, mentions, extra, protocols)
    return {
        "title": title or Path(corpus).name,
        "corpus": str(corpus),
        "corpus_format": corpus_format,
        "labels": list(labels or []),
        "vocabularies": [str(p) for p, _, _ in vocabularies],
        "n_concepts": len(concepts),
        "n_mentions": len(mentions),
        "n_cuiless": cuiless,
        "n_missing_gold": n_missing,
        "reachable_only": reachable_only,
        "absent_gold_ids": absent,
        "n_extra_names_biosyn": len(extra),
        "train": [str(p) for p in train],
        "preprocessing": {
            "lowercase": prep.lowercase,
            "remove_punctuation": prep.remove_punctuation,
            "abbreviations": prep.abbreviations,
            "spell_check_entries": len(prep.spell_check),
        },
        "model": model,
        "pooling": pooling,
        "memory": memory_report,
        "results": results,
    }
