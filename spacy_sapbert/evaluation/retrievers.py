"""The ranked systems: exact match and TF-IDF baselines, and the encoder scored through the sapbert_linker."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, List, Optional, Sequence, Tuple, Union

import numpy

from ..context import MentionInContext
from ..extras import require
from ..index import Candidate, ConceptIndex, name_table
from ..kb import Concept
from ..memory import MemorySettings
from ..normalizer import Normalizer
from .dictionaries import normalized_concepts, with_extra_names
from .ranks import KS

if TYPE_CHECKING:
    from ..reranker import Reranker


class ExactMatchRetriever:
    """Baseline: the concepts having a name equal to the query string (score 1) in the index's TIE_ORDER, else nothing."""

    name = "exact match"

    def __init__(self, concepts: Sequence[Concept], added: Sequence[Tuple[str, str]] = ()):
        self.concepts = list(concepts)
        self.ids = [concept.id for concept in self.concepts]
        names, self.links = name_table(self.concepts, Normalizer(lowercase=False), added)
        self.rows = {name: row for row, name in enumerate(names)}

    def add_names(self, extra: Iterable[Tuple[str, str]]) -> None:
        """The biosyn protocol's extra (id, name) pairs, first on their names as the encoder's index puts them."""
        extra = list(extra)
        self.__init__(with_extra_names(self.concepts, extra), extra)

    def rank(self, texts: Sequence[str], k: int) -> List[List[Candidate]]:
        rows = [self.rows.get(text) for text in texts]
        return [[] if row is None else [(self.ids[c], 1.0) for c in self.links.concepts_of(row)[:k]] for row in rows]


# TF-IDF cosines are rounded to this many decimals before ranking (see TfidfRetriever.rank).
SCORE_DECIMALS = 6


class TfidfRetriever:
    """Baseline: cosine nearest neighbours over TF-IDF character 3-grams (scispaCy's candidate generator method)."""

    name = "tf-idf char 3-grams"

    def __init__(self, concepts: Sequence[Concept], chunk: int = 256, added: Sequence[Tuple[str, str]] = ()):
        TfidfVectorizer = require("sklearn.feature_extraction.text").TfidfVectorizer

        self.concepts = list(concepts)
        self.ids = [concept.id for concept in self.concepts]
        names, self.links = name_table(self.concepts, Normalizer(lowercase=False), added)
        self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), dtype=numpy.float32)
        self.matrix = self.vectorizer.fit_transform(names).T.tocsr()
        self.chunk = chunk

    def add_names(self, extra: Iterable[Tuple[str, str]]) -> None:
        """The biosyn protocol's extra (id, name) pairs, first on their names as the encoder's index puts them (the
        TF-IDF weights are fitted again over all names)."""
        extra = list(extra)
        self.__init__(with_extra_names(self.concepts, extra), self.chunk, extra)

    def rank(self, texts: Sequence[str], k: int) -> List[List[Candidate]]:
        """Concepts by their best name's cosine, best first. Equal scores are common (names that are word
        permutations of each other have the same 3-grams) and are ordered by name row, so the ranking
        does not depend on the CPU: numpy's argpartition leaves ties in a SIMD-dependent order, and the
        last float32 digit of a score can differ between code paths, hence the rounding."""
        n_names = self.matrix.shape[1]
        first_depth = min(n_names, 8 * k + 32)
        out: List[List[Candidate]] = []
        for start in range(0, len(texts), self.chunk):
            scores = (self.vectorizer.transform(texts[start : start + self.chunk]) @ self.matrix).toarray()
            scores = numpy.round(scores, SCORE_DECIMALS)
            floors = -numpy.partition(-scores, first_depth - 1, axis=1)[:, first_depth - 1]  # one pass for the chunk
            for row, floor in zip(scores, floors):
                depth = first_depth
                while True:  # names of the same concepts may fill the first depth: look deeper until k concepts
                    candidates = numpy.flatnonzero(row >= max(floor, numpy.finfo(row.dtype).tiny))  # in name-row order
                    order = candidates[numpy.argsort(-row[candidates], kind="stable")]
                    hits = self.links.concept_hits(row[order], order, k, self.ids)
                    if len(hits) >= k or depth == n_names or len(candidates) < depth:
                        break
                    depth = min(n_names, depth * 4)
                    floor = -numpy.partition(-row, depth - 1)[depth - 1]
                out.append(hits)
        return out


class NormalizedBaseline:
    """A string baseline over normalized names and queries (the linker normalizes inside itself)."""

    def __init__(self, make: Callable[[Sequence[Concept]], object], normalizer: Normalizer, concepts: Sequence[Concept]):
        self.retriever = make(normalized_concepts(concepts, normalizer))
        self.normalizer = normalizer

    def rank(self, texts: Sequence[str], k: int) -> List[List[Candidate]]:
        return self.retriever.rank([self.normalizer.query(text) for text in texts], k)

    def add_names(self, extra: Iterable[Tuple[str, str]]) -> None:
        """The biosyn protocol's extra (id, name) pairs, normalized as the concepts' names are."""
        self.retriever.add_names([(concept_id, key) for concept_id, key in ((i, self.normalizer(n)) for i, n in extra) if key])


def evaluation_linker(encoder, index: ConceptIndex, memory_settings: Optional[MemorySettings] = None):
    """The shipped `sapbert_linker` component over `encoder` and `index`, set up for scoring: it
    normalizes with the index's normalizer and returns max(KS) candidates per query, without threshold."""
    from spacy.vocab import Vocab

    from ..linker import SapbertLinker

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
    with `memory` (annotated (text, concept id) pairs) its mention memory is filled (kNN-BioEL), with
    `reranker` (a re-ranker folder, or a loaded `Reranker` that several retrievers share) the component re-orders
    its candidates with it, its logit times `rerank_weight`."""

    def __init__(
        self,
        name: str,
        encoder,
        index: ConceptIndex,
        memory: Sequence[Tuple[str, str]] = (),
        settings: Optional[MemorySettings] = None,
        reranker: Optional[Union[str, Reranker]] = None,
        rerank_weight: float = 1.0,
    ):
        self.name = name
        self.linker = evaluation_linker(encoder, index, settings)
        if memory:
            self.linker.add_mentions(memory)
        if reranker:
            self.linker.set_reranker(reranker)
            self.linker.rerank_weight = rerank_weight

    @property
    def reads_context(self) -> bool:
        """Whether its re-ranker reads the words around a mention (then `rank` wants `contexts`)."""
        return bool(self.linker.reranker is not None and self.linker.reranker.context_words)

    def rank(self, texts: Sequence[str], k: int, contexts: Optional[Sequence[Optional[MentionInContext]]] = None) -> List[List[Candidate]]:
        return [hits[:k] for hits in self.linker.search_texts(texts, contexts=contexts)]

    def add_names(self, extra: Iterable[Tuple[str, str]]) -> None:
        """The biosyn protocol's extra names, added to the index (only the new names are encoded); an id the
        index lacks becomes a new concept."""
        encoder = self.linker.encoder
        self.linker.index.add_names(extra, lambda names: encoder.encode(names, progress=True), new_concepts=True)
