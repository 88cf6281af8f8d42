"""DHNS fine-tuning (kNN-BioEL): the InfoNCE loss, hard-negative mining, and the training run."""
import json
import math

import numpy
import pytest
import torch
from typer.testing import CliRunner

from spacy_sapbert.kb import Concept
from spacy_sapbert.training.dhns import DhnsConfig, NameSpace, info_nce_loss, mine_examples, train_dhns


def loop_info_nce(queries, candidates, query_concepts, candidate_concepts, temperature):
    """Reference: -log softmax of the positive among the candidates that are not of the query's concept."""
    total = 0.0
    for i, query in enumerate(queries.tolist()):
        def sim(j):
            a, b = query, candidates[j].tolist()
            return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b)) / temperature
        allowed = [j for j in range(len(candidates)) if j == i or candidate_concepts[j] != query_concepts[i]]
        total += -(sim(i) - math.log(sum(math.exp(sim(j)) for j in allowed)))
    return total / len(queries)


def test_info_nce_matches_the_loop_reference_and_masks_same_concept_candidates():
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(4, 6, generator=generator)
    candidates = torch.randn(9, 6, generator=generator)  # 4 positives, then 5 hard negatives
    query_concepts = torch.tensor([0, 1, 0, 2])  # queries 0 and 2 share a concept
    candidate_concepts = torch.tensor([0, 1, 0, 2, 3, 0, 4, 1, 5])
    value = info_nce_loss(queries, candidates, query_concepts, candidate_concepts, 0.5)
    expected = loop_info_nce(queries, candidates, query_concepts.tolist(), candidate_concepts.tolist(), 0.5)
    assert float(value) == pytest.approx(expected, rel=1e-5)
    unmasked = info_nce_loss(queries, candidates, torch.arange(4), torch.arange(10, 19), 0.5)
    assert float(unmasked) != pytest.approx(expected, rel=1e-3)


def unit(*values):
    vector = numpy.array(values, dtype="float32")
    return vector / numpy.linalg.norm(vector)


def test_mining_takes_the_gold_names_nearest_as_positive_and_one_name_per_other_concept():
    concepts = [
        Concept("A", "a far", ["a near"]),
        Concept("B", "b one", ["b two", "shared"]),
        Concept("C", "c one", ["shared"]),
        Concept("D", "d one"),
    ]
    space = NameSpace(concepts)
    place = {
        "a far": unit(0, 1, 0), "a near": unit(1, 0.1, 0), "b one": unit(1, 0.3, 0), "b two": unit(1, 0.35, 0),
        "shared": unit(1, 0.2, 0), "c one": unit(0, 0, 1), "d one": unit(1, 0.5, 0),
    }
    name_vectors = numpy.stack([place[name] for name in space.names])
    query = unit(1, 0, 0)
    [mined], top1 = mine_examples(space, name_vectors, [("q", "A")], query[None, :], hard_negatives=2)
    assert mined.positive == "a near" and top1 == 1.0
    # nearest other names: "shared" (B and C), then "b one" (B: already used), "b two" (B), "d one" (D)
    assert mined.negatives == ["shared", "d one"]
    assert [[concepts[row].id for row in owners] for owners in mined.negative_owners] == [["B", "C"], ["D"]]

    [mined], top1 = mine_examples(space, name_vectors, [("q", "C")], query[None, :], hard_negatives=3)
    assert mined.positive == "shared" and top1 == 0.0  # "shared" is also a name of C: never a negative for C
    assert "shared" not in mined.negatives and mined.negatives[0] == "a near"


