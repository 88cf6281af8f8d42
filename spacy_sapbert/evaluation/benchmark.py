"""One evaluation run: every system under every protocol on one corpus (`run_benchmark`, the `evaluate` command)."""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import SapbertError
from ..index import vocabulary_hash
from ..kb import Concept, KnowledgeBase
from ..memory import MemorySettings
from ..readers.corpora import detect_corpus_format
from .dictionaries import PROTOCOLS, default_protocols, missing_gold, training_names, with_extra_names
from .index_cache import build_encoder_index, index_cache
from .memory_tuning import DEFAULT_MEMORY_GRID, memory_grid, tune_memory
from .queries import EvalMention, Preprocessing, corpus_labels, no_mentions_error, read_corpus
from .ranks import score_retriever
from .reports import model_label
from .retrievers import ExactMatchRetriever, LinkerRetriever, NormalizedBaseline, TfidfRetriever


@dataclass
class System:
    """A named way to rank concepts; `make` builds its retriever for a dictionary (list of concepts).

    `protocols`: the protocols it runs under (None: all). Systems that share a name fill one row,
    e.g. the memory with the settings chosen under each protocol.
    """

    name: str
    make: Callable[[Sequence[Concept]], object]
    protocols: Optional[Sequence[str]] = None


def run_protocols(
    systems: Sequence[System],
    concepts: Sequence[Concept],
    mentions: Sequence[EvalMention],
    extra_names: Sequence[Tuple[str, str]],
    protocols: Sequence[str] = PROTOCOLS,
    progress: bool = True,
    misses: Optional[list] = None,
) -> Dict[str, Dict[str, Dict[str, float]]]:
    """{system: {protocol: metrics}} with every system on the same mentions and dictionaries. With `misses`
    (a list), every mention a system does not rank first is appended, named by system and protocol."""
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown:
        from ..errors import SapbertError

        raise SapbertError(f"unknown protocol(s) {unknown}; choose from {list(PROTOCOLS)}")
    kb = KnowledgeBase(concepts)
    results: Dict[str, Dict[str, Dict[str, float]]] = {}
    steps = [(s, p) for s in systems for p in protocols if s.protocols is None or p in s.protocols]
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc="evaluating", unit="run")
    current, retriever = None, None  # a system's retriever lives while its protocols run (system after system)
    for system, protocol in steps:
        if protocol == "strict" or system is not current:
            current, retriever = system, None  # the last one's index and memory go before the next is built
            retriever = system.make(concepts)
        if protocol == "biosyn":
            if hasattr(retriever, "add_names"):
                retriever.add_names(extra_names)  # only the new names are encoded
            else:
                retriever = system.make(with_extra_names(concepts, extra_names))
        found: Optional[list] = [] if misses is not None else None
        metrics, _ = score_retriever(retriever, mentions, kb, misses=found)
        if misses is not None:
            misses += [{"system": system.name, "protocol": protocol, **record} for record in found]
        results.setdefault(system.name, {})[protocol] = metrics
    return results


