"""The `sapbert_linker` spaCy component: links doc.ents to concept ids by nearest-neighbour search."""
from __future__ import annotations

import contextlib
import difflib
import functools
import itertools
import json
import os
import secrets
import shutil
import tempfile
import typing
import warnings
import weakref
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy
import srsly
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import minibatch
import spacy.util

from .abbreviations import long_form_of
from .backends import BACKENDS, ONNX_FILES, ONNX_RUNTIME_REQUIREMENT
from .chunk_store import DEFAULT_CHUNK_SIZE
from .encoder import OWN_FILE as ENCODER_FILE, POOLINGS, Encoder, declared_max_length, declared_pooling, resolve_device
from .errors import ConfigWarning, EncoderLoadError, IndexFormatError, NotInitializedError, SapbertError
from .index import Candidate, ConceptIndex, check_vector_settings, encoder_settings
from .index_types import CONFIG_INDEX_TYPES, DEFAULT_NPROBE, DEFAULT_SHORTLIST
from .kb import Concept, ConceptTable, KnowledgeBase
from .context import MIN_WINDOW, MentionInContext
from .kb_view import KnowledgeBaseView
from .memory import OWN_FILE as MEMORY_FILE, MemorySettings, MentionMemory
from .normalizer import Normalizer
from .preprocess import gold_ids, is_cuiless
from .readers.dictionary import read_spell_check
from .outputs import remove_own_folder
from .reranker import OWN_FILE as RERANKER_FILE, Reranker, check_rerank_backend, check_trained_on, rerank_hits
from .scoring import score_sapbert_links
from .vector_cache import VectorCache

ENCODER_DIR, INDEX_DIR, MEMORY_DIR, RERANKER_DIR, CFG_FILE = "encoder", "index", "memory", "reranker", "cfg"
DEFAULT_MODEL = "cambridgeltl/SapBERT-from-PubMedBERT-fulltext"

DEFAULT_CONFIG = {
    "model": DEFAULT_MODEL,
    "pooling": "cls",
    "max_length": 25,
    "batch_size": 128,
    "device": "auto",
    "backend": "torch",
    "k": 10,
    "max_entities_per_mention": 5,
    "threshold": 0.0,
    "labels": [],
    "types": [],
    "types_by_label": {},
    "sources": [],
    "lowercase": True,
    "remove_punctuation": False,
    "normalize": True,
    "index_type": "flat",
    "nprobe": DEFAULT_NPROBE,
    "shortlist": DEFAULT_SHORTLIST,
    "use_long_form": True,
    "use_memory": True,
    "memory_k": 4,
    "memory_weight": 0.1,
    "concept_temperature": 0.01,
    "memory_temperature": 1.0,
    "memory_mixture": "published",
    "vector_cache_size": 20000,
    "reranker": None,
    "rerank_k": None,
    "rerank_weight": 1.0,
    "rerank_backend": "torch",
    "context_window": 0,
    "scorer": {"@scorers": "spacy-sapbert.linker_scorer.v1"},
}


_LIVE_LINKERS: "weakref.WeakSet[SapbertLinker]" = weakref.WeakSet()
_CREATION_ORDER = itertools.count()


def _linked_by_key(name: str) -> Tuple[str, str, str]:
    return ("spacy_sapbert", "linked_by", name)  # doc.user_data: which linker of that name linked the doc


def live_linker(vocab, name: str, doc: Optional[Doc] = None) -> "SapbertLinker":
    """The sapbert_linker called `name` of the pipeline that owns `vocab`.

    spaCy hands a candidate generator or a KB loader only the KB or the vocab, not the pipeline; this
    finds the linker whose index backs them (every linker made is remembered, weakly). Where pipelines share one
    vocab (spacy.load(..., vocab=...)), the linker that linked `doc` is the one; else the newest.
    """
    found = [linker for linker in list(_LIVE_LINKERS) if linker.vocab is vocab and linker.name == name]
    linked_by = doc.user_data.get(_linked_by_key(name)) if doc is not None and len(found) > 1 else None
    found = [linker for linker in found if linker._token == linked_by] or found
    if not found:
        others = sorted({linker.name for linker in list(_LIVE_LINKERS) if linker.vocab is vocab})
        sourced = any(linker.name == name for linker in list(_LIVE_LINKERS))
        raise SapbertError(
            f"the pipeline has no sapbert_linker called {name!r} (its sapbert_linker components: {others}); set `component` to one of them"
            + ("; one added with add_pipe(source=...) keeps its source pipeline's vocab and is not found: add it with "
               "nlp.add_pipe('sapbert_linker', ...) and load it with its from_disk" if sourced else "")
        )
    return max(found, key=lambda linker: linker._creation)  # the newest: a replaced one may linger


def _kb_ents_key(span: Span) -> Tuple[str, str, int, int]:
    return ("._.", "kb_ents", span.start_char, span.end_char)  # where spaCy keeps a plain extension's value


def _get_kb_ents(span: Span) -> Optional[List[Candidate]]:
    value = span.doc.user_data.get(_kb_ents_key(span))
    # Doc.to_bytes (DocBin, nlp.pipe(n_process=N)) stores values with msgpack, which returns lists: give tuples back
    return None if value is None else [tuple(candidate) for candidate in value]


def _set_kb_ents(span: Span, value: Optional[List[Candidate]]) -> None:
    span.doc.user_data[_kb_ents_key(span)] = value


def mentions_in_context(spans: Sequence[Span]) -> List[MentionInContext]:
    """Each span as a character span of its doc's text (each doc's text built once: `Doc.text` joins its tokens)."""
    texts: Dict[int, str] = {}
    for span in spans:
        if id(span.doc) not in texts:
            texts[id(span.doc)] = span.doc.text
    return [MentionInContext(texts[id(span.doc)], span.start_char, span.end_char) for span in spans]


def install_extensions() -> None:
    """`span._.kb_ents`: [(concept id, score), ...] best first; None on spans the linker did not see.
    The same after Doc.to_bytes/from_bytes, DocBin and nlp.pipe(n_process=N) as in the process that linked."""
    if not Span.has_extension("kb_ents"):
        Span.set_extension("kb_ents", getter=_get_kb_ents, setter=_set_kb_ents)


def _one_thread_in_forked_child() -> None:
    """A process forked from one that ran torch on several threads hangs at its first parallel region
    (the OpenMP pool does not survive fork): spaCy's nlp.pipe(n_process=N) forks, so each child
    encodes on one thread, as spaCy advises for multiprocessing."""
    import torch

    torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_one_thread_in_forked_child)
install_extensions()  # at import, so that docs read back from a DocBin in another process have kb_ents


