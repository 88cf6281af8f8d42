"""Vocabulary names as a feature of spaCy's NER (architecture "spacy-sapbert.WithGazetteer.v1").

A NER trained on a few thousand annotated mentions has seen only a fraction of a vocabulary's names.
This layer tells it, for every token, whether the token starts, continues, ends or alone makes a
vocabulary name (B, I, L, U, else O; leftmost-longest, non-overlapping matches of the lowercased,
whitespace-collapsed text, as the dictionary matcher compares names). Each tag has a learned vector
that is added, times `scale`, to the wrapped layer's output; the vectors start at zero, so an untrained
layer is the wrapped layer unchanged and the NER learns how far to trust the vocabulary.

The names are read from `vocabulary` (any format `extract` reads) when the model is initialized
(`spacy train`), and are then saved inside the model with its weights: a trained pipeline needs the
file no longer, and always tags with the names it was trained with.
"""
from __future__ import annotations

from typing import Callable, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from .kb import Concept
from .normalizer import Normalizer

TAGS = ("O", "B", "I", "L", "U")
_O, _B, _I, _L, _U = range(len(TAGS))


def matchable_names(
    concepts: Iterable[Concept], stop_words: Iterable[str] = (), min_length: int = 3
) -> List[Tuple[str, str]]:
    """(normalized key, name) of each distinct name safe to match: not shorter than `min_length`
    characters and not a stop word (lowercase, whitespace collapsed: the default Normalizer)."""
    seen = set()
    names = []
    for key, name in safe_names(concepts, stop_words, min_length):
        if key not in seen:
            seen.add(key)
            names.append((key, name))
    return names


def safe_names(concepts: Iterable[Concept], stop_words: Iterable[str] = (), min_length: int = 3) -> Iterator[Tuple[str, str]]:
    """(normalized key, name) of every name safe to match, as `matchable_names` keeps them, repeats included (a
    caller that dedupes otherwise holds no set of every name)."""
    stop = {w.lower() for w in stop_words}
    normalize = Normalizer()
    for concept in concepts:
        for name in concept.names:
            key = normalize(name)
            if len(key) >= min_length and key not in stop:
                yield key, name


class NameIndex:
    """Normalized names and their whole-word prefixes, for matching token runs against them."""

    def __init__(self, names: Iterable[str]):
        self.names: FrozenSet[str] = frozenset(names)
        prefixes = set()
        for name in self.names:
            words = name.split(" ")
            prefixes.update(" ".join(words[:n]) for n in range(1, len(words)))
        self.word_prefixes: FrozenSet[str] = frozenset(prefixes)
        self.max_chars = max((len(name) for name in self.names), default=0)


def gazetteer_tags(tokens: Sequence[Tuple[str, bool]], index: NameIndex) -> List[int]:
    """BILUO tag codes (see TAGS) of the tokens (text, followed by whitespace) for the names in `index`.

    From each token not yet inside a match, the longest run of tokens whose lowercased text (any
    whitespace between tokens as one space; a whitespace token has the text "") is a name is taken. A run
    is extended while its text, at a word end, is still the start of some name.
    """
    tags = [_O] * len(tokens)
    i = 0
    while i < len(tokens):
        text = ""
        end = -1
        for j in range(i, len(tokens) if tokens[i][0] else i):
            word, space = tokens[j]
            if word:
                text += word.lower()
                if len(text) > index.max_chars:
                    break
                if text in index.names:
                    end = j
            if space and not text.endswith(" "):
                if text not in index.word_prefixes:
                    break
                text += " "
        if end < 0:
            i += 1
            continue
        if end == i:
            tags[i] = _U
        else:
            tags[i] = _B
            tags[i + 1 : end] = [_I] * (end - i - 1)
            tags[end] = _L
        i = end + 1
    return tags


def doc_tokens(doc: Doc) -> List[Tuple[str, bool]]:
    """(text, followed by whitespace) of each token; a whitespace token counts as a space."""
    return [(token.text, bool(token.whitespace_)) if not token.is_space else ("", True) for token in doc]


def _index(model: Model) -> NameIndex:
    """The model's NameIndex, built once from its current names (loading a model replaces them)."""
    holder = model.attrs.get("index")
    if not isinstance(holder, _IndexHolder) or holder.names is not model.attrs["names"]:
        holder = model.attrs["index"] = _IndexHolder(model.attrs["names"])
    return holder.index


class _IndexHolder:
    """The index built from a list of names, kept in the model's attrs but not saved (msgpack refuses the type)."""

    def __init__(self, names: List[str]):
        self.names = names
        self.index = NameIndex(names)

    def __deepcopy__(self, memo):
        return self


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    vectors, backprop_layer = model.layers[0](docs, is_train)
    scale = model.attrs["scale"]
    table = model.get_param("E")
    index = _index(model)
    tags = [model.ops.asarray1i(gazetteer_tags(doc_tokens(doc), index)) for doc in docs]
    outputs = [v + scale * table[t] for v, t in zip(vectors, tags)]

    def backprop(d_outputs: List[Floats2d]):
        d_table = model.ops.alloc2f(*table.shape)
        for d, t in zip(d_outputs, tags):
            model.ops.xp.add.at(d_table, t, d)
        model.inc_grad("E", scale * d_table)
        return backprop_layer(d_outputs)

    return outputs, backprop


def _init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    from .errors import SapbertError
    from .readers import read_vocabularies, vocabulary_specs

    layer = model.layers[0]
    layer.initialize(X=X, Y=Y)
    model.set_dim("nO", layer.get_dim("nO"))
    model.set_param("E", model.ops.alloc2f(len(TAGS), model.get_dim("nO")))
    path = model.attrs["vocabulary"]
    if not path:
        raise SapbertError("WithGazetteer: the config key 'vocabulary' is empty; give a vocabulary file to read names from (the project's configs: --paths.gazetteer FILE)")
    stop = stop_words(X[0].lang_) if X else frozenset()
    concepts = read_vocabularies(vocabulary_specs([path]))
    names = [key for key, _ in matchable_names(concepts, stop, model.attrs["min_length"])]
    model.attrs["names"] = sorted(names)


def stop_words(lang: str) -> FrozenSet[str]:
    """The stop words of a spaCy language ("en"): names never matched alone."""
    from spacy.util import get_lang_class

    return frozenset(get_lang_class(lang).Defaults.stop_words)


@registry.architectures("spacy-sapbert.WithGazetteer.v1")
def with_gazetteer(
    tok2vec: Model[List[Doc], List[Floats2d]], vocabulary: Optional[str], min_length: int = 3, scale: float = 1.0
) -> Model[List[Doc], List[Floats2d]]:
    """`tok2vec`'s vectors plus a learned vector per BILUO tag of the vocabulary's names, times `scale`.

    `vocabulary`: a vocabulary file (read when the model is initialized; its names are then saved with
    the model); `min_length`: shorter names are not matched (nor are stop words); `scale`: Adam moves
    each weight by about the learning rate per step, so `scale` sets how fast the tag vectors grow
    against the vectors they are added to (10 under the transformer config's learning rate of 1e-4,
    whose encoder vectors are also larger than the CNN's normalized embeddings).
    """
    return Model(
        "sapbert_with_gazetteer",
        _forward,
        init=_init,
        layers=[tok2vec],
        params={"E": None},
        dims={"nO": tok2vec.get_dim("nO") if tok2vec.has_dim("nO") else None},
        attrs={"vocabulary": str(vocabulary or ""), "min_length": min_length, "scale": float(scale), "names": [], "index": None},
    )
