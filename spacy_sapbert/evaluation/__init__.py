"""Benchmark evaluation with the BioSyn/SapBERT protocol, and the baselines it is compared with.

Modules, one job each: `queries` (a corpus's scored mentions), `dictionaries` (normalized names, the
biosyn protocol's extra names), `retrievers` (exact match, TF-IDF, the encoder through the component),
`index_cache` (encoded vocabularies reused between runs), `memory_tuning` (the mention memory's grid
search), `reranker_tuning` (a pipeline's re-ranker weight, chosen on dev), `ranks` (acc@k and MRR),
`end_to_end` (whole pipelines on raw text), `reports` (table and plot) and `benchmark` (one `evaluate`
run).

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

from .benchmark import System, run_benchmark, run_protocols
from .dictionaries import PROTOCOLS, missing_gold, normalized_concepts, training_names, with_extra_names
from .end_to_end import Entity, end_to_end_table, evaluate_end_to_end, gold_mention_doc, mention_finders, score_end_to_end
from .index_cache import build_encoder_index, index_cache, index_cache_key
from .memory_tuning import DEFAULT_MEMORY_GRID, MEMORY_GRIDS, memory_grid, tune_memory
from .queries import EvalMention, Preprocessing, mention_parts, mentions_from_documents, mentions_from_queries, read_corpus
from .ranks import KS, gold_rank, mention_rank, metrics_from_ranks, score_retriever
from .reports import markdown_table, model_label, plot_curves
from .reranker_tuning import DEFAULT_RERANK_WEIGHTS, tune_rerank_weight
from .retrievers import ExactMatchRetriever, LinkerRetriever, NormalizedBaseline, TfidfRetriever, evaluation_linker

__all__ = [
    "DEFAULT_MEMORY_GRID", "DEFAULT_RERANK_WEIGHTS", "Entity", "EvalMention", "ExactMatchRetriever", "KS",
    "LinkerRetriever", "MEMORY_GRIDS",
    "NormalizedBaseline", "PROTOCOLS", "Preprocessing", "System", "TfidfRetriever", "build_encoder_index",
    "end_to_end_table", "evaluate_end_to_end", "evaluation_linker", "gold_mention_doc", "gold_rank",
    "index_cache", "index_cache_key", "markdown_table", "memory_grid", "mention_finders", "mention_parts", "mention_rank",
    "mentions_from_documents", "mentions_from_queries", "metrics_from_ranks", "missing_gold", "model_label",
    "normalized_concepts", "plot_curves", "read_corpus", "run_benchmark", "run_protocols", "score_end_to_end",
    "score_retriever", "training_names", "tune_memory", "tune_rerank_weight", "with_extra_names",
]
