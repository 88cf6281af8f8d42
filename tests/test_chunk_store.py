"""Resumable, chunked encoding of an index build (chunk_store) and build-index killed mid-build."""
import json
import subprocess
import sys
import textwrap

import numpy
import pytest
from typer.testing import CliRunner

from spacy_sapbert.chunk_store import MANIFEST_FILE, ChunkStore, remove_chunks
from spacy_sapbert.cli import app
from spacy_sapbert.errors import IndexFormatError
from spacy_sapbert.outputs import OutputExistsError

runner = CliRunner()
NAMES = [f"name {i}" for i in range(23)]
SETTINGS = {"encoder_fingerprint": "abc", "backend": "torch", "pooling": "mean", "max_length": 25,
            "lowercase": True, "remove_punctuation": False, "spell_check": None, "normalize": True}


def fake_encode(texts):
    """Vectors that depend on each text only (its characters' codes), 3 dimensions."""
    return numpy.array([[len(t), sum(map(ord, t)), ord(t[-1])] for t in texts], dtype="float32")


class Interrupted(Exception):
    pass


def encode_then_fail(after_calls: int, calls: list):
    def encode(texts):
        if len(calls) == after_calls:
            raise Interrupted
        calls.append(list(texts))
        return fake_encode(texts)
    return encode


def test_an_interrupted_encoding_resumes_with_the_unfinished_chunks_only(tmp_path):
    folder = tmp_path / "chunks"
    calls: list = []
    with pytest.raises(Interrupted):
        list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(encode_then_fail(2, calls)))
    assert ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).finished() == [0, 1]

    resumed: list = []
    blocks = list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(encode_then_fail(-1, resumed)))
    assert resumed == [NAMES[10:15], NAMES[15:20], NAMES[20:23]]  # chunks 0 and 1 were read, not encoded
    assert [len(b) for b in blocks] == [5, 5, 5, 5, 3]
    numpy.testing.assert_array_equal(numpy.concatenate(blocks), fake_encode(NAMES))


@pytest.mark.parametrize(
    "names, settings, chunk_size, message",
    [
        (NAMES, {**SETTINGS, "encoder_fingerprint": "other"}, 5, "fingerprint"),
        (NAMES, {**SETTINGS, "pooling": "cls"}, 5, "pooling"),
        (NAMES, {**SETTINGS, "remove_punctuation": True}, 5, "remove_punctuation"),
        (NAMES[:-1] + ["another name"], SETTINGS, 5, "names"),
        (NAMES, SETTINGS, 6, "chunk_size"),
    ],
)
def test_chunks_of_another_build_are_refused_naming_the_folder_and_the_difference(tmp_path, names, settings, chunk_size, message):
    folder = tmp_path / "chunks"
    list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(fake_encode))
    with pytest.raises(IndexFormatError, match=message) as err:
        ChunkStore(folder, names, settings, chunk_size=chunk_size)
    assert str(folder) in str(err.value) and "\n" not in str(err.value)


def test_chunks_of_another_batch_size_are_refused_and_a_manifest_without_one_is_taken(tmp_path):
    folder = tmp_path / "chunks"
    list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5, batch_size=64).vectors(fake_encode))
    with pytest.raises(IndexFormatError, match="--batch-size 64 to resume"):
        ChunkStore(folder, NAMES, SETTINGS, chunk_size=5, batch_size=32)
    assert ChunkStore(folder, NAMES, SETTINGS, chunk_size=5, batch_size=64).finished() == [0, 1, 2, 3, 4]
    earlier = tmp_path / "earlier"  # chunks recorded before the batch size was
    list(ChunkStore(earlier, NAMES, SETTINGS, chunk_size=5).vectors(fake_encode))
    assert ChunkStore(earlier, NAMES, SETTINGS, chunk_size=5, batch_size=32).finished() == [0, 1, 2, 3, 4]


def test_a_corrupt_chunk_is_an_error_naming_the_file(tmp_path):
    folder = tmp_path / "chunks"
    list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(fake_encode))
    chunk = folder / "chunk-000002.npy"
    chunk.write_bytes(chunk.read_bytes()[:60])
    with pytest.raises(IndexFormatError, match="chunk-000002.npy"):
        list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(fake_encode))
    numpy.save(chunk, numpy.zeros((4, 3), dtype="float32"))  # readable, but one row short
    with pytest.raises(IndexFormatError, match="chunk-000002.npy.*expected 5"):
        list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(fake_encode))


