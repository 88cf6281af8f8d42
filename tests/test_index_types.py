"""Index types beside flat: scalar-quantized exact scans, IVF-PQ re-scored against float16 vectors, auto."""
import dataclasses
import faiss
import numpy
import pytest
import srsly

from spacy_sapbert import index_types
from spacy_sapbert.errors import IndexFormatError
from spacy_sapbert.index import FORMAT_VERSION, RERANK_FILE, ConceptIndex
from spacy_sapbert.index_types import INDEX_TYPES, choose_index_type, ivfpq_layout
from spacy_sapbert.kb import Concept

DIM = 32
N_CONCEPTS = 300
SETTINGS = {"encoder_fingerprint": "clustered", "backend": "torch", "pooling": "mean", "max_length": 25}
CENTERS = numpy.random.default_rng(7).standard_normal((N_CONCEPTS, DIM)).astype("float32")


def clustered_encode(texts):
    """Names 'concept C variant V' lie near centre C (a stand-in for an encoder's synonym clusters)."""
    rows = []
    for text in texts:
        _, c, _, v = text.split()
        noise = numpy.random.default_rng(int(c) * 100 + int(v)).standard_normal(DIM).astype("float32")
        rows.append(CENTERS[int(c)] + 0.6 * noise)
    return numpy.stack(rows)


def vocabulary():
    return [Concept(f"C{c}", f"concept {c} variant 0", [f"concept {c} variant {v}" for v in (1, 2)]) for c in range(N_CONCEPTS)]


def queries(n=120):
    noise = numpy.random.default_rng(11).standard_normal((n, DIM)).astype("float32")
    return CENTERS[:n] + 0.6 * noise


@pytest.fixture(scope="module")
def exact():
    return ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS)


def ranked_ids(index, k=5):
    return [[cid for cid, _ in hits] for hits in index.search(queries(), k)]


@pytest.mark.parametrize("index_type", [t for t in INDEX_TYPES if t != "flat"])
def test_every_type_keeps_the_concept_level_contract_and_agrees_with_exact_search(exact, index_type):
    index = ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS, index_type=index_type)
    assert index.index_type == index_type
    results = index.search(queries(), 5)
    for hits in results:
        ids = [cid for cid, _ in hits]
        scores = [score for _, score in hits]
        assert len(ids) == 5 and len(set(ids)) == 5 and scores == sorted(scores, reverse=True)
    exact_ids = ranked_ids(exact)
    top1 = numpy.mean([got[0] == want[0] for got, want in zip(ranked_ids(index), exact_ids)])
    assert top1 >= 0.97, f"{index_type}: top-1 agreement {top1:.3f} with exact search"
    if index_type in ("fp16",) + index_types.RERANKED:  # scores of float16 vectors (ivf types: re-scored exactly against them)
        exact_scores = {(qi, cid): s for qi, hits in enumerate(exact.search(queries(), 5)) for cid, s in hits}
        for qi, hits in enumerate(results):
            for cid, score in hits:
                if (qi, cid) in exact_scores:
                    assert score == pytest.approx(exact_scores[qi, cid], abs=2e-3)


def test_ivfpq_rescoring_recovers_the_exact_name_ranking_that_pq_codes_blur(exact):
    """Name-level top-10: the PQ codes alone lose neighbours that the exact re-scoring of the shortlist finds."""
    index = ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq")
    q = queries()
    faiss.normalize_L2(q)
    _, want = exact.vectors.search(q, 10)
    _, codes_only = index.vectors.search(q, 10)
    _, rescored = index._name_hits(q, 10, index.nprobe)

    def recall(rows):
        return numpy.mean([len(set(a) & set(b)) / 10 for a, b in zip(rows.tolist(), want.tolist())])

    assert recall(rescored) >= 0.95 and recall(rescored) > recall(codes_only) + 0.05


def test_nprobe_reaches_faiss_and_an_exhausted_probe_scans_more_lists(exact):
    index = ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq")
    index.set_search_params(nprobe=1, shortlist=10)
    assert faiss.extract_index_ivf(index.vectors).nprobe == 1
    real = index.vectors
    seen = []

    class Watched:  # what the shared faiss index says while each search of the widening runs
        def __getattr__(self, name):
            return getattr(real, name)

        def search(self, *args, **kwargs):
            seen.append(faiss.extract_index_ivf(real).nprobe)
            return real.search(*args, **kwargs)

    index.vectors = Watched()
    hits = index.search(queries(3), 200)  # more concepts than one list holds: more lists are scanned (it stopped short)
    assert all(len(h) == 200 and len({cid for cid, _ in h}) == 200 for h in hits)
    # each wider scan is a parameter of its own search, never a setting of the index that threads share (a thread's
    # search changed another's results; found by an audit)
    assert len(seen) > 1 and set(seen) == {1}


