"""The before/after embedding picture: which concepts are drawn, the neighbour measure, and the command."""
import numpy
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.embedding_plot import names_and_labels, same_concept_neighbour_rate, sample_concepts
from spacy_sapbert.kb import Concept


def test_sampled_concepts_have_enough_distinct_names_and_are_seeded():
    concepts = [Concept(f"C{i}", f"Name {i}", [f"syn {i} {j}" for j in range(i % 6)] + [f"NAME {i}"]) for i in range(40)]
    sample = sample_concepts(concepts, 5, min_names=4, max_names=4, seed=3)
    assert len(sample) == 5 and sample == sample_concepts(concepts, 5, min_names=4, max_names=4, seed=3)
    assert all(len(c.names) == 4 and len(set(c.names)) == 4 for c in sample)  # "NAME i" is "name i" lowercased: one name
    assert {c.id for c in sample} <= {f"C{i}" for i in range(40) if i % 6 >= 3}
    names, labels = names_and_labels(sample)
    assert len(names) == 20 and labels == [i for i in range(5) for _ in range(4)]


def test_the_neighbour_rate_counts_names_whose_nearest_name_shares_their_concept():
    vectors = numpy.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [0.8, 0.3]], dtype="float32")
    assert same_concept_neighbour_rate(vectors, [0, 0, 1, 1, 0]) == 1.0
    assert same_concept_neighbour_rate(vectors, [0, 1, 1, 1, 0]) == 0.4  # rows 2, 3 keep a same-label neighbour


def test_plot_embeddings_writes_a_png_and_reports_both_encoders(tmp_path, tiny_bert, tiny_bert_48):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"D{i}||disease {i}|illness {i}|sickness {i}|malady {i}|disorder {i}\n" for i in range(6)), encoding="utf8")
    result = CliRunner().invoke(app, ["plot-embeddings", str(vocab), "--before", tiny_bert, "--after", tiny_bert_48,
                                      "-o", str(tmp_path / "emb.png"), "--concepts", "4", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "emb.png").read_bytes()[:4] == b"\x89PNG"
    assert result.output.count("the nearest other name is of the same concept for") == 2 and "of 20 names" in result.output


def test_both_encoders_are_pooled_as_the_trained_one_was_trained(tmp_path, tiny_bert, tiny_bert_48, monkeypatch):
    """A base model declares no pooling: the "before" panel was pooled with [CLS] while training (and the "after"
    panel) used mean pooling, so the picture compared two poolings, not before and after (found by an audit)."""
    import shutil

    from spacy_sapbert import encoder as encoder_module
    from spacy_sapbert.encoder import write_pooling_files

    trained = tmp_path / "trained"
    shutil.copytree(tiny_bert_48, trained)
    write_pooling_files(trained, "mean", 25, 48)
    used = []
    real = encoder_module.Encoder

    def recording(model, **options):
        used.append((model, options["pooling"]))
        return real(model, **options)

    monkeypatch.setattr(encoder_module, "Encoder", recording)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"D{i}||disease {i}|illness {i}|sickness {i}|malady {i}\n" for i in range(3)), encoding="utf8")
    args = ["plot-embeddings", str(vocab), "--before", tiny_bert, "--after", str(trained), "-o", str(tmp_path / "e.png"), "--device", "cpu"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert used == [(tiny_bert, "mean"), (str(trained), "mean")]
    used.clear()
    assert CliRunner().invoke(app, [*args, "--pooling", "cls"]).exit_code == 0
    assert [pooling for _, pooling in used] == ["cls", "cls"]
