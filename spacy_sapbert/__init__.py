"""spacy-sapbert: link biomedical entity mentions to concept ids with a SapBERT-style encoder in spaCy."""
from .encoder import Encoder, offline_default_model
from .errors import EncoderLoadError, IndexFormatError, NotInitializedError, SapbertError, VocabularyFormatError
from .index import ConceptIndex
from .kb import Concept, KnowledgeBase
from .linker import SapbertLinker
from . import registry  # noqa: F401  (registers the vocabulary loaders)
from . import ner_transformer  # noqa: F401  (registers the TransformerTok2Vec architecture)
from . import dictionary_matcher  # noqa: F401  (registers the sapbert_dictionary_matcher factory)

__version__ = "0.2.0"

__all__ = [
    "Concept",
    "ConceptIndex",
    "Encoder",
    "EncoderLoadError",
    "IndexFormatError",
    "KnowledgeBase",
    "NotInitializedError",
    "SapbertError",
    "SapbertLinker",
    "VocabularyFormatError",
    "offline_default_model",
]