def test_ivfpq_saves_its_rescoring_vectors_and_memory_maps_them_at_load(tmp_path):
    index = ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq")
    index.to_disk(tmp_path / "index")
    loaded = ConceptIndex.from_disk(tmp_path / "index")
    assert isinstance(loaded.rerank.base, numpy.memmap) and loaded.rerank.dtype == numpy.float16
    assert loaded.search(queries(), 5) == index.search(queries(), 5)
    assert ConceptIndex.from_bytes(index.to_bytes()).search(queries(), 5) == index.search(queries(), 5)

    (tmp_path / "index" / RERANK_FILE).unlink()
    with pytest.raises(IndexFormatError, match=f"{RERANK_FILE} is missing"):
        ConceptIndex.from_disk(tmp_path / "index")
    numpy.save(tmp_path / "index" / RERANK_FILE, numpy.zeros((5, DIM), dtype="float16"))
    with pytest.raises(IndexFormatError, match=f"{RERANK_FILE} holds 5 vectors.*different builds"):
        ConceptIndex.from_disk(tmp_path / "index")


def test_a_chunked_ivfpq_build_equals_the_one_call_build(tmp_path):
    whole = ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq")
    chunked = ConceptIndex.build(
        vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq", chunk_dir=tmp_path / "c", chunk_size=64
    )
    numpy.testing.assert_array_equal(numpy.asarray(chunked.rerank), whole.rerank)
    assert chunked.search(queries(), 5) == whole.search(queries(), 5)


def test_a_chunked_build_saves_its_rescoring_vectors_by_a_hard_link_not_a_copy(tmp_path):
    from spacy_sapbert.chunk_store import remove_chunks
    from spacy_sapbert.index import RERANK_CHUNK_FILE

    chunked = ConceptIndex.build(
        vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq", chunk_dir=tmp_path / "c", chunk_size=64
    )
    chunked.to_disk(tmp_path / "index")
    chunked.to_disk(tmp_path / "index")  # saved again: still one file, no temporary left behind
    saved = tmp_path / "index" / RERANK_FILE
    assert saved.samefile(tmp_path / "c" / RERANK_CHUNK_FILE) and saved.stat().st_nlink == 2
    assert not list((tmp_path / "index").glob(".*.tmp"))
    remove_chunks(tmp_path / "c")
    assert saved.stat().st_nlink == 1 and not (tmp_path / "c").exists()
    loaded = ConceptIndex.from_disk(tmp_path / "index")
    numpy.testing.assert_array_equal(numpy.asarray(loaded.rerank), numpy.asarray(chunked.rerank))
    assert loaded.search(queries(), 5) == chunked.search(queries(), 5)


def test_a_rebuild_into_the_same_chunk_folder_never_rewrites_a_saved_indexs_rescoring_file(tmp_path, monkeypatch):
    """The saved rerank.npy is a hard link to the chunk folder's file: a second build there, even one that stops part
    way, writes a new file and leaves the saved index (and the index still in memory) as they were."""
    import spacy_sapbert.index as index_module

    build = lambda: ConceptIndex.build(  # noqa: E731
        vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq", chunk_dir=tmp_path / "c", chunk_size=64)
    first = build()
    first.to_disk(tmp_path / "index")
    saved = (tmp_path / "index" / RERANK_FILE).read_bytes()
    in_memory = numpy.array(first.rerank)
    calls = []
    real_rows = index_module.float32_rows

    def rows_then_stop(block, normalize=True):
        calls.append(1)
        if len(calls) == 3:  # the training sample, the first block (the re-scoring file is open by then), then stop
            raise KeyboardInterrupt
        return real_rows(block, normalize)

    monkeypatch.setattr(index_module, "float32_rows", rows_then_stop)
    with pytest.raises(KeyboardInterrupt):
        build()
    assert (tmp_path / "index" / RERANK_FILE).read_bytes() == saved
    numpy.testing.assert_array_equal(numpy.asarray(first.rerank), in_memory)


def test_added_names_are_rescored_too():
    index = ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq")
    assert index.add_names([("C5", "concept 5 variant 9")], clustered_encode) == 1
    assert index.rerank.shape == (len(index.names), DIM)
    query = clustered_encode(["concept 5 variant 9"])
    assert index.search(query, 1)[0] == [("C5", pytest.approx(1.0, abs=2e-3))]


def test_auto_picks_by_size_and_records_the_concrete_type(monkeypatch):
    assert choose_index_type("auto", 999_999) == "flat" and choose_index_type("auto", 1_000_000) == "ivfpq"
    with pytest.raises(IndexFormatError, match="auto"):
        choose_index_type("ivf", 10)
    monkeypatch.setattr(index_types, "AUTO_IVFPQ_NAMES", 500)
    index = ConceptIndex.build(vocabulary(), clustered_encode, encoder=SETTINGS, index_type="auto")
    assert index.index_type == "ivfpq" and index.meta()["index_type"] == "ivfpq"


@pytest.mark.parametrize("dim, n, expected", [(768, 10_000_000, (12649, 96, 8)), (384, 75_000, (1095, 48, 8)), (32, 100, (2, 4, 6)), (10, 5, (1, 1, 2))])
def test_ivfpq_layout(dim, n, expected):
    assert ivfpq_layout(dim, n) == expected


def test_an_index_of_a_newer_format_is_refused(exact, tmp_path):
    exact.to_disk(tmp_path / "index")
    meta = srsly.read_json(tmp_path / "index" / "meta.json")
    newer = FORMAT_VERSION + 1
    srsly.write_json(tmp_path / "index" / "meta.json", {**meta, "format_version": newer})
    with pytest.raises(IndexFormatError, match=f"format_version {newer}, newer .*upgrade"):
        ConceptIndex.from_disk(tmp_path / "index")


def test_the_linker_accepts_auto_and_refuses_another_recorded_type(tiny_bert, toy_concepts, tmp_path):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "index_type": "sq8", "nprobe": 3})
    nlp.get_pipe("sapbert_linker").initialize(vocabulary=toy_concepts)
    nlp.to_disk(tmp_path / "pipe")
    assert spacy.load(tmp_path / "pipe", config={"components": {"sapbert_linker": {"index_type": "auto"}}})
    with pytest.raises(IndexFormatError, match="index_type='sq8' but the config says index_type='flat'"):
        spacy.load(tmp_path / "pipe", config={"components": {"sapbert_linker": {"index_type": "flat"}}})