def test_a_first_chunk_of_another_width_is_the_one_named(tmp_path):
    """The first chunk read from disk set the width the others were checked against: a wrong first chunk was
    reported as the next one (found by an audit)."""
    folder = tmp_path / "chunks"
    list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(fake_encode))
    numpy.save(folder / "chunk-000000.npy", numpy.zeros((5, 4), dtype="float32"))
    with pytest.raises(IndexFormatError, match=r"chunk-000000.npy holds float32 vectors of shape \(5, 4\), expected 5 float32 rows of dimension 3"):
        list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(fake_encode))


def test_a_folder_of_other_files_is_refused_and_remove_chunks_deletes_only_its_own(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep", encoding="utf8")
    with pytest.raises(OutputExistsError, match="--chunk-dir"):
        ChunkStore(theirs, NAMES, SETTINGS)
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]

    folder = tmp_path / "chunks"
    list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=10).vectors(fake_encode))
    (folder / ".chunk-000003.npy.x1y2.tmp").write_bytes(b"left by a kill")
    (folder / "mine.txt").write_text("a user's file", encoding="utf8")
    remove_chunks(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["mine.txt"]
    made = tmp_path / "made"  # a folder the build created goes with its chunks
    list(ChunkStore(made, NAMES, SETTINGS, chunk_size=10).vectors(fake_encode))
    remove_chunks(made)
    assert not made.exists()

    given = tmp_path / "given"  # an empty folder the user named: its chunks go, the folder stays
    given.mkdir()
    list(ChunkStore(given, NAMES, SETTINGS, chunk_size=10).vectors(fake_encode))
    remove_chunks(given)
    assert given.is_dir() and not any(given.iterdir())


def test_chunk_files_without_a_manifest_are_not_ours_and_are_never_deleted(tmp_path):
    folder = tmp_path / "chunks"
    list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=10).vectors(fake_encode))
    (folder / MANIFEST_FILE).unlink()  # e.g. someone else's files that happen to be named like chunks
    kept = sorted(p.name for p in folder.iterdir())
    with pytest.raises(OutputExistsError, match="no manifest.json"):
        ChunkStore(folder, NAMES, SETTINGS, chunk_size=10)
    remove_chunks(folder)
    (folder / MANIFEST_FILE).write_text("not json", encoding="utf8")
    remove_chunks(folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(kept + [MANIFEST_FILE]) and kept


def test_encode_missing_encodes_only_unfinished_chunks_and_reads_none(tmp_path, monkeypatch):
    folder = tmp_path / "chunks"
    with pytest.raises(Interrupted):
        list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(encode_then_fail(2, [])))
    monkeypatch.setattr(numpy, "load", lambda *a, **k: pytest.fail("a finished chunk was read"))
    calls: list = []
    ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).encode_missing(encode_then_fail(-1, calls))
    assert calls == [NAMES[10:15], NAMES[15:20], NAMES[20:23]]
    monkeypatch.undo()
    blocks = list(ChunkStore(folder, NAMES, SETTINGS, chunk_size=5).vectors(encode_then_fail(0, [])))  # nothing left to encode
    numpy.testing.assert_array_equal(numpy.concatenate(blocks), fake_encode(NAMES))