@Language.factory(
    "sapbert_linker",
    default_config=DEFAULT_CONFIG,
    requires=["doc.ents"],
    assigns=["token.ent_kb_id", "span._.kb_ents"],
    default_score_weights={"nel_micro_f": 1.0, "nel_micro_r": None, "nel_micro_p": None},
)
def make_sapbert_linker(
    nlp: Language,
    name: str,
    model: str,
    pooling: str,
    max_length: int,
    batch_size: int,
    device: str,
    backend: str,
    k: int,
    max_entities_per_mention: int,
    threshold: float,
    labels: List[str],
    types: List[str],
    types_by_label: Dict[str, List[str]],
    sources: List[str],
    lowercase: bool,
    remove_punctuation: bool,
    normalize: bool,
    index_type: str,
    nprobe: int,
    shortlist: int,
    use_long_form: bool,
    use_memory: bool,
    memory_k: int,
    memory_weight: float,
    concept_temperature: float,
    memory_temperature: float,
    memory_mixture: str,
    vector_cache_size: int,
    reranker: Optional[str],
    rerank_k: Optional[int],
    rerank_weight: float,
    rerank_backend: str,
    context_window: int,
    scorer: Optional[Callable],
) -> "SapbertLinker":
    if backend in ONNX_FILES:  # what loading it needs: `spacy package` puts meta.json's requirements into the wheel
        requirements = nlp.meta.setdefault("requirements", [])
        if not any(requirement.startswith("onnxruntime") for requirement in requirements):
            requirements.append(ONNX_RUNTIME_REQUIREMENT)
    return SapbertLinker(
        nlp.vocab,
        name=name,
        model=model,
        pooling=pooling,
        max_length=max_length,
        batch_size=batch_size,
        device=device,
        backend=backend,
        k=k,
        max_entities_per_mention=max_entities_per_mention,
        threshold=threshold,
        labels=labels,
        types=types,
        types_by_label=types_by_label,
        sources=sources,
        lowercase=lowercase,
        remove_punctuation=remove_punctuation,
        normalize=normalize,
        index_type=index_type,
        nprobe=nprobe,
        shortlist=shortlist,
        use_long_form=use_long_form,
        use_memory=use_memory,
        memory_k=memory_k,
        memory_weight=memory_weight,
        concept_temperature=concept_temperature,
        memory_temperature=memory_temperature,
        memory_mixture=memory_mixture,
        vector_cache_size=vector_cache_size,
        reranker=reranker,
        rerank_k=rerank_k,
        rerank_weight=rerank_weight,
        rerank_backend=rerank_backend,
        context_window=context_window,
        scorer=scorer,
    )


