"""build-index --ray and link --ray on a local Ray cluster with 2 workers: the same index and the same
output as the single-process commands; JSON-lines and PubTator input of `link`; clear errors."""
import json

import numpy
import pytest
import spacy
from typer.testing import CliRunner

from spacy_sapbert.chunk_store import ChunkStore
from spacy_sapbert.cli import app
from spacy_sapbert.distributed import ChunkEncoder, RaySettings, check_address, connect, encode_chunks, worker_error_message
from spacy_sapbert.encoder import Encoder
from spacy_sapbert.errors import SapbertError
from spacy_sapbert.extras import require
from spacy_sapbert.pipeline import the_linker

runner = CliRunner()
OPTIONS = {"pooling": "mean", "max_length": 25, "batch_size": 4, "device": "cpu", "backend": "torch"}
VOCAB = "\n".join(
    f"D{i}||{name}" for i, name in enumerate(
        ["Heart failure|cardiac failure", "Liver cancer|hepatoma", "Kidney disease|nephropathy|renal disease",
         "Acute kidney failure|acute renal failure", "Vitamin deficiency|hypovitaminosis", "Breast cancer|mammary carcinoma",
         "Heart attack|myocardial infarction", "Lung disease|pulmonary disease"]
    )
) + "\n"
DOCS = [
    "Heart failure and liver cancer.",
    "The patient had nephropathy after a heart attack.",
    "No disease here.",
    "Pulmonary disease with hypovitaminosis and breast cancer.",
    "Acute renal failure.",
]


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs, for the whole module (starting one takes seconds)."""
    ray = require("ray")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False, object_store_memory=100 * 2**20)
    yield ray
    ray.shutdown()


def json_lines(result) -> list:
    """The lines a command printed on standard output."""
    return result.stdout.splitlines()


def error_line(result) -> str:
    """The one-line error a failed command ends with (model-loading progress bars may come before it)."""
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Traceback" not in result.output
    return last


def build(tmp_path, tiny_bert, name, *extra):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(VOCAB, encoding="utf8")
    output = tmp_path / name
    args = ["build-index", str(vocab), str(output), "--model", tiny_bert, "--pooling", "mean", "--device", "cpu",
            "--batch-size", "4", "--chunk-size", "4", "--label", "DISEASE", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return output


def test_a_ray_build_assembles_the_single_process_index_and_links_the_same(ray_cluster, tmp_path, tiny_bert, one_thread):
    single = build(tmp_path, tiny_bert, "single")
    on_ray = build(tmp_path, tiny_bert, "ray", "--ray", "local", "--ray-workers", "2", "--ray-cpus", "1")
    assert not (tmp_path / "ray.chunks").exists()  # the chunks are removed once the pipeline is saved
    indexes = [the_linker(spacy.load(path)).index for path in (single, on_ray)]
    assert list(indexes[0].names) == list(indexes[1].names) and len(indexes[0].names) == 17
    vectors = [index.vectors.reconstruct_n(0, index.vectors.ntotal) for index in indexes]
    numpy.testing.assert_array_equal(vectors[0], vectors[1])  # bit for bit: one thread on both sides

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"doc{i}", "text": text}) + "\n" for i, text in enumerate(DOCS)), encoding="utf8")
    link = ["link", "--pipeline", str(on_ray), "--file", str(corpus), "--format", "jsonl", "--batch-size", "2"]
    alone = runner.invoke(app, link)
    spread = runner.invoke(app, link + ["--ray", "local", "--ray-workers", "2"])
    assert alone.exit_code == 0 and spread.exit_code == 0, (alone.output, spread.output)
    lines = [json_lines(result) for result in (alone, spread)]
    assert lines[0] == lines[1]  # same documents, same order, same links
    rows = [json.loads(line) for line in lines[1]]
    assert [row["id"] for row in rows] == [f"doc{i}" for i in range(len(DOCS))]
    assert sum(len(row["ents"]) for row in rows) >= 8 and all(ent["kb_id"] for row in rows for ent in row["ents"])


def test_ray_encodes_only_the_missing_chunks_and_keeps_the_finished_ones(ray_cluster, tmp_path, tiny_bert, one_thread):
    encoder = Encoder(tiny_bert, **OPTIONS)
    names = [f"name {i}" for i in range(11)]
    store = ChunkStore(tmp_path / "chunks", names, {"encoder_fingerprint": encoder.fingerprint}, chunk_size=4)
    marker = numpy.full((4, 32), 7.0, dtype="float32")  # a chunk "finished" before an interruption
    store.save(1, marker)
    assert encode_chunks(store, tiny_bert, OPTIONS, encoder.fingerprint, RaySettings(workers=2)) == 2
    assert store.missing() == []
    blocks = list(store.vectors(encoder.encode))
    numpy.testing.assert_array_equal(blocks[1], marker)
    numpy.testing.assert_array_equal(blocks[0], encoder.encode(names[:4]))
    numpy.testing.assert_array_equal(blocks[2], encoder.encode(names[8:]))
    assert encode_chunks(store, tiny_bert, OPTIONS, encoder.fingerprint, RaySettings(workers=2)) == 0


def test_an_encoder_actor_with_other_weights_than_the_driver_refuses_to_encode(tiny_bert, tiny_bert_48):
    driver = Encoder(tiny_bert_48, **OPTIONS)
    with pytest.raises(SapbertError, match="fingerprint .* the driver's has"):
        ChunkEncoder(tiny_bert, OPTIONS, driver.fingerprint)


def test_a_worker_error_reaches_the_user_as_its_own_message():
    ray_text = (
        "The actor died because of an error raised in its creation task\n  File \"distributed.py\", line 96\n"
        "spacy_sapbert.errors.SapbertError: the encoder 'm' on Ray node n has the fingerprint a, the driver's has b\n"
    )
    assert worker_error_message(ray_text) == "the encoder 'm' on Ray node n has the fingerprint a, the driver's has b"
    assert worker_error_message("Ray lost the node\nmore") == "a Ray worker failed: Ray lost the node"


def test_an_unreachable_cluster_is_a_one_line_error_naming_the_setting(tmp_path, tiny_bert):
    with pytest.raises(SapbertError, match=r"--ray 127\.0\.0\.1:1: no Ray cluster reachable"):
        connect(RaySettings("127.0.0.1:1"))
    with pytest.raises(SapbertError, match="--ray nohost: not a Ray address"):
        check_address("nohost")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(VOCAB, encoding="utf8")
    result = runner.invoke(app, ["build-index", str(vocab), str(tmp_path / "out"), "--model", tiny_bert, "--ray", "ray://127.0.0.1:1"])
    assert "--ray ray://127.0.0.1:1: no Ray cluster reachable" in error_line(result)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.chunks").exists()


def test_ray_settings_out_of_range_or_without_ray_are_refused(tmp_path):
    with pytest.raises(SapbertError, match="--ray-workers"):
        RaySettings(workers=0)
    with pytest.raises(SapbertError, match="--ray-cpus"):
        RaySettings(cpus_per_worker=0)
    for command in (["link", "x"], ["build-index", str(tmp_path / "v.txt"), str(tmp_path / "out")]):  # accepted, did nothing
        result = runner.invoke(app, [*command, "--ray-workers", "5"])
        assert "--ray-workers, --ray-cpus and --ray-gpus describe --ray" in error_line(result), command


def test_link_reads_pubtator_and_names_each_document_by_its_pmid(tmp_path, tiny_bert):
    pipeline = build(tmp_path, tiny_bert, "pipe")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "111|t|Heart failure\n111|a|and liver cancer.\n111\t0\t13\tHeart failure\tDisease\tD0\n\n"
        "222|t|Nephropathy\n222|a|was seen.\n", encoding="utf8",
    )
    result = runner.invoke(app, ["link", "--pipeline", str(pipeline), "--file", str(corpus), "--format", "pubtator"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in json_lines(result)]
    assert [row["id"] for row in rows] == ["111", "222"]
    assert rows[0]["text"] == "Heart failure and liver cancer."
    assert {ent["text"] for ent in rows[0]["ents"]} == {"Heart failure", "liver cancer"}


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "a", "text": "fine"}\n{"id": "b", "text": 3}\n', 'line 2: expected an object with a string "text"'),
        ('{"text": "fine"}\nnot json\n', "line 2: not JSON"),
        ('{"id": true, "text": "x"}\n', 'line 1: "id" must be a string or an integer'),
    ],
)
def test_a_malformed_jsonl_line_is_an_error_naming_file_and_line(tmp_path, tiny_bert, line, message):
    pipeline = build(tmp_path, tiny_bert, "pipe")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(line, encoding="utf8")
    result = runner.invoke(app, ["link", "--pipeline", str(pipeline), "--file", str(corpus), "--format", "jsonl"])
    assert f"{corpus}, {message}" in error_line(result)


def test_link_refuses_an_unknown_format_and_structured_input_without_a_file(tmp_path, tiny_bert):
    pipeline = build(tmp_path, tiny_bert, "pipe")
    result = runner.invoke(app, ["link", "--pipeline", str(pipeline), "--format", "xml", "--file", str(tmp_path / "x")])
    assert "--format 'xml'" in error_line(result)
    result = runner.invoke(app, ["link", "--pipeline", str(pipeline), "--format", "jsonl"], input='{"text": "x"}\n')
    assert "--format jsonl reads --file" in error_line(result)


def test_without_ray_installed_the_error_names_the_extra(monkeypatch):
    from spacy_sapbert.extras import MissingExtraError

    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # import ray now fails as if it were not installed
    with pytest.raises(MissingExtraError, match=r"spacy-sapbert\[ray\]"):
        connect(RaySettings())