def test_a_name_two_concepts_share_is_no_negative_for_a_query_of_either(monkeypatch):
    """Mined as a hard negative for a query of Z, "shared" was tagged with one of its owners only (A), so the batch's
    query of B was pushed away from its own synonym."""
    import torch.nn.functional as F

    from spacy_sapbert.training.dhns import _batch_loss

    concepts = [Concept("A", "alpha", ["shared"]), Concept("B", "beta", ["shared"]), Concept("Z", "zeta")]
    space = NameSpace(concepts)
    place = {"alpha": unit(1, 0, 0), "shared": unit(0.7, 0.7, 0), "zeta": unit(0, 0, 1), "beta": unit(0, 1, 0)}
    name_vectors = numpy.stack([place[name] for name in space.names])
    queries = numpy.stack([unit(0.5, 0.5, 0.7), unit(0, 1, 0.1)])
    mined, _ = mine_examples(space, name_vectors, [("q1", "Z"), ("q2", "B")], queries, hard_negatives=1)
    assert mined[0].negatives == ["shared"] and mined[1].positive == "beta"
    vectors = torch.randn(2 + 2 + sum(len(m.negatives) for m in mined), 5, generator=torch.Generator().manual_seed(0))
    texts = [m.positive for m in mined] + [t for m in mined for t in m.negatives]
    owners = [{concepts[o].id for o in space.owners(space.names.index(text))} for text in texts]
    golds = ["Z", "B"]
    expected = 0.0
    for i in range(2):  # the loop reference: candidate j is a negative of query i unless i's gold has j's name
        sims = F.normalize(vectors[i], dim=0) @ F.normalize(vectors[2:], dim=1).T / 0.5
        allowed = [j for j in range(len(texts)) if j == i or golds[i] not in owners[j]]
        expected += float(-(sims[i] - torch.logsumexp(sims[allowed], dim=0)))
    assert float(_batch_loss(vectors, mined, 0.5, "cpu")) == pytest.approx(expected / 2, rel=1e-5)


def pubtator(doc_id, title, abstract, mentions):
    """A PubTator block with the offsets of each (mention, gold) computed from the text."""
    text = f"{title} {abstract}"
    lines = [f"{doc_id}|t|{title}", f"{doc_id}|a|{abstract}"]
    for mention, gold in mentions:
        start = text.index(mention)
        lines.append(f"{doc_id}\t{start}\t{start + len(mention)}\t{mention}\tDisease\t{gold}")
    return "\n".join(lines) + "\n\n"


PUBTATOR = pubtator(
    1, "Hepatoma and heart failure.", "The nephropathy was mild; cardiac failure too.",
    [("Hepatoma", "D2"), ("heart failure", "D1"), ("nephropathy", "D3"), ("cardiac failure", "D1")],
) + pubtator(
    2, "Liver tumour and kidney disorder.", "Breast lump.",
    [("Liver tumour", "D2"), ("kidney disorder", "D3"), ("Breast lump", "D4")],
)
VOCAB = (
    "D1||Heart failure|cardiac failure|cardiac insufficiency\nD2||Liver cancer|hepatoma|hepatic neoplasm\n"
    "D3||Kidney disease|nephropathy|renal disease\nD4||Breast cancer|mammary carcinoma\nD5||Ovarian cancer|ovary carcinoma\n"
)


@pytest.fixture
def tiny_task(tmp_path):
    (tmp_path / "train.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text(VOCAB, encoding="utf8")
    return tmp_path


def config_for(task, model, output, **overrides):
    settings = dict(
        model=model, output=str(output), corpora=[str(task / "train.txt")], vocab=[str(task / "vocab.txt")],
        batch_size=2, hard_negatives=2, temperature=0.05, lr=1e-3, epochs=2, pooling="mean", device="cpu",
        progress=False, log_every=1,
    )
    settings.update(overrides)
    return DhnsConfig(**settings)


def test_dhns_training_pulls_mentions_to_their_concepts(tiny_task, tiny_bert, one_thread):
    model_dir = train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "run", epochs=6))
    log = [json.loads(line) for line in (tiny_task / "run" / "train_log.jsonl").read_text().splitlines()]
    mining = [entry for entry in log if "train_name_top1" in entry]
    assert len(mining) == 6 and mining[0]["mined"] == 7  # 7 distinct (mention, concept) examples
    assert mining[0]["train_name_top1"] < 1.0 and mining[-1]["train_name_top1"] == 1.0
    losses = [entry["loss"] for entry in log if "loss" in entry]
    assert sum(losses[-4:]) < sum(losses[:4]) / 10
    assert (model_dir / "config.json").exists() and (tiny_task / "run" / "loss.png").exists()

    from spacy_sapbert.encoder import Encoder

    Encoder(str(model_dir), device="cpu").encode(["liver tumour"])  # the linker loads it