class SapbertLinker(Pipe):
    """Sets `span.kb_id_` and `span._.kb_ents` for the entities of a Doc.

    The encoder and the concept index are loaded in `initialize()` (from `model` and the vocabulary
    given in `[initialize.components.NAME]`) or in `from_disk`/`from_bytes` (from the copies saved
    inside the pipeline), never at construction.

    A mention memory (kNN-BioEL), filled by `add_to_memory` with annotated mentions, is saved with
    the component; while it has entries and `use_memory` is on, candidate scores are the mixed
    probabilities of `memory.mix_scores` instead of cosine similarities.
    """

    def __init__(
        self,
        vocab,
        name: str = "sapbert_linker",
        *,
        model: str = DEFAULT_MODEL,
        pooling: str = "cls",
        max_length: int = 25,
        batch_size: int = 128,
        device: str = "auto",
        backend: str = "torch",
        k: int = 10,
        max_entities_per_mention: int = 5,
        threshold: float = 0.0,
        labels: Sequence[str] = (),
        types: Sequence[str] = (),
        types_by_label: Optional[Mapping[str, Sequence[str]]] = None,
        sources: Sequence[str] = (),
        lowercase: bool = True,
        remove_punctuation: bool = False,
        normalize: bool = True,
        index_type: str = "flat",
        nprobe: int = DEFAULT_NPROBE,
        shortlist: int = DEFAULT_SHORTLIST,
        use_long_form: bool = True,
        use_memory: bool = True,
        memory_k: int = 4,
        memory_weight: float = 0.1,
        concept_temperature: float = 0.01,
        memory_temperature: float = 1.0,
        memory_mixture: str = "published",
        vector_cache_size: int = 20000,
        reranker: Optional[str] = None,
        rerank_k: Optional[int] = None,
        rerank_weight: float = 1.0,
        rerank_backend: str = "torch",
        context_window: int = 0,
        scorer: Optional[Callable] = score_sapbert_links,
    ):
        check_config_types({key: value for key, value in locals().items() if key not in ("self", "vocab", "scorer")})
        check_config(
            k=k, max_entities_per_mention=max_entities_per_mention, batch_size=batch_size, max_length=max_length,
            pooling=pooling, index_type=index_type, threshold=threshold, normalize=normalize, device=device,
            vector_cache_size=vector_cache_size, backend=backend, nprobe=nprobe, shortlist=shortlist, rerank_k=rerank_k,
            rerank_weight=rerank_weight, rerank_backend=rerank_backend, context_window=context_window,
        )
        self.vocab = vocab
        self.name = name
        self.model = model
        self.encoder_options = {
            "pooling": pooling, "max_length": max_length, "batch_size": batch_size, "device": device, "backend": backend,
        }
        self.k = k
        self.max_entities_per_mention = max_entities_per_mention
        self.threshold = threshold
        self.labels = set(labels)
        self.types = tuple(types)
        for label in types_by_label or {}:
            if not label_survives_config(label):
                raise SapbertError(
                    f"sapbert_linker config key `types_by_label` has the label {label!r}, which a config.cfg section does "
                    "not read back as it was (':', '=', a leading '#', ';' or '[', outer spaces, empty); rename the label"
                )
        self.types_by_label = {label: tuple(allowed) for label, allowed in (types_by_label or {}).items()}
        self.sources = tuple(sources)
        self.normalizer = Normalizer(lowercase, remove_punctuation)
        self.normalize = normalize
        self.index_type = index_type
        self.nprobe = nprobe
        self.shortlist = shortlist
        self.use_long_form = use_long_form
        self.scorer = scorer
        self.use_memory = use_memory
        self.memory_settings = MemorySettings(memory_k, memory_weight, concept_temperature, memory_temperature, memory_mixture)
        self.encoder: Optional[Encoder] = None
        self.index: Optional[ConceptIndex] = None
        self.memory: Optional[MentionMemory] = None
        self.vector_cache = VectorCache(vector_cache_size)
        self.reranker_name = reranker
        self.rerank_k = rerank_k
        self.rerank_weight = rerank_weight
        self.rerank_backend = rerank_backend
        self.reranker: Optional[Reranker] = None
        self.context_window = context_window
        self._creation = next(_CREATION_ORDER)
        self._token = secrets.token_hex(8)  # names this linker in the docs it links (live_linker)
        _LIVE_LINKERS.add(self)

    @property
    def labels(self) -> Tuple[str, ...]:
        """The entity labels this linker links; empty: every entity."""
        return self._labels

    @labels.setter
    def labels(self, labels: Iterable[str]) -> None:
        self._labels = tuple(sorted(set(labels)))

    # set-up --------------------------------------------------------------------------------------

    def initialize(
        self,
        get_examples: Optional[Callable] = None,
        *,
        nlp: Optional[Language] = None,
        vocabulary: Optional[Any] = None,
        spell_check: Optional[Any] = None,
        progress: bool = False,
        chunk_dir: Optional[Any] = None,  # str or Path; spaCy's settings model cannot resolve `Path` here
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        ray: Optional[Any] = None,  # distributed.RaySettings
    ) -> None:
        """Load the encoder from `model` and build the concept index from the vocabulary.

        `vocabulary` is a callable returning Concept records (in a config, the registered loader
        under `[initialize.components.NAME.vocabulary]`, e.g. `spacy-sapbert.Vocabulary.v1`, which
        `nlp.initialize()` passes here), a plain iterable of Concepts, or a vocabulary file (format told
        from its content).
        `spell_check`: `misspelling||correction` pairs (a mapping or a file) that the normalizer
        applies to mentions; they are saved with the index.
        `chunk_dir`: encode the names `chunk_size` at a time into this folder, so an interrupted build
        resumes there (see `chunk_store`); the caller removes it once the pipeline is saved.
        `ray`: a `distributed.RaySettings` to encode those chunks on a Ray cluster (needs `chunk_dir`).
        The mention memory is emptied: its vectors came from the previous encoder. The re-ranker is loaded
        again from `reranker`, or, loaded without it (from disk), refused when trained for another encoder.
        """
        if vocabulary is None:
            raise SapbertError(
                f"{self.name}: no vocabulary to index. Set `vocabulary` in the config block "
                f"[initialize.components.{self.name}] (e.g. {{'@misc': 'spacy-sapbert.Vocabulary.v1', "
                "'path': 'hp.obo'}) or pass vocabulary=... to initialize (a callable or an iterable of Concept)"
            )
        self.encoder = Encoder(self.model, **self.encoder_options)  # first: a model that cannot work is said before a long read
        if isinstance(vocabulary, (str, Path)):
            from .readers import read_vocabulary

            concepts = read_vocabulary(vocabulary, "auto")
        else:
            concepts = vocabulary() if callable(vocabulary) else vocabulary
        if spell_check is not None:
            corrections = spell_check if isinstance(spell_check, Mapping) else read_spell_check(spell_check)
            self.normalizer = self.normalizer.with_spell_check(corrections)
        self._check_context_window()
        for key, declared, said_by in (
            ("pooling", declared_pooling(self.encoder.name), "its 1_Pooling/config.json"),
            ("max_length", declared_max_length(self.encoder.name), "its sapbert_encoder.json"),
        ):
            configured = self.encoder_options[key]
            if declared is not None and declared != configured:
                warnings.warn(
                    f"{self.name}: config key `{key}` is {configured!r}, but the model {self.model} was trained with {key} "
                    f"{declared!r} ({said_by}); set {key} = {json.dumps(declared)} unless {configured!r} is meant",
                    ConfigWarning, stacklevel=2,
                )
        self.memory = None
        if self.reranker_name:  # before the index: a re-ranker that cannot be used is said before the long encoding
            try:
                self.set_reranker(self.reranker_name)
            except EncoderLoadError as err:
                raise SapbertError(f"{self.name}: config key `reranker`: {err}") from err
        else:
            self._check_reranker(self.name)
        self.build_index(concepts, progress=progress, chunk_dir=chunk_dir, chunk_size=chunk_size, ray=ray)

    def set_reranker(self, model: Optional[Union[str, Path, Reranker]]) -> None:
        """Load a re-ranker (a folder of `train-reranker`, or any one-output sequence classifier) into the
        linker, or remove it (None); a loaded `Reranker` is used as it is (several linkers may share one, with its
        own backend). A re-ranker trained on another encoder's candidates is refused."""
        if model is None:
            self.reranker, self.reranker_name = None, None
            return
        self._load_reranker(model, self.name)
        self.reranker_name = self.reranker.name

    def build_index(
        self,
        concepts: Iterable[Concept],
        progress: bool = False,
        chunk_dir: Optional[Union[str, Path]] = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        ray: Optional[Any] = None,
    ) -> None:
        """(Re)build the concept index with the loaded encoder (chunked and resumable with `chunk_dir`;
        the chunks encoded on Ray with `ray`, a `distributed.RaySettings`). The mention memory keeps the entries
        whose concept the new index has (a CorpusWarning counts the others, left out): it never votes for an id
        the index does not know."""
        encoder = self._require_encoder()
        if not isinstance(concepts, (list, tuple, KnowledgeBase, ConceptTable)):
            concepts = list(concepts)
        if self.types or self.types_by_label or self.sources:  # a typo is said before the names are encoded
            self.check_types({"types": {t for c in concepts for t in c.types}, "sources": {s for c in concepts for s in c.sources}})
        encode_chunks = None
        if ray is not None:
            if chunk_dir is None:
                raise SapbertError(f"{self.name}: an index build on Ray needs a chunk folder (chunk_dir)")
            from .distributed import encode_chunks as encode_on_ray

            encode_chunks = lambda store: encode_on_ray(  # noqa: E731
                store, self.model, self.encoder_options, encoder.fingerprint, ray
            )
        self.index = ConceptIndex.build(
            concepts,
            lambda names: encoder.encode(names, progress=progress and chunk_dir is None),
            normalizer=self.normalizer,
            normalize=self.normalize,
            index_type=self.index_type,
            encoder=encoder_settings(encoder),
            chunk_dir=chunk_dir,
            chunk_size=chunk_size,
            encode_chunks=encode_chunks,
            progress=progress,
            batch_size=encoder.batch_size,
        )
        self.index.set_search_params(self.nprobe, self.shortlist)
        self.check_types()
        if self.memory is not None and len(self.memory):
            self.memory, dropped = self.memory.remapped(self.known_primary_id)
            if dropped:
                warn_left_out_of_memory(dropped, "their concept is not in the rebuilt index")

    def _require_encoder(self) -> Encoder:
        if self.encoder is None:
            raise NotInitializedError(f"{self.name}: no encoder loaded; call nlp.initialize() or load a saved pipeline")
        return self.encoder

    def _require_index(self) -> ConceptIndex:
        if self.index is None:
            raise NotInitializedError(
                f"{self.name}: no concept index; call nlp.initialize() with a vocabulary or load a saved pipeline"
            )
        return self.index

    # processing ----------------------------------------------------------------------------------

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """Link `stream` in batches; a batch that fails goes to the pipeline's error handler (nlp.set_error_handler),
        as nlp(doc) sends a failing doc there."""
        error_handler = self.get_error_handler()
        for docs in minibatch(stream, size=batch_size):
            try:
                self.set_annotations(docs, self.predict(docs))
                yield from docs
            except Exception as error:  # noqa: BLE001 - the handler decides: raise_error (the default) raises it
                error_handler(self.name, self, docs, error)

    def mentions(self, doc: Doc) -> List[Span]:
        """The entities this linker links: all of doc.ents, or those whose label is in `labels`."""
        return [ent for ent in doc.ents if not self.labels or ent.label_ in self.labels]

    def query_text(self, span: Span) -> str:
        """The string searched for a span: its long form when an abbreviation detector found one
        (`abbreviations.long_form_of`: sapbert_abbreviations', or scispacy's abbreviation_detector's)."""
        if self.use_long_form:
            long_form = long_form_of(span)
            if long_form:
                return long_form
        return span.text

    def allowed_types(self, label: str) -> Tuple[str, ...]:
        """The concept types an entity of `label` may link to (`types_by_label`, else `types`); empty: any."""
        return self.types_by_label.get(label, self.types)

    def predict(self, docs: Sequence[Doc]) -> List[List[List[Candidate]]]:
        """Candidates for every linked entity of every doc (see `link_spans`)."""
        per_doc = [self.mentions(doc) for doc in docs]
        hits = iter(self.link_spans([ent for ents in per_doc for ent in ents]))
        return [[next(hits) for _ in ents] for ents in per_doc]

    def link_spans(self, spans: Sequence[Span]) -> List[List[Candidate]]:
        """Candidates for each span, as `span._.kb_ents` gets them: each distinct query string is encoded
        once (once per set of allowed types, when `types_by_label` gives labels different ones); with
        `context_window`, each span is encoded inside its doc (`search_in_context`); a re-ranker with
        `context_words` reads each span in its doc."""
        results: List[List[Candidate]] = [[] for _ in spans]
        groups: Dict[Tuple[str, ...], List[int]] = {}
        for i, span in enumerate(spans):
            groups.setdefault(self.allowed_types(span.label_), []).append(i)
        for types, members in groups.items():
            if self.context_window:
                candidates = self.search_in_context([spans[i] for i in members], types=types)
            else:
                contexts = mentions_in_context([spans[i] for i in members]) if self.reranker and self.reranker.context_words else None
                candidates = self.search_texts([self.query_text(spans[i]) for i in members], types=types, contexts=contexts)
            for i, hits in zip(members, candidates):
                results[i] = hits
        return results

    def search_texts(
        self, texts: Sequence[str], types: Sequence[str] = (), contexts: Optional[Sequence[Optional[MentionInContext]]] = None
    ) -> List[List[Candidate]]:
        """Ranked (id, score) candidates for each text: those of `ranked` (the threshold applied), re-ordered by the
        re-ranker when there is one (its first `rerank_k`, with its scores), cut to max_entities_per_mention.

        Texts are normalized by the index's normalizer; each distinct normalized string is encoded once, and
        re-ranked once, or once per distinct context (`contexts`: where each text was written, or None) when the
        re-ranker reads `context_words` around the mention.
        `types`: only concepts with one of these types are candidates (empty: any), still `k` of them; so
        are only concepts with a name from one of `sources`, when that config key is set.
        """
        keys = [self.normalizer.query(text) for text in texts]
        distinct = sorted({key for key in keys if is_linkable(key)})
        if not distinct:
            return [[] for _ in texts]
        by_key = dict(zip(distinct, self.ranked(distinct, types, threshold=True)))
        if self.reranker is None:
            return [by_key.get(key, [])[: self.max_entities_per_mention] for key in keys]
        reads_context = bool(self.reranker.context_words and contexts)
        units = [(key, contexts[i] if reads_context else None) for i, key in enumerate(keys)]
        distinct_units = list(dict.fromkeys(unit for unit in units if unit[0] in by_key))
        reranked = rerank_hits(
            self.reranker, [key for key, _ in distinct_units], [by_key[key] for key, _ in distinct_units], self.concept,
            self.normalizer, self.rerank_k or self.k, contexts=[where for _, where in distinct_units], weight=self.rerank_weight,
        )
        by_unit = {unit: hits[: self.max_entities_per_mention] for unit, hits in zip(distinct_units, reranked)}
        return [by_unit.get(unit, []) for unit in units]

    def search_in_context(self, spans: Sequence[Span], types: Sequence[str] = ()) -> List[List[Candidate]]:
        """Candidates for each span encoded in its doc, marked [Ms] ... [Me] in a window of `context_window`
        word pieces (`context`), as the encoder was trained with `train-dhns --context-window`. The span
        is read as written (no long form: the context carries it); the mention memory, whose vectors are
        context-free, and the string re-ranker are not combined with it."""
        from .context import infer_context_vectors

        encoder = self._require_encoder()
        self._check_context_window()
        if self.memory_active or self.reranker is not None:
            raise SapbertError(f"{self.name}: config key `context_window` does not combine with a mention memory or a re-ranker")
        linkable = [i for i, span in enumerate(spans) if is_linkable(span.text)]
        results: List[List[Candidate]] = [[] for _ in spans]
        if not linkable:
            return results
        items = mentions_in_context([spans[i] for i in linkable])
        vectors = infer_context_vectors(encoder.mention_runtime, encoder.tokenizer, items, window=self.context_window,
                                        device=encoder.device, chunk_size=encoder.batch_size)
        hits = self._require_index().search(vectors, self.k, self.allowed_rows(types))
        for i, candidates in zip(linkable, hits):
            results[i] = self._above_threshold(candidates)[: self.max_entities_per_mention]
        return results

    def _check_context_window(self) -> None:
        """SapbertError when `context_window` is set and the encoder has no mention markers to read a context with:
        said when the encoder is loaded, not at the first doc."""
        from .context import has_markers

        if self.context_window and self.encoder is not None and not has_markers(self.encoder.tokenizer):
            raise SapbertError(
                f"{self.name}: config key `context_window` is {self.context_window}, but the encoder {self.encoder.name} has no "
                "[Ms]/[Me] mention markers: train it with `train-dhns --context-window`, or set context_window = 0"
            )

    def ranked(
        self, keys: Sequence[str], types: Sequence[str] = (), threshold: bool = False, also: Optional[Sequence[Candidate]] = None
    ) -> List[List[Candidate]]:
        """The `k` candidates of each normalized string, best first, before the re-ranker: the index's (with
        `threshold`, those whose similarity reaches the config's threshold), mixed with the votes of the memory's
        neighbours (with `threshold`, those as similar) while it is active, of the allowed types and sources. The
        threshold is a similarity: it applies before the mixing, whose probabilities split an exact match that two
        concepts share (0.5 each). `also`: one more (id, similarity) per key, put among the index's after the
        threshold and before the mixing, and kept whatever its type (train-reranker's gold that the search missed)."""
        allowed = self.allowed_rows(types)
        concept_hits, neighbours = self.retrieve(keys, self.memory_settings.memory_k, allowed)
        if threshold:
            concept_hits = [self._above_threshold(hits) for hits in concept_hits]
            if neighbours is not None:  # the "union" mixture adds their ids: none the threshold would not keep
                neighbours = [self._above_threshold(hits) for hits in neighbours]
        extra_ids: List[Optional[str]] = [None] * len(concept_hits)
        if also is not None:
            concept_hits = [hits + [extra] for hits, extra in zip(concept_hits, also)]
            extra_ids = [extra[0] for extra in also]
        if neighbours is not None:
            concept_hits = [self.memory_settings.mix(hits, votes) for hits, votes in zip(concept_hits, neighbours)]
            if allowed is not None:  # the "union" mixture adds the memory's ids: keep the allowed ones
                concept_hits = [
                    [hit for hit in hits if hit[0] == extra_id or self._is_allowed(hit[0], allowed)]
                    for hits, extra_id in zip(concept_hits, extra_ids)
                ]
        return concept_hits

    def allowed_rows(self, types: Sequence[str] = ()) -> Optional[numpy.ndarray]:
        """A boolean per concept row of the index: True for a concept of one of `types` (when given) and of
        one of the config's `sources` (when set); None when neither restricts the search."""
        index = self._require_index()
        masks = ([index.type_mask(types)] if types else []) + ([index.source_mask(self.sources)] if self.sources else [])
        return numpy.logical_and.reduce(masks) if masks else None

    def _is_allowed(self, concept_id: str, allowed: numpy.ndarray) -> bool:
        row = self._require_index().concepts.row(concept_id)
        return row is not None and bool(allowed[row])

    def retrieve(
        self, keys: Sequence[str], memory_k: int, allowed: Optional[numpy.ndarray] = None
    ) -> Tuple[List[List[Candidate]], Optional[List[List[Candidate]]]]:
        """For normalized strings: the concept index's top-`k` (among the `allowed` concept rows) and, while
        the memory is active, the memory's top-`memory_k` neighbours (else None), from one encoding."""
        index = self._require_index()
        encoder = self._require_encoder()
        vectors = self.vector_cache.vectors(
            list(keys), encoder_settings(encoder), lambda missing: encoder.encode(missing, progress=len(missing) > 5000, mentions=True)
        )
        concept_hits = [index.exact_name_first(key, hits, allowed) for key, hits in zip(keys, index.search(vectors, self.k, allowed))]
        return concept_hits, (self.memory.search(vectors, memory_k) if self.memory_active else None)

    @property
    def memory_active(self) -> bool:
        """True when searches consult the mention memory: `use_memory` is on and the memory has entries."""
        return self.use_memory and self.memory is not None and len(self.memory) > 0

    def _above_threshold(self, hits: List[Candidate]) -> List[Candidate]:
        return [(cid, score) for cid, score in hits if score >= self.threshold]

    def set_annotations(self, docs: Sequence[Doc], candidates: List[List[List[Candidate]]]) -> None:
        """Write the best id to `span.kb_id_` and the ranked candidates to `span._.kb_ents`; tokens outside the
        entities keep their annotation (missing, blocked or outside), as the NER left it."""
        for doc, doc_candidates in zip(docs, candidates):
            doc.user_data[_linked_by_key(self.name)] = self._token
            linked = {}
            for ent, hits in zip(self.mentions(doc), doc_candidates):
                linked[(ent.start, ent.end, ent.label)] = hits
            if not linked:
                continue
            new_ents = []
            for ent in doc.ents:
                hits = linked.get((ent.start, ent.end, ent.label))
                kb_id = (hits[0][0] if hits else "") if hits is not None else ent.kb_id_
                new_ents.append(Span(doc, ent.start, ent.end, label=ent.label, kb_id=kb_id))
            doc.set_ents(new_ents, default="unmodified")
            for ent in doc.ents:
                hits = linked.get((ent.start, ent.end, ent.label))
                if hits is not None:
                    ent._.kb_ents = list(hits)

    # mention memory --------------------------------------------------------------------------------

    def add_to_memory(self, docs: Iterable[Doc]) -> int:
        """Add the annotated entities of `docs` (those with a `kb_id_`, of the linked labels) to the memory.

        Each entity is stored as the string the linker would search for it (its long form when an
        abbreviation detector set one, normalized) with its concept id. Returns how many entries were new.
        """
        mentions = [
            (self.query_text(ent), ent.kb_id_) for doc in docs for ent in self.mentions(doc) if ent.kb_id_
        ]
        return self.add_mentions(mentions)

    def add_mentions(self, mentions: Iterable[Tuple[str, str]]) -> int:
        """Add (mention text, concept id) pairs to the memory, e.g. from an annotated corpus.

        Ids are resolved to the concept index's primary ids (a "MESH:" prefix is dropped). Mentions
        of several ids ("A|B", "A+B"), without concept ("-1") or whose id is not in the index are left
        out; those of ids not in the index with a CorpusWarning that names them. Returns how many entries
        were new; the concept index is not touched.
        """
        index = self._require_index()
        encoder = self._require_encoder()
        entries, unknown = memory_entries(mentions, self.normalizer.query, index.concept)
        if unknown:
            named = ", ".join(f"{concept_id} ({count})" for concept_id, count in unknown.most_common(5))
            warn_left_out_of_memory(
                sum(unknown.values()),
                f"their concept id is not in the index ({len(unknown)} id(s): {named}{', ...' if len(unknown) > 5 else ''})",
            )
        if self.memory is None:
            self.memory = MentionMemory(encoder.dim, settings=self.vector_settings())
        else:
            self._check_vector_settings(self.memory, "mention memory")
        return self.memory.add(entries, functools.partial(encoder.encode, mentions=True))

    # look-ups -------------------------------------------------------------------------------------

    def concept(self, concept_id: str) -> Optional[Concept]:
        """Canonical name, names, types, xrefs and definition of a concept id (primary or alternative)."""
        return self._require_index().concept(concept_id)

    @property
    def kb(self) -> KnowledgeBaseView:
        """scispaCy's names for the index: `kb.cui_to_entity[id]` (a Concept), `kb.alias_to_cuis[name]` (ids)."""
        return KnowledgeBaseView(self._require_index())

    def primary_id(self, concept_id: str) -> str:
        """The primary id of the concept of an id (primary or alternative); an id not in the index as it is."""
        return self.known_primary_id(concept_id) or concept_id

    def known_primary_id(self, concept_id: str) -> Optional[str]:
        """The primary id of the concept of an id (primary or alternative); None for an id not in the index."""
        concept = self.concept(concept_id)
        return concept.id if concept is not None else None

    # scoring --------------------------------------------------------------------------------------

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
        """The scorer's figures (by default `Scorer.score_links`' nel_micro_p/r/f) on the gold entities
        of `labels`, with predicted and gold ids resolved to primary ids through this linker's index."""
        return super().score(examples, **{"primary_id": self.primary_id, **kwargs})

    # serialization --------------------------------------------------------------------------------

    def _cfg(self, saved_parts: Iterable[str]) -> dict:
        """The component's own record: its encoder options and the parts saved beside it (`check_saved_parts`)."""
        return {"model": self.model, **self.encoder_options, "saved_parts": sorted(saved_parts)}

    def check_saved_parts(self, cfg: Optional[dict], present: Iterable[str], where: str, exclude: Iterable[str]) -> None:
        """IndexFormatError when a mention memory or re-ranker saved with the pipeline is gone (a copy that left a
        folder behind would link without it). A cfg of a pipeline saved before the parts were recorded checks nothing."""
        if not cfg or "saved_parts" not in cfg:
            return
        for part, what in ((MEMORY_DIR, "mention memory"), (RERANKER_DIR, "re-ranker")):
            if part in cfg["saved_parts"] and part not in present and part not in exclude:
                raise IndexFormatError(
                    f"{self.name}: the pipeline was saved with a {what}, but {where}/{part} is missing; copy the pipeline whole"
                )

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        path = Path(path)
        serializers = {CFG_FILE: lambda p: srsly.write_json(p, self._cfg(set(serializers) - {CFG_FILE} - set(exclude)))}
        if self.encoder is not None:
            serializers[ENCODER_DIR] = lambda p: self.encoder.save(p)
        if self.index is not None:
            serializers[INDEX_DIR] = lambda p: self.index.to_disk(p)
        if self.memory is not None and len(self.memory):
            serializers[MEMORY_DIR] = lambda p: self.memory.to_disk(p)
        if self.reranker is not None:
            serializers[RERANKER_DIR] = lambda p: self.reranker.save(p)
        # saved over an earlier save: a memory or re-ranker this component no longer has must not come back at load, nor
        # an earlier encoder's files that this one does not write (adapters, an ONNX export, other shards); a folder
        # goes only when it holds nothing but what that part writes
        for folder, is_own, what, if_saved in (
            (MEMORY_DIR, MEMORY_FILE.match, "a mention memory", False), (RERANKER_DIR, RERANKER_FILE.match, "a re-ranker", False),
            (ENCODER_DIR, ENCODER_FILE.match, "an encoder", True),
        ):
            if (folder in serializers) == if_saved and folder not in exclude and (path / folder).is_dir():
                remove_own_folder(path / folder, is_own, what)
        spacy.util.to_disk(path, serializers, exclude)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "SapbertLinker":
        path = Path(path)
        if ENCODER_DIR not in exclude:
            if not (path / ENCODER_DIR).is_dir():
                raise IndexFormatError(
                    f"{self.name}: the saved encoder folder {path / ENCODER_DIR} is missing; "
                    "the pipeline was saved before nlp.initialize() built the linker"
                )
            self.encoder = Encoder(path / ENCODER_DIR, local_files_only=True, **self.encoder_options)
        if INDEX_DIR not in exclude:
            self.index = ConceptIndex.from_disk(path / INDEX_DIR)
        self.check_saved_parts(
            read_cfg(path / CFG_FILE),
            [part for part in (MEMORY_DIR, RERANKER_DIR) if (path / part).is_dir()], str(path), exclude,
        )
        if MEMORY_DIR not in exclude:
            self.memory = MentionMemory.from_disk(path / MEMORY_DIR) if (path / MEMORY_DIR).exists() else None
        self._check_dimensions(str(path))
        self._check_loaded_settings(str(path))
        self._check_context_window()
        if RERANKER_DIR not in exclude:  # the saved state: its re-ranker, or none
            self.reranker = None
            if (path / RERANKER_DIR).is_dir():
                self._load_reranker(path / RERANKER_DIR, str(path), local_files_only=True)
        self._check_reranker(str(path))
        return self

    def _load_reranker(self, model: Union[str, Path, Reranker], where: str, local_files_only: bool = False) -> None:
        """Load `model` (as `rerank_backend` says) or take a loaded one, refused when trained for another encoder."""
        reranker = model if isinstance(model, Reranker) else Reranker(
            model, device=self.encoder_options["device"], local_files_only=local_files_only, backend=self.rerank_backend
        )
        check_trained_on(reranker, self._require_encoder(), self.normalizer.settings(), where)
        self.reranker = reranker

    def _check_reranker(self, where: str) -> None:
        """SapbertError when the re-ranker in use was trained for another encoder than the one loaded now (it was
        kept across a from_disk, from_bytes or initialize that replaced the encoder)."""
        if self.reranker is not None and self.encoder is not None:
            check_trained_on(self.reranker, self.encoder, self.normalizer.settings(), where)

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        msg: Dict[str, bytes] = {}
        if self.encoder is not None and ENCODER_DIR not in exclude:
            msg[ENCODER_DIR] = folder_bytes(self.encoder.save)
        if self.reranker is not None and RERANKER_DIR not in exclude:
            msg[RERANKER_DIR] = folder_bytes(self.reranker.save)
        if self.index is not None and INDEX_DIR not in exclude:
            msg[INDEX_DIR] = self.index.to_bytes()
        if self.memory is not None and len(self.memory) and MEMORY_DIR not in exclude:
            msg[MEMORY_DIR] = self.memory.to_bytes()
        msg[CFG_FILE] = srsly.json_dumps(self._cfg(msg)).encode("utf8")
        return srsly.msgpack_dumps(msg)

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = tuple()) -> "SapbertLinker":
        msg = srsly.msgpack_loads(data)
        self.check_saved_parts(srsly.json_loads(msg[CFG_FILE]) if CFG_FILE in msg else None, msg, "bytes", exclude)
        if ENCODER_DIR in msg and ENCODER_DIR not in exclude:
            with bytes_folder(msg[ENCODER_DIR]) as folder:
                self.encoder = Encoder(folder, local_files_only=True, **self.encoder_options)
        if INDEX_DIR in msg and INDEX_DIR not in exclude:
            self.index = ConceptIndex.from_bytes(msg[INDEX_DIR])
        if MEMORY_DIR not in exclude:
            self.memory = MentionMemory.from_bytes(msg[MEMORY_DIR]) if MEMORY_DIR in msg else None
        self._check_dimensions("bytes")
        self._check_loaded_settings("bytes")
        if RERANKER_DIR not in exclude:  # the saved state: its re-ranker, or none
            self.reranker = None
            if RERANKER_DIR in msg:
                with bytes_folder(msg[RERANKER_DIR]) as folder:
                    self._load_reranker(folder, "bytes", local_files_only=True)
        self._check_reranker("bytes")
        return self

    def vector_settings(self) -> Dict[str, Any]:
        """The index.VECTOR_SETTINGS of the vectors this component makes now: the loaded encoder's
        fingerprint (None without one), pooling, max_length, the normalizer's settings and normalize."""
        return {
            "encoder_fingerprint": self.encoder.fingerprint if self.encoder is not None else None,
            "backend": self.encoder_options["backend"],
            "pooling": self.encoder_options["pooling"],
            "max_length": self.encoder_options["max_length"],
            **self.normalizer.settings(),
            "normalize": self.normalize,
        }

    def _check_loaded_settings(self, source: str) -> None:
        """IndexFormatError when the loaded index or memory was made with another encoder or config.

        The spelling corrections are not a config key: they come with the index (set at initialize).
        """
        if self.index is not None:
            self.normalizer = self.normalizer.with_spell_check(dict(self.index.normalizer.spell_check))
        encoder_dir = Path(source) / ENCODER_DIR
        if self.encoder is not None and source != "bytes" and Path(self.encoder.name) == encoder_dir:
            encoder_source = f"the encoder in {encoder_dir} has"
        else:
            encoder_source = "the loaded encoder has"
        if self.index is not None:
            self.index.set_search_params(self.nprobe, self.shortlist)
        if self.index is not None and self.index_type != "auto" and self.index.index_type != self.index_type:
            where = Path(source) / INDEX_DIR if source != "bytes" else f"{INDEX_DIR} (from bytes)"
            raise IndexFormatError(
                f"{self.name}: the index in {where} was built with index_type={self.index.index_type!r} but the config "
                f"says index_type={self.index_type!r}; rebuild it (build-index) or set index_type back"
            )
        for kind, part, folder in (("index", self.index, INDEX_DIR), ("mention memory", self.memory, MEMORY_DIR)):
            if part is not None:
                where = f" in {Path(source) / folder}" if source != "bytes" else f" in {folder} (from bytes)"
                self._check_vector_settings(part, kind, where, encoder_source)
        self._check_memory_ids(source)
        self.check_types()

    def _check_memory_ids(self, source: str) -> None:
        """IndexFormatError when the memory holds concept ids the index lacks (a memory of another vocabulary's
        pipeline): its neighbours would become links to concepts the linker cannot name."""
        if self.memory is None or self.index is None:
            return
        unknown = sorted(cid for cid in set(self.memory.ids) if self.index.concepts.row(cid) is None)
        if unknown:
            where = Path(source) / MEMORY_DIR if source != "bytes" else f"{MEMORY_DIR} (from bytes)"
            raise IndexFormatError(
                f"{self.name}: the mention memory in {where} holds {len(unknown)} concept id(s) the index lacks "
                f"({', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''}): it was built for another vocabulary; "
                "build it again on this pipeline (add-memory)"
            )

    def check_types(self, known: Optional[Mapping[str, Collection[str]]] = None) -> None:
        """SapbertError when `types`, `types_by_label` or `sources` names a type or source no concept of the
        index has (a typo would otherwise filter out every candidate); the message lists the closest the
        index does have. `known`: the types and sources of the concepts an index is about to be built from."""
        if known is None and self.index is None:
            return
        wanted = [
            ("types", "types", self.types),
            ("types", "types_by_label", [t for allowed in self.types_by_label.values() for t in allowed]),
            ("sources", "sources", self.sources),
        ]
        for field, key, values in wanted:
            if not values:
                continue
            have = set(known[field]) if known is not None else set(self.index.concepts.lists[field][0])
            what = field[:-1]
            for missing in sorted(set(values) - have):
                close = difflib.get_close_matches(missing, sorted(have), n=5)
                hint = f"close matches: {', '.join(close)}" if close else f"the index has {len(have)} {field}, e.g. {', '.join(sorted(have)[:5]) or 'none'}"
                raise SapbertError(f"{self.name}: config key `{key}` names the {what} {missing!r}, which no concept of the index has; {hint}")

    def _check_vector_settings(self, part, kind: str, where: str = "", encoder_source: str = "the loaded encoder has") -> None:
        """Compare the settings recorded by `part` (a ConceptIndex or MentionMemory) with vector_settings()."""
        current = self.vector_settings()
        if self.encoder is None:  # no encoder loaded: only the config can be compared
            current["encoder_fingerprint"] = part.settings.get("encoder_fingerprint")
        check_vector_settings(
            part.settings,
            current,
            what=f"{self.name}: the {kind}{where}",
            rebuild="build-index" if kind == "index" else "add-memory",
            encoder_source=encoder_source,
        )

    def _check_dimensions(self, source: str) -> None:
        if self.encoder is None:
            return
        for part, folder in ((self.index, INDEX_DIR), (self.memory, MEMORY_DIR)):
            if part is not None and part.dim != self.encoder.dim:
                where = f"{source}/{folder}" if source != "bytes" else f"{folder} (from bytes)"
                raise IndexFormatError(
                    f"{self.name}: the {folder} {where} has dimension {part.dim} but the encoder "
                    f"{self.encoder.name} produces {self.encoder.dim}; rebuild it with this encoder"
                )