def test_a_chunked_index_equals_the_one_call_index(tmp_path, toy_concepts):
    from spacy_sapbert.index import ConceptIndex

    settings = {key: SETTINGS[key] for key in ("encoder_fingerprint", "backend", "pooling", "max_length")}
    whole = ConceptIndex.build(toy_concepts, fake_encode, encoder=settings)
    chunked = ConceptIndex.build(toy_concepts, fake_encode, encoder=settings, chunk_dir=tmp_path / "c", chunk_size=2)
    assert list(chunked.names) == list(whole.names) and len(whole.names) > 2
    numpy.testing.assert_array_equal(chunked.vectors.reconstruct_n(0, len(whole.names)), whole.vectors.reconstruct_n(0, len(whole.names)))
    assert len(list((tmp_path / "c").glob("chunk-*.npy"))) == -(-len(whole.names) // 2)
    assert (tmp_path / "c" / MANIFEST_FILE).is_file()


# build-index in a process that kills itself with SIGKILL right after its third chunk is written
KILLED_BUILD = textwrap.dedent(
    """
    import os, signal, sys
    import spacy_sapbert.chunk_store as chunk_store
    from spacy_sapbert.cli import app

    real = chunk_store.atomic_write
    written = []
    def atomic_write(path, writer):
        real(path, writer)
        written.append(path)
        if len([p for p in written if p.name.startswith("chunk-")]) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
    chunk_store.atomic_write = atomic_write
    app(sys.argv[1:])
    """
)


def _index_vectors(pipeline):
    import spacy

    index = spacy.load(pipeline).get_pipe("sapbert_linker").index
    return list(index.names), index.vectors.reconstruct_n(0, index.vectors.ntotal)


def test_build_index_killed_mid_build_resumes_and_ends_with_the_uninterrupted_index(tmp_path, tiny_bert, monkeypatch):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"D{i}||disease number {i}|syndrome {i * 7}\n" for i in range(40)), encoding="utf8")
    args = [str(vocab), "--model", tiny_bert, "--label", "", "--chunk-size", "8"]
    script = tmp_path / "killed_build.py"
    script.write_text(KILLED_BUILD, encoding="utf8")
    killed = subprocess.run([sys.executable, str(script), "build-index", str(vocab), str(tmp_path / "resumed"), *args[1:]],
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    chunks = tmp_path / "resumed.chunks"
    assert sorted(p.name for p in chunks.glob("chunk-*.npy")) == ["chunk-000000.npy", "chunk-000001.npy", "chunk-000002.npy"]
    assert not (tmp_path / "resumed").exists()
    recorded = json.loads((chunks / MANIFEST_FILE).read_text(encoding="utf8"))["batch_size"]
    other_batch = runner.invoke(app, ["build-index", args[0], str(tmp_path / "resumed"), *args[1:], "--batch-size", str(recorded + 1)])
    assert other_batch.exit_code == 1 and f"--batch-size {recorded} to resume" in other_batch.output
    assert len(list(chunks.glob("chunk-*.npy"))) == 3

    from spacy_sapbert.encoder import Encoder

    encoded: list = []
    real_encode = Encoder.encode
    monkeypatch.setattr(Encoder, "encode", lambda self, texts, **kw: encoded.append(len(texts)) or real_encode(self, texts, **kw))
    resumed = runner.invoke(app, ["build-index", args[0], str(tmp_path / "resumed"), *args[1:]])
    assert resumed.exit_code == 0, resumed.output
    assert "resuming: 3 of 10 chunks" in resumed.output
    assert encoded == [8] * 6 + [80 - 8 * 9]  # only chunks 3..9 were encoded
    assert not chunks.exists()  # removed once the pipeline was saved

    whole = runner.invoke(app, ["build-index", args[0], str(tmp_path / "whole"), *args[1:]])
    assert whole.exit_code == 0, whole.output
    names, vectors = _index_vectors(tmp_path / "resumed")
    whole_names, whole_vectors = _index_vectors(tmp_path / "whole")
    assert names == whole_names and len(names) == 80
    numpy.testing.assert_array_equal(vectors, whole_vectors)


def test_chunks_left_beside_a_saved_pipeline_are_named_when_the_build_is_run_again(tmp_path, tiny_bert, monkeypatch):
    """A build stopped after its pipeline was saved but before its chunks were removed asked only for --overwrite: the
    chunks (tens of GB at UMLS size) were not mentioned."""
    import spacy_sapbert.chunk_store as chunk_store

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("D1||heart failure|cardiac failure\nD2||hepatoma\n", encoding="utf8")
    args = ["build-index", str(vocab), str(tmp_path / "pipe"), "--model", tiny_bert, "--label", ""]
    monkeypatch.setattr(chunk_store, "remove_chunks", lambda folder: None)  # stopped right after the pipeline was saved
    assert runner.invoke(app, args).exit_code == 0
    monkeypatch.undo()
    chunks = tmp_path / "pipe.chunks"
    again = runner.invoke(app, args)
    assert again.exit_code == 1 and f"{chunks} holds the chunks" in again.output and "--overwrite" in again.output
    assert (chunks / MANIFEST_FILE).is_file()
    assert runner.invoke(app, args + ["--overwrite"]).exit_code == 0
    assert not chunks.exists()
