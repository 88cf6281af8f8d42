"""Evaluation queries: the scored mentions of a corpus, preprocessed as BioSyn did."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..abbreviations import expand_abbreviations, find_abbreviations
from ..context import MentionInContext
from ..errors import SapbertError
from ..normalizer import Normalizer
from ..preprocess import gold_ids, is_cuiless, split_composite
from ..readers.corpora import Document, Query


@dataclass
class EvalMention:
    """One scored mention: its query strings as written (one, or one per composite part, abbreviations
    resolved), normalized later by the system that searches them, its gold id set, and where it was
    written (`where`, for a re-ranker that reads context; None for query-only corpora)."""

    text: str
    gold: str
    queries: List[str]
    doc_id: str = ""
    where: Optional[MentionInContext] = None

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
                parts = [expand_abbreviations(document.text, part, abbreviations, at=mention.start) for part in parts]
            where = MentionInContext(document.text, mention.start, mention.end)
            mentions.append(EvalMention(mention.text, mention.gold, parts, document.id, where))
    return mentions, cuiless


def mentions_from_queries(
    queries: Iterable[Query], prep: Preprocessing, split_composites: bool = True
) -> Tuple[List[EvalMention], int]:
    """Scored mentions of query-only corpora (BioSyn .concept, XL-BEL): no document text to expand from.
    `split_composites` False: a gold "C1|C2" names the concepts any one of which is right (XL-BEL, as SapBERT scores
    it), and the mention is searched whole, never split into composite parts."""
    mentions: List[EvalMention] = []
    cuiless = 0
    for query in queries:
        if is_cuiless(query.gold):
            cuiless += 1
            continue
        parts = mention_parts(query.mention, query.gold) if split_composites else [query.mention]
        mentions.append(EvalMention(query.mention, query.gold, parts, query.doc_id))
    return mentions, cuiless


def corpus_labels(documents: Optional[Iterable[Document]]) -> Set[str]:
    """The mention labels (types) of a corpus's documents; empty for a format read without documents."""
    return {mention.label for document in documents or () for mention in document.mentions}


def no_mentions_error(
    source: object, labels: Optional[Sequence[str]] = None, reachable_only: bool = False, present: Iterable[str] = ()
) -> SapbertError:
    """The error for a corpus that leaves nothing to score or use: an accuracy of 0 of 0 mentions means nothing.
    `present`: the labels the corpus does have, named when `labels` kept none of them."""
    reasons = ([f"with the labels {list(labels)}"] if labels else []) + (["whose gold id is in the vocabulary"] if reachable_only else [])
    its_labels = f" (its labels: {sorted(present)})" if labels and present else ""
    return SapbertError(f"{source}: no gold mention{' ' + ' and '.join(reasons) if reasons else ''}{its_labels}; check the corpus, its format and --label")


def read_corpus(path: Path, corpus_format: str, prep: Preprocessing, labels: Optional[Sequence[str]] = None):
    """(scored mentions, cui-less count, documents or None) of a corpus file."""
    from ..readers.corpora import read_biosyn_concepts, read_pubtator, read_xlbel

    if corpus_format == "pubtator":
        documents = list(read_pubtator(path))
        mentions, cuiless = mentions_from_documents(documents, prep, labels)
        return mentions, cuiless, documents
    readers = {"biosyn": read_biosyn_concepts, "xlbel": read_xlbel}
    if corpus_format not in readers:
        from ..errors import SapbertError

        raise SapbertError(f"corpus format {corpus_format!r} is not supported; choose from pubtator, biosyn, xlbel")
    queries = [q for q in readers[corpus_format](path) if not labels or q.label in labels]
    mentions, cuiless = mentions_from_queries(queries, prep, split_composites=corpus_format != "xlbel")
    return mentions, cuiless, None