def warn_left_out_of_memory(count: int, why: str) -> None:
    """A CorpusWarning: `count` annotated mentions are not in the mention memory, and why."""
    from .readers.corpora import CorpusWarning

    warnings.warn(f"{count} annotated mention(s) left out of the memory: {why}", CorpusWarning, stacklevel=3)


def check_rerank_weight(weight: float, name: str) -> None:
    """SapbertError naming `name` (a config key or an option) unless `weight` is a positive number."""
    if not 0 < weight < float("inf"):
        raise SapbertError(f"{name} must be a positive number, got {weight}")


def folder_bytes(save: Callable[[Path], None]) -> bytes:
    """The files that `save(folder)` writes, as one msgpack blob keyed by their paths in the folder (a Hugging
    Face model in to_bytes; a re-ranker ensemble has one subfolder per member)."""
    with tempfile.TemporaryDirectory() as tmp:
        save(Path(tmp))
        return srsly.msgpack_dumps({p.relative_to(tmp).as_posix(): p.read_bytes() for p in sorted(Path(tmp).rglob("*")) if p.is_file()})


@contextlib.contextmanager
def bytes_folder(data: bytes) -> Iterator[Path]:
    """A temporary folder holding the files of a `folder_bytes` blob, removed after use."""
    tmp = Path(tempfile.mkdtemp(prefix="sapbert-model-"))
    try:
        for name, content in srsly.msgpack_loads(data).items():
            path = (tmp / name).resolve()
            if tmp.resolve() not in path.parents:
                raise IndexFormatError(f"a model blob holds the path {name!r}, outside its folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def label_survives_config(label: str) -> bool:
    """Whether a key of a config section (`types_by_label`'s label) reads back from config.cfg as it was written:
    "a:b", "#X", ";X", "[X]" and " X" do not, and a pipeline saved with one would link that label otherwise."""
    from thinc.api import Config

    try:
        written = Config({"section": {label: [0]}}).to_str()
        return Config().from_str(written, interpolate=False)["section"] == {label: [0]}
    except Exception:  # noqa: BLE001 - thinc refuses some keys outright (the empty one)
        return False


def is_linkable(text: str) -> bool:
    """False for a query without any letter or digit (only whitespace or punctuation): it names nothing."""
    return any(char.isalnum() for char in text)


def memory_entries(
    mentions: Iterable[Tuple[str, str]], query: Callable[[str], str], concept: Callable[[str], Optional[Concept]]
) -> Tuple[List[Tuple[str, str]], Counter]:
    """The (normalized text, primary id) memory entries of (text, gold id) mentions, as `add_mentions` stores them
    (a gold of one id the index holds; `query` normalizes, `concept` looks an id up), and a count of the single ids
    the index lacks (cui-less golds aside)."""
    entries, unknown = [], Counter()
    for text, gold in mentions:
        ids = gold_ids(gold)
        single = next(iter(ids)) if len(ids) == 1 else None
        found = concept(single) if single is not None else None
        key = query(text)
        if found is not None and key:
            entries.append((key, found.id))
        elif single is not None and found is None and not is_cuiless(gold):
            unknown[single] += 1
    return entries, unknown


def check_config_types(values: Mapping[str, Any]) -> None:
    """SapbertError naming the config key whose value is not of its annotated type (int, float, bool or str).

    spaCy validates a config against the factory's types but passes numbers on as written, so `k = "3"` in a
    config.cfg would reach the component as a string and fail later with a TypeError naming no key."""
    hints = typing.get_type_hints(SapbertLinker.__init__)
    for key, value in values.items():
        expected = _scalar_type(hints.get(key))
        if expected is None or value is None:
            continue
        if expected is float:
            valid = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif expected is int:
            valid = isinstance(value, int) and not isinstance(value, bool)
        else:
            valid = isinstance(value, expected)
        if not valid:
            raise SapbertError(
                f"sapbert_linker config key `{key}` must be {expected.__name__}, got {value!r} ({type(value).__name__}); "
                "in a config.cfg, write numbers without quotes"
            )


def _scalar_type(hint: Any) -> Optional[type]:
    """int, float, bool or str for a hint of that type or Optional of it; None for any other hint."""
    if hint in (int, float, bool, str):
        return hint
    arguments = [argument for argument in typing.get_args(hint) if argument is not type(None)]
    if typing.get_origin(hint) is Union and len(arguments) == 1 and arguments[0] in (int, float, bool, str):
        return arguments[0]
    return None


def check_config(
    *,
    k: int,
    max_entities_per_mention: int,
    batch_size: int,
    max_length: int,
    pooling: str,
    index_type: str,
    threshold: float,
    normalize: bool,
    device: str,
    vector_cache_size: int,
    backend: str,
    nprobe: int = DEFAULT_NPROBE,
    shortlist: int = DEFAULT_SHORTLIST,
    rerank_k: Optional[int] = None,
    rerank_weight: float = 1.0,
    rerank_backend: str = "torch",
    context_window: int = 0,
) -> None:
    """Refuse at `add_pipe` (not later, at `initialize`) the config values that can never work, naming the key."""
    for key, value in (("k", k), ("max_entities_per_mention", max_entities_per_mention), ("batch_size", batch_size),
                       ("nprobe", nprobe), ("shortlist", shortlist), ("rerank_k", k if rerank_k is None else rerank_k)):
        if value < 1:
            raise SapbertError(f"sapbert_linker config key `{key}` must be at least 1, got {value}")
    if rerank_k is not None and rerank_k > k:
        raise SapbertError(f"sapbert_linker config key `rerank_k` ({rerank_k}) is larger than `k` ({k}): the re-ranker can only re-order the k candidates")
    check_rerank_weight(rerank_weight, "sapbert_linker config key `rerank_weight`")
    check_rerank_backend(rerank_backend, "sapbert_linker config key `rerank_backend`")
    if context_window and context_window < MIN_WINDOW:
        raise SapbertError(f"sapbert_linker config key `context_window` must be 0 (off) or at least {MIN_WINDOW} word pieces, got {context_window}")
    if backend not in BACKENDS:
        raise SapbertError(f"sapbert_linker config key `backend` is {backend!r}; choose one of {list(BACKENDS)}")
    if vector_cache_size < 0:
        raise SapbertError(f"sapbert_linker config key `vector_cache_size` must be >= 0 (0: no cache), got {vector_cache_size}")
    if max_length < 2:
        raise SapbertError(f"sapbert_linker config key `max_length` must leave room for [CLS] and [SEP] (at least 2), got {max_length}")
    if pooling not in POOLINGS:
        raise SapbertError(f"sapbert_linker config key `pooling` is {pooling!r}; choose one of {list(POOLINGS)}")
    if index_type not in CONFIG_INDEX_TYPES:
        raise SapbertError(f"sapbert_linker config key `index_type` is {index_type!r}; choose one of {list(CONFIG_INDEX_TYPES)}")
    if normalize and threshold > 1.0:
        raise SapbertError(
            f"sapbert_linker config key `threshold` is {threshold}, above the highest possible score 1.0 "
            "(cosine similarity, or a probability with the mention memory): nothing would ever be linked"
        )
    resolve_device(device)


def read_cfg(path: Path) -> Optional[dict]:
    """The component's own record `SapbertLinker._cfg` wrote at `path`, or None where there is none."""
    if not path.exists():
        return None
    try:
        cfg = json.loads(path.read_text(encoding="utf8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise IndexFormatError(f"{path}: not the linker's saved record ({err})") from err
    if not isinstance(cfg, dict):
        raise IndexFormatError(f"{path}: not the linker's saved record (a JSON object)")
    return cfg