def check_no_leak(option: str, path: Path, documents, corpus: Path, scored_documents) -> None:
    """Refuse a --train or --memory corpus that is the scored corpus itself (its mentions would be names of the
    dictionary, or memory entries, of the very mentions scored: near 100%, silently); warn of documents the two share
    (by id, where both have documents: a training split holding test abstracts)."""
    if Path(path).resolve() == Path(corpus).resolve():
        raise SapbertError(f"{option} {path} is the corpus being scored: its gold mentions would score themselves; give a training split")
    if documents is None or scored_documents is None:
        return
    shared = sorted({d.id for d in documents} & {d.id for d in scored_documents})
    if shared:
        from ..readers.corpora import CorpusWarning

        warnings.warn(
            f"{option} {path} shares {len(shared)} document(s) with the scored corpus {corpus} (e.g. {shared[0]}): their gold "
            "mentions help score themselves", CorpusWarning, stacklevel=3,
        )


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
    protocols: Optional[Sequence[str]] = None,
    baselines: bool = False,
    baseline_model: Optional[str] = None,
    baseline_pooling: Optional[str] = None,
    prep: Optional[Preprocessing] = None,
    cache_dir: Optional[Path] = None,
    title: Optional[str] = None,
    memory: Sequence[Path] = (),
    memory_settings: Optional[Union[MemorySettings, Mapping[str, MemorySettings]]] = None,
    tune: bool = False,
    grid_name: str = DEFAULT_MEMORY_GRID,
    backend: str = "torch",
    reachable_only: bool = False,
    reranker: Optional[str] = None,
    rerank_weights: Sequence[float] = (1.0,),
    rerank_backend: str = "torch",
    misses: Optional[list] = None,
) -> dict:
    """Evaluate an encoder (and, with `baselines`, exact match, TF-IDF and the untuned encoder) on one corpus.

    `memory`: annotated corpora whose mentions fill a mention memory; the encoder is then also run
    with it (`memory_settings`: one for every protocol or one per protocol; default the paper's), or,
    with `tune`, with the settings that `tune_memory` finds best on this corpus (a dev set) under each
    protocol, over the grid `grid_name` names (memory_tuning.MEMORY_GRIDS). `backend`: how the evaluated encoder runs
    (torch, onnx, onnx-int8); the untuned baseline encoder runs on torch. `reachable_only`: score only
    the mentions with a gold id in the vocabulary (an open subset, e.g. XL-BEL over open ontologies);
    the others are counted in the report, never silently dropped. `reranker`: a re-ranker folder; the
    model is also run with it in the component (its top k re-ordered, its logit times the component's
    `rerank_weight`), one more row (and one more with the memory) for each of `rerank_weights`. The re-ranker is
    loaded once (run as `rerank_backend` says) and each (mention, candidate) pair scored once for all of them.
    `misses`: a list that receives every mention a system does not rank first (`run_protocols`). `protocols`: None
    runs strict, and biosyn too when there are `train` corpora; biosyn without them is an error.
    """
    from ..encoder import Encoder, default_pooling
    from ..linker import memory_entries
    from ..readers import read_vocabularies
    from ..reranker import Reranker, check_reranker_head

    protocols = list(protocols or default_protocols(train))
    if "biosyn" in protocols and not train:  # its index would hold the vocabulary's names only: the strict row again
        raise SapbertError("the biosyn protocol adds the mentions of training corpora to the dictionary; give them with --train")
    grid = memory_grid(grid_name)
    prep = prep or Preprocessing()
    normalizer = prep.normalizer
    corpus_format = detect_corpus_format(corpus) if corpus_format == "auto" else corpus_format
    kb = KnowledgeBase(read_vocabularies(vocabularies))
    concepts = list(kb)
    mentions, cuiless, scored_documents = read_corpus(corpus, corpus_format, prep, labels)
    extra: List[Tuple[str, str]] = []
    for path in train:
        train_mentions, _, documents = read_corpus(path, detect_corpus_format(path), prep, labels)
        check_no_leak("--train", path, documents, corpus, scored_documents)
        names = training_names(train_mentions, kb, new_concepts=True)
        if not names:  # the biosyn rows would silently be the strict ones
            raise no_mentions_error(f"--train {path}", labels, present=corpus_labels(documents))
        # training mentions become names as they are searched: query-normalized (spelling corrected)
        extra += [(concept_id, normalizer.query(text)) for concept_id, text in names]
    n_missing, absent = missing_gold(mentions, kb)
    if reachable_only:
        mentions = [m for m in mentions if any(i in kb for i in m.gold_set)]
    if not mentions:
        raise no_mentions_error(corpus, labels, reachable_only)
    memory_mentions: List[Tuple[str, str]] = []
    for path in memory:
        memory_corpus, _, documents = read_corpus(path, detect_corpus_format(path), prep, labels)
        check_no_leak("--memory", path, documents, corpus, scored_documents)
        remembered = [(text, concept_id) for concept_id, text in training_names(memory_corpus, kb)]
        if not remembered:  # the memory rows would silently be missing
            raise no_mentions_error(f"--memory {path}", labels, reachable_only=True, present=corpus_labels(documents))
        memory_mentions += remembered

    vocabulary = vocabulary_hash(kb)  # of the concepts as read; the normalizer is part of the cache key

    encoders: Dict[Tuple[str, str, str], Encoder] = {}

    def encoder_retriever(
        name: str, model_name: str, model_pooling: str, memory_mentions=(), settings=None, model_backend: str = "torch",
        reranker_and_weight: Optional[Tuple[Reranker, float]] = None,
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
            return LinkerRetriever(name, encoder, index, memory_mentions, settings, *(reranker_and_weight or ()))

        return make

    def encoder_system(name: str, model_name: str, model_pooling: str, model_backend: str = "torch") -> System:
        return System(name, encoder_retriever(name, model_name, model_pooling, model_backend=model_backend))

    label = model_label(model) + (f" ({backend})" if backend != "torch" else "") if model else ""

    def baseline_system(retriever_class) -> System:
        return System(retriever_class.name, lambda dictionary: NormalizedBaseline(retriever_class, normalizer, dictionary))

    loaded = Reranker(reranker, device=device, backend=rerank_backend) if model and reranker else None
    if loaded is not None:
        check_reranker_head(loaded, "--reranker")
    rerank_weights = list(dict.fromkeys(rerank_weights))  # a weight given twice is one row

    def weighted_name(name: str, weight: float) -> str:
        """A re-ranker row's name: named by its weight when there are several."""
        return name + (f" (weight {weight:g})" if len(rerank_weights) > 1 else "")

    def reranker_rows(name: str) -> List[Tuple[str, Tuple[Reranker, float]]]:
        """(row name, (re-ranker, weight)) for each weight."""
        return [(weighted_name(name, weight), (loaded, weight)) for weight in rerank_weights]

    with index_cache(cache_dir) as cache:
        systems: List[System] = []
        if baselines:
            systems += [baseline_system(ExactMatchRetriever), baseline_system(TfidfRetriever)]
            if baseline_model and (model is None or Path(baseline_model).resolve() != Path(model).resolve()):
                pooling_ = baseline_pooling or default_pooling(baseline_model)
                systems.append(encoder_system(f"untuned {model_label(baseline_model)}", baseline_model, pooling_))
        if model:
            systems.append(encoder_system(label, model, pooling, backend))
        if loaded:
            for name, reranker_and_weight in reranker_rows(f"{label} + re-ranker"):
                systems.append(System(name, encoder_retriever(name, model, pooling, model_backend=backend, reranker_and_weight=reranker_and_weight)))
        memory_report = None
        if model and memory_mentions:
            given = memory_settings if isinstance(memory_settings, Mapping) else {p: memory_settings for p in protocols}
            settings = {p: given.get(p) or MemorySettings() for p in protocols}
            grids: Dict[str, List[Dict[str, Any]]] = {}
            if tune:
                tuning = encoder_retriever("tuning", model, pooling, memory_mentions, MemorySettings(), backend)(concepts)
                for protocol in [p for p in PROTOCOLS if p in protocols]:  # strict first: biosyn only adds names
                    if protocol == "biosyn":
                        tuning.add_names(extra)
                    grids[protocol] = tune_memory(tuning, mentions, kb, grid)
                    best = grids[protocol][0]
                    settings[protocol] = MemorySettings(**{key: best[key] for key in MemorySettings().to_dict()})
            name = f"{label} + memory" + (" (tuned here)" if tune else "")
            protocols_of: Dict[MemorySettings, List[str]] = {}  # one retriever (one memory encoding) per distinct settings
            for protocol in protocols:
                protocols_of.setdefault(settings[protocol], []).append(protocol)
            rows = [(name, None)] + (reranker_rows(f"{label} + memory + re-ranker") if loaded else [])
            for row_name, reranker_and_weight in rows:  # the re-ranker re-orders the memory's combined scores, as in a pipeline
                for row_settings, row_protocols in protocols_of.items():
                    make = encoder_retriever(row_name, model, pooling, memory_mentions, row_settings, backend, reranker_and_weight)
                    systems.append(System(row_name, make, row_protocols))
            pipeline_protocol = "strict" if "strict" in protocols else protocols[0]
            memory_report = {
                "corpora": [str(p) for p in memory],
                # distinct entries as the memory holds them: normalized, one primary id each (not the raw pairs)
                "n_entries": len(set(memory_entries(memory_mentions, normalizer.query, kb.get)[0])),
                "settings": settings[pipeline_protocol].to_dict(),  # a pipeline's index holds vocabulary names only
                "settings_by_protocol": {p: settings[p].to_dict() for p in protocols},
                "tuned_on_this_corpus": tune,
                "grid_name": grid_name if tune else None,
                "grid": grids,
            }
        with loaded.memoized() if loaded else contextlib.nullcontext():
            results = run_protocols(systems, concepts, mentions, extra, protocols, misses=misses)
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
        "reranker": reranker,
        "rerank_weights": list(rerank_weights) if reranker else None,
        "rerank_rows": [  # per weight, the rows it fills, so a reader never parses row names
            {"weight": weight, "row": weighted_name(f"{label} + re-ranker", weight),
             "memory_row": weighted_name(f"{label} + memory + re-ranker", weight) if memory_mentions else None}
            for weight in rerank_weights
        ] if loaded else None,
        "rerank_backend": rerank_backend if reranker else None,
        "absent_gold_ids": absent,
        "n_extra_names_biosyn": len(extra),
        "n_new_concepts_biosyn": len({concept_id for concept_id, _ in extra if concept_id not in kb}),
        "train": [str(p) for p in train],
        "preprocessing": {
            "lowercase": prep.lowercase,
            "remove_punctuation": prep.remove_punctuation,
            # resolved from each document's text: a query-only format (biosyn .concept, XL-BEL) has none to resolve them
            "abbreviations": prep.abbreviations and scored_documents is not None,
            "spell_check_entries": len(prep.spell_check),
        },
        "model": model,
        "pooling": pooling,
        "memory": memory_report,
        "results": results,
    }