def test_cpu_bf16_mines_under_bfloat16_autocast(tiny_task, tiny_bert, one_thread, monkeypatch):
    """Mining encodes every name each epoch, the costliest forward pass of a run: --cpu-bf16 covers it."""
    import warnings

    from spacy_sapbert.training import dhns

    seen = []
    encode_all = dhns._encode_all

    def recording(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16)
        return encode_all(*args, **kwargs)

    monkeypatch.setattr(dhns, "_encode_all", recording)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a CPU without bfloat16 units emulates it
        train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "bf16", epochs=1, cpu_bf16=True))
    train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "fp32", epochs=1))
    assert seen == [True, True, False, False]  # names and mentions, with then without --cpu-bf16


def test_resumed_dhns_run_ends_with_the_same_weights(tiny_task, tiny_bert, one_thread):
    from spacy_sapbert.encoder import load_pretrained

    straight = train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "straight"))
    train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "stopped", epochs=1))  # as if stopped after epoch 1
    log = tiny_task / "stopped" / "train_log.jsonl"
    step = json.loads(log.read_text().splitlines()[-1])["step"]
    with open(log, "a") as handle:  # epoch 2's mining was logged after the checkpoint, then the run was killed
        handle.write(json.dumps({"step": step, "epoch": 1, "mined": 999}) + "\n")
    resumed = train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "stopped"), resume=True)
    first, second = load_pretrained(str(straight))[1], load_pretrained(str(resumed))[1]
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items()):
        assert torch.equal(a, b), name

    def logged(run):  # the log without its clock readings
        entries = [json.loads(line) for line in (tiny_task / run / "train_log.jsonl").read_text().splitlines()]
        return [{k: v for k, v in entry.items() if k not in ("elapsed", "mentions_per_s")} for entry in entries]

    assert logged("stopped") == logged("straight")  # each line once, as an uninterrupted run logs it


def test_a_resume_with_other_settings_warns_or_refuses_naming_them(tiny_task, tiny_bert, one_thread):
    """Other data or optimization settings: a warning naming them, and the run finishes. Another context_window
    (marker rows in the embeddings), model, pooling or max_length (what the model is): an error naming it, before
    the checkpoint is touched."""
    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.training.loop import TrainingWarning

    train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "stopped", epochs=1))
    checkpoint = tiny_task / "stopped" / "checkpoints" / "last"
    state = (checkpoint / "trainer_state.json").read_text()
    with pytest.raises(SapbertError, match=r"cannot resume with another context_window \(0 -> 16\)"):
        train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "stopped", context_window=16), resume=True)
    with pytest.raises(SapbertError, match=r"cannot resume with another model \(.* -> 'other/model'\), pooling"):
        train_dhns(config_for(tiny_task, "other/model", tiny_task / "stopped", pooling="cls"), resume=True)
    assert (checkpoint / "trainer_state.json").read_text() == state
    with pytest.warns(TrainingWarning, match=r"hard_negatives \(2 -> 1\), lr \(0.001 -> 0.002\)"):
        model_dir = train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "stopped", hard_negatives=1, lr=2e-3), resume=True)
    assert json.loads((checkpoint / "trainer_state.json").read_text())["epoch"] == 2 and (model_dir / "config.json").exists()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_mining_vectors_are_the_encoders_normalized_vectors(tiny_bert, pooling, one_thread):
    """DHNS mines with Encoder.encode's vectors, unit length, in eval mode (no dropout), gradients off."""
    from spacy_sapbert.encoder import Encoder, load_pretrained
    from spacy_sapbert.training.dhns import MINING_CHUNK, _encode_all

    texts = [f"name {'x' * (i % 7)} {i}" for i in range(MINING_CHUNK + 40)]  # two chunks
    config = DhnsConfig(model=tiny_bert, output="-", corpora=["-"], vocab=["-"], pooling=pooling, max_length=12, progress=False)
    _, model = load_pretrained(tiny_bert)
    encoder = Encoder(tiny_bert, device="cpu", pooling=pooling, max_length=12)
    model.train()  # as during training: dropout on
    mined = _encode_all(model, encoder.tokenizer, texts, config, torch.device("cpu"), "names")
    assert model.training  # handed back in training mode
    assert mined.dtype == numpy.float32 and mined.flags.c_contiguous
    expected = encoder.encode(texts, batch_size=MINING_CHUNK)
    expected /= numpy.linalg.norm(expected, axis=1, keepdims=True)
    numpy.testing.assert_allclose(mined, expected, atol=1e-6, rtol=0)
    assert all(p.grad is None for p in model.parameters())