def test_build_index_with_ivfpq_saves_the_rescoring_vectors_and_removes_its_chunks(tmp_path, tiny_bert):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"D{i}||disease {i}|syndrome {i}\n" for i in range(30)), encoding="utf8")
    result = CliRunner().invoke(
        app, ["build-index", str(vocab), str(tmp_path / "pipe"), "--model", tiny_bert, "--label", "", "--index-type", "ivfpq"]
    )
    assert result.exit_code == 0, result.output
    assert "index_type ivfpq" in result.output
    assert (tmp_path / "pipe" / "sapbert_linker" / "index" / RERANK_FILE).is_file()
    assert not (tmp_path / "pipe.chunks").exists()
    auto = CliRunner().invoke(
        app, ["build-index", str(vocab), str(tmp_path / "auto"), "--model", tiny_bert, "--label", "", "--index-type", "auto"]
    )
    assert auto.exit_code == 0 and "index_type flat" in auto.output


def test_ivfopq_and_ivfpq_need_enough_names_to_learn_their_codes():
    few = [Concept(f"C{c}", f"concept {c} variant 0") for c in range(100)]
    with pytest.raises(IndexFormatError, match="ivfopq needs at least 256 names.*has 100"):
        ConceptIndex.build(few, clustered_encode, encoder=SETTINGS, index_type="ivfopq")
    with pytest.raises(IndexFormatError, match="ivfpq needs at least 2 names.*has 1; choose flat"):  # faiss's raw error before
        ConceptIndex.build(few[:1], clustered_encode, encoder=SETTINGS, index_type="ivfpq")
    assert len(ConceptIndex.build(few[:2], clustered_encode, encoder=SETTINGS, index_type="ivfpq").search(queries(1), 2)[0]) == 2


def test_rescoring_vectors_are_copied_where_the_file_system_refuses_a_hard_link(tmp_path, monkeypatch):
    from spacy_sapbert.index import RERANK_CHUNK_FILE

    def refuse(source, target):
        raise OSError(18, "Invalid cross-device link")

    chunked = ConceptIndex.build(
        vocabulary(), clustered_encode, encoder=SETTINGS, index_type="ivfpq", chunk_dir=tmp_path / "c", chunk_size=64
    )
    monkeypatch.setattr("os.link", refuse)
    chunked.to_disk(tmp_path / "index")
    saved = tmp_path / "index" / RERANK_FILE
    assert not saved.samefile(tmp_path / "c" / RERANK_CHUNK_FILE) and saved.stat().st_nlink == 1
    assert not list((tmp_path / "index").glob(".*.tmp"))
    numpy.testing.assert_array_equal(numpy.load(saved), numpy.asarray(chunked.rerank))


def test_a_filtered_search_of_an_inverted_file_scans_more_lists_until_it_has_k(exact):
    """When the scanned lists ran out before k allowed concepts came back, an ivfpq search returned fewer: 27 of 300
    queries in an audit's 20k-name index with a type of 104 concepts. It scans more lists, then sets nprobe back."""
    rare = [dataclasses.replace(c, types=["RARE" if n % 30 == 0 else "COMMON"]) for n, c in enumerate(vocabulary())]
    index = ConceptIndex.build(rare, clustered_encode, encoder=SETTINGS, index_type="ivfpq")
    index.set_search_params(1, 400)  # one list a query: the rare concepts are mostly in others
    allowed = index.type_mask(["RARE"])
    results = index.search(queries(), 5, allowed)
    assert all(len(hits) == 5 and {cid for cid, _ in hits} <= {f"C{n}" for n in range(0, N_CONCEPTS, 30)} for hits in results)
    assert faiss.extract_index_ivf(index.vectors).nprobe == 1 == index.nprobe
    flat = ConceptIndex.build(rare, clustered_encode, encoder=SETTINGS).search(queries(), 5, allowed)
    # approximate still (the lists nearest the query are scanned, not all), and mostly the exact first concept
    assert numpy.mean([got[0][0] == want[0][0] for got, want in zip(results, flat)]) >= 0.9
