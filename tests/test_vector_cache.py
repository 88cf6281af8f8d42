"""The mention-vector cache: a bounded LRU across nlp.pipe batches and calls, owned by one encoder."""
import numpy
import pytest
import spacy

from spacy_sapbert.errors import SapbertError
from spacy_sapbert.vector_cache import VectorCache

OWNER = {"encoder_fingerprint": "a", "pooling": "cls", "max_length": 25}


class CountingEncoder:
    """Vectors that depend only on the text, and a record of what was encoded."""

    def __init__(self, offset=0.0):
        self.calls = []
        self.offset = offset

    def __call__(self, texts):
        self.calls.append(list(texts))
        return numpy.array([[len(t) + self.offset, ord(t[0])] for t in texts], dtype="float32")


def test_hits_misses_and_least_recently_used_eviction():
    cache, encode = VectorCache(2), CountingEncoder()
    assert cache.vectors(["ab", "c"], OWNER, encode).tolist() == [[2, 97], [1, 99]]
    assert cache.vectors(["ab", "dd"], OWNER, encode).tolist() == [[2, 97], [2, 100]]  # "ab" used: "c" is evicted
    assert encode.calls == [["ab", "c"], ["dd"]]
    assert cache.info() == {"hits": 1, "misses": 3, "entries": 2, "size": 2}
    cache.vectors(["c", "ab"], OWNER, encode)
    assert encode.calls[-1] == ["c"] and cache.info()["hits"] == 2


def test_another_encoder_never_gets_the_cached_vectors():
    cache = VectorCache(10)
    cache.vectors(["ab"], OWNER, CountingEncoder())
    other = CountingEncoder(offset=100)
    assert cache.vectors(["ab"], dict(OWNER, pooling="mean"), other).tolist() == [[102, 97]]
    assert other.calls == [["ab"]] and len(cache) == 1


def test_size_zero_caches_nothing():
    cache, encode = VectorCache(0), CountingEncoder()
    cache.vectors(["ab"], OWNER, encode)
    cache.vectors(["ab"], OWNER, encode)
    assert encode.calls == [["ab"], ["ab"]] and len(cache) == 0
    with pytest.raises(ValueError, match="vector_cache_size"):
        VectorCache(-1)


def docs_of(nlp, texts):
    docs = []
    for text, mentions in texts:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(text.index(m), text.index(m) + len(m), label="DISEASE") for m in mentions]
        docs.append(doc)
    return docs


TEXTS = [("hepatoma and renal disease", ["hepatoma", "renal disease"]), ("Hepatoma again", ["Hepatoma"]),
         ("cardiac failure", ["cardiac failure"])]


def links(docs):
    return [[(e.kb_id_, e._.kb_ents) for e in doc.ents] for doc in docs]


def test_the_component_encodes_a_recurring_mention_once_across_calls(linker_nlp, monkeypatch):
    linker = linker_nlp.get_pipe("sapbert_linker")
    encoded = []
    original = linker.encoder.encode
    monkeypatch.setattr(linker.encoder, "encode", lambda strings, **kw: encoded.extend(strings) or original(strings, **kw))
    first = links(linker_nlp.pipe(docs_of(linker_nlp, TEXTS), batch_size=1))
    second = links(linker_nlp.pipe(docs_of(linker_nlp, TEXTS), batch_size=2))
    assert sorted(encoded) == ["cardiac failure", "hepatoma", "renal disease"]  # "Hepatoma" normalizes to "hepatoma"
    assert first == second
    assert linker.vector_cache.info()["misses"] == 3 and linker.vector_cache.info()["hits"] == 4  # per batch, each distinct string counts once


def test_links_are_the_same_with_and_without_the_cache(tiny_bert, toy_concepts, linker_nlp):
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 5, "vector_cache_size": 0})
    nlp.get_pipe("sapbert_linker").initialize(vocabulary=toy_concepts)
    uncached = links(nlp.pipe(docs_of(nlp, TEXTS * 2)))
    assert links(linker_nlp.pipe(docs_of(linker_nlp, TEXTS * 2))) == uncached
    assert len(nlp.get_pipe("sapbert_linker").vector_cache) == 0


def test_a_new_encoder_empties_the_cache(linker_nlp, toy_concepts, tmp_path):
    from conftest import make_tiny_bert

    linker = linker_nlp.get_pipe("sapbert_linker")
    linker_nlp(docs_of(linker_nlp, TEXTS)[0])
    before = linker.vector_cache.info()["misses"]
    linker.model = str(make_tiny_bert(tmp_path / "other", seed=7))
    linker.initialize(vocabulary=toy_concepts)
    linker_nlp(docs_of(linker_nlp, TEXTS)[0])
    assert linker.vector_cache.info()["misses"] == before + 2


def test_a_negative_cache_size_names_the_key(tiny_bert):
    with pytest.raises(SapbertError, match="vector_cache_size"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"model": tiny_bert, "vector_cache_size": -1})


N_PROCESS_SCRIPT = r'''
import multiprocessing, sys
import spacy, torch
from spacy_sapbert.kb import Concept

def main(model, method):
    multiprocessing.set_start_method(method)
    torch.set_num_threads(2)  # the parent encodes on several threads before spaCy forks (this used to hang the children)
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": model, "device": "cpu"})
    linker.initialize(vocabulary=[Concept("D1", "Heart failure", ["cardiac failure"]), Concept("D2", "Liver cancer", ["hepatoma"]),
                                  Concept("D3", "Kidney disease", ["renal disease", "nephropathy"])])
    texts = ["hepatoma", "heart failure", "renal disease", "cardiac failure", "nephropathy"] * 3
    def docs():
        for text in texts:
            doc = nlp.make_doc(text)
            doc.ents = [doc.char_span(0, len(text), label="DISEASE")]
            yield doc
    one = [[(e.kb_id_, e._.kb_ents) for e in doc.ents] for doc in nlp.pipe(docs())]
    two = [[(e.kb_id_, e._.kb_ents) for e in doc.ents] for doc in nlp.pipe(docs(), n_process=2, batch_size=4)]
    assert one == two, (one, two)
    assert all(isinstance(c, tuple) for doc in two for _, hits in doc for c in hits)
    print("ok", len(two))

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_nlp_pipe_with_two_processes_gives_the_same_links(tiny_bert, tmp_path, method):
    """spaCy's multiprocessing: forked children (Linux) and spawned ones (macOS, Windows: the component is pickled)."""
    import subprocess
    import sys

    script = tmp_path / "n_process.py"
    script.write_text(N_PROCESS_SCRIPT, encoding="utf8")
    try:
        result = subprocess.run([sys.executable, str(script), tiny_bert, method], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nlp.pipe(n_process=2) with {method} did not finish in 240 s (a child hung)")
    assert result.returncode == 0 and "ok 15" in result.stdout, result.stderr[-2000:]


def test_a_row_evicted_while_its_batch_encodes_the_rest_is_still_served():
    """Threads sharing a pipeline: another call may evict a cached row between the look-up and the answer (here,
    from inside `encode`); the answer keeps the row it found."""
    cache, encode = VectorCache(2), CountingEncoder()
    cache.vectors(["ab"], OWNER, encode)

    def encode_while_another_call_evicts(texts):
        cache.vectors(["x", "y"], OWNER, encode)
        return encode(texts)

    assert cache.vectors(["ab", "c"], OWNER, encode_while_another_call_evicts).tolist() == [[2, 97], [1, 99]]