def test_dhns_settings_and_data_errors_are_named(tiny_task, tiny_bert):
    from spacy_sapbert.errors import SapbertError

    with pytest.raises(SapbertError, match="hard_negatives"):
        train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "x", hard_negatives=-1))
    (tiny_task / "other.txt").write_text("X1||Unrelated\n", encoding="utf8")
    with pytest.raises(SapbertError, match="no training mention"):
        train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "x", vocab=[str(tiny_task / "other.txt")]))


def test_train_dhns_command(tiny_task, tiny_bert, one_thread):
    from spacy_sapbert.cli import app

    result = CliRunner().invoke(app, ["train-dhns", "--help"])
    assert result.exit_code == 0 and "--hard-negatives" in result.output
    result = CliRunner().invoke(app, [
        "train-dhns", str(tiny_task / "train.txt"), "--vocab", str(tiny_task / "vocab.txt"), "--model", tiny_bert,
        "--output", str(tiny_task / "cli"), "--epochs", "1", "--batch-size", "4", "--device", "cpu", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    assert (tiny_task / "cli" / "model" / "config.json").exists()


def test_a_checkpoint_of_0_2_resumes_to_the_same_weights(tiny_task, tiny_bert, one_thread):
    """0.2's DHNS checkpoints held one RNG state (not one per rank) and no scheduler: they still resume."""
    from spacy_sapbert.encoder import load_pretrained

    straight = train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "straight"))
    train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "old", epochs=1))
    checkpoint = tiny_task / "old" / "checkpoints" / "last"
    (checkpoint / "scheduler.pt").unlink()
    torch.save(torch.load(checkpoint / "rng.pt", weights_only=True)[0], checkpoint / "rng.pt")
    resumed = train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "old"), resume=True)
    first, second = load_pretrained(str(straight))[1], load_pretrained(str(resumed))[1]
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items()):
        assert torch.equal(a, b), name


def test_a_resume_whose_base_model_folder_now_holds_other_weights_is_refused(tiny_task, tiny_bert, one_thread, tmp_path_factory):
    """A project retrains SAP into the same folder that DHNS starts from: the DHNS checkpoint of the old SAP model
    must not be resumed on top of it."""
    import shutil

    from conftest import make_tiny_bert
    from spacy_sapbert.errors import SapbertError

    base = tiny_task / "sap-model"
    shutil.copytree(tiny_bert, base)
    train_dhns(config_for(tiny_task, str(base), tiny_task / "run", epochs=1))
    shutil.rmtree(base)
    make_tiny_bert(base, seed=1)
    with pytest.raises(SapbertError, match=r"cannot resume: the run's model changed since the checkpoint"):
        train_dhns(config_for(tiny_task, str(base), tiny_task / "run", epochs=2), resume=True)


def test_a_resume_whose_spell_check_file_changed_is_refused(tiny_task, tiny_bert, one_thread):
    """The spell-check list rewrites the mentions DHNS trains on: recorded by path only, a list edited in place was
    resumed silently (found by an audit)."""
    from spacy_sapbert.errors import SapbertError

    spell = tiny_task / "spell.txt"
    spell.write_text("tumour||tumor\n", encoding="utf8")
    train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "run", epochs=1, spell_check=str(spell)))
    spell.write_text("tumour||cancer\n", encoding="utf8")
    with pytest.raises(SapbertError, match=r"cannot resume: the run's spell_check changed since the checkpoint"):
        train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "run", epochs=2, spell_check=str(spell)), resume=True)


def test_a_sap_resume_of_a_dhns_run_is_refused(tiny_task, tiny_bert, one_thread):
    """train --resume over a train-dhns output loaded DHNS's optimizer into SAP's and failed on its parameter groups."""
    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.training.trainer import TrainConfig, train

    train_dhns(config_for(tiny_task, tiny_bert, tiny_task / "run", epochs=1))
    pairs = tiny_task / "pairs.txt"
    pairs.write_text("D1||heart failure||cardiac failure\nD2||liver cancer||hepatoma\n", encoding="utf8")
    config = TrainConfig(model=tiny_bert, output=str(tiny_task / "run"), pairs=str(pairs), batch_size=2, max_steps=1, device="cpu", progress=False)
    with pytest.raises(SapbertError, match=r"holds a run of another trainer \(its dhns_config.json\)"):
        train(config, resume=True)
