"""MS loss v3 and its knowledge-graph embedding: the relations read from the vocabularies, the loss
against a loop reference, train-kge, and SAP training with per-pair margins."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy
import pytest
import torch

from spacy_sapbert.errors import SapbertError, VocabularyFormatError
from spacy_sapbert.kb import Concept
from spacy_sapbert.readers.relations import concept_relations, entity_id, obo_is_a, read_mrrel, tree_parent
from spacy_sapbert.training.losses import make_loss, make_miner, sap_loss

OBO = """format-version: 1.2
default-namespace: human_phenotype

[Term]
id: HP:0000002
name: Abnormality of body height
is_a: HP:0001507 ! Growth abnormality
xref: UMLS:C4025901

[Term]
id: HP:0001507
name: Growth abnormality
is_a: HP:0000118 {source="x"} ! Phenotypic abnormality

[Typedef]
id: part_of
is_a: HP:9999999
"""


def test_obo_is_a_reads_term_parents_without_comments_or_typedefs(tmp_path):
    path = tmp_path / "hp.obo"
    path.write_text(OBO, encoding="utf8")
    assert list(obo_is_a(path)) == [("HP:0000002", "is_a", "HP:0001507"), ("HP:0001507", "is_a", "HP:0000118")]
    graph = {"graphs": [{"nodes": [], "edges": [
        {"sub": "http://purl.obolibrary.org/obo/MONDO_0000002", "pred": "is_a", "obj": "http://purl.obolibrary.org/obo/MONDO_0000001"},
        {"sub": "http://purl.obolibrary.org/obo/MONDO_0000002", "pred": "http://x/part_of", "obj": "x"},
    ]}]}
    (tmp_path / "mondo.json").write_text(json.dumps(graph))
    assert list(obo_is_a(tmp_path / "mondo.json")) == [("MONDO:0000002", "is_a", "MONDO:0000001")]


def test_concept_relations_name_entities_as_the_readers_name_concepts():
    concepts = [
        Concept("D009369", "Neoplasms", types=["C04", "C"]),
        Concept("D009370", "Neoplasms by Histologic Type", types=["C04.557", "C"]),
        Concept("D018254", "Carcinoma, Basal Cell", types=["C04.557.470.200", "C04.557.337.100", "C"]),
        Concept("D002277", "Carcinoma", types=["C04.557.470"]),
        Concept("C000002", "bevonium", xrefs=["MESH:D001561"]),
        Concept("HP:0000002", "Abnormality of body height", xrefs=["UMLS:C4025901", "MSH:D001836"], alt_ids=["HP:0000001"]),
        Concept("C567755", "Tooth agenesis", alt_ids=["OMIM:613097"]),
    ]
    triples = set(concept_relations(concepts))
    assert ("D009370", "tree_parent", "D009369") in triples
    assert ("D018254", "tree_parent", "D002277") in triples  # C04.557.470.200 -> C04.557.470
    assert not any(head == "D018254" and tail == "D009370" for head, _, tail in triples)  # C04.557.337 has no owner
    assert ("C000002", "xref", "D001561") in triples
    assert {("HP:0000002", "xref", "C4025901"), ("HP:0000002", "xref", "D001836"), ("HP:0000002", "alt_id", "HP:0000001")} <= triples
    assert ("C567755", "alt_id", "OMIM:613097") in triples
    assert not any(head == "D009369" for head, _, _ in triples)  # a top-level number has no parent
    assert tree_parent("C04") == "" and entity_id("UMLS:C0011849") == "C0011849" and entity_id("OMIM:1") == "OMIM:1"


def mrrel_row(cui1, rel, cui2, rela="", suppress="N"):
    fields = [cui1, "A1", "SCUI", rel, cui2, "A2", "SCUI", rela, "R1", "", "MSH", "MSH", "", "", suppress, ""]
    return "|".join(fields) + "|\n"


def test_mrrel_uses_rela_else_rel_and_names_a_malformed_line(tmp_path):
    path = tmp_path / "MRREL.RRF"
    path.write_text(mrrel_row("C0000001", "PAR", "C0000002") + mrrel_row("C0000001", "RO", "C0000003", rela="has_finding_site")
                    + mrrel_row("C0000004", "RB", "C0000005", suppress="O") + mrrel_row("C0000006", "SY", "C0000006"))
    assert list(read_mrrel(path)) == [("C0000001", "PAR", "C0000002"), ("C0000001", "has_finding_site", "C0000003")]
    path.write_text(mrrel_row("C0000001", "PAR", "C0000002") + "C0000001|A1|PAR|\n")
    with pytest.raises(VocabularyFormatError, match=r"MRREL.RRF.*line 2"):
        list(read_mrrel(path))


def v3_reference(embeddings, labels, kge, triplets, alpha, beta, pos_margin, neg_margin):
    """MS loss v3 in plain loops: per pair, margins |S - S_kge| (positives) and 1 - |S - S_kge| (negatives);
    v2's margins where the knowledge-graph similarity is NaN."""
    vectors = [[float(x) for x in row] for row in embeddings]
    norms = [math.sqrt(sum(x * x for x in v)) for v in vectors]

    def sim(i, j):
        return sum(a * b for a, b in zip(vectors[i], vectors[j])) / (norms[i] * norms[j])

    def kge_sim(i, j):
        return float(kge[int(labels[i]), int(labels[j])])

    positives = {(int(a), int(p)) for a, p, _ in zip(*triplets)}
    negatives = {(int(a), int(q)) for a, _, q in zip(*triplets)}
    total = 0.0
    for i in range(len(vectors)):
        pos, neg = [], []
        for a, p in positives:
            if a == i:
                k = kge_sim(i, p)
                pos.append((sim(i, p), pos_margin if math.isnan(k) else abs(sim(i, p) - k)))
        for a, q in negatives:
            if a == i:
                k = kge_sim(i, q)
                neg.append((sim(i, q), neg_margin if math.isnan(k) else 1 - abs(sim(i, q) - k)))
        if pos:
            total += 1.0 / alpha * math.log(1 + sum(math.exp(-alpha * (s - m)) for s, m in pos))
        if neg:
            total += 1.0 / beta * math.log(1 + sum(math.exp(beta * (s - m)) for s, m in neg))
    return total / len(vectors)


def test_ms_v3_matches_the_loop_reference_and_counts_fallbacks():
    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randn(16, 8, generator=generator, requires_grad=True)
    labels = torch.arange(8).repeat(2)
    concept_kge = torch.rand(8, 8, generator=generator) * 2 - 1
    concept_kge = (concept_kge + concept_kge.T) / 2
    concept_kge.fill_diagonal_(1.0)
    concept_kge[3, :] = concept_kge[:, 3] = float("nan")  # concept 3 has no vector
    kge = concept_kge[labels][:, labels]
    miner, loss = make_miner(0.2), make_loss(2, 50, kind="ms-v3", pos_margin=1.0, neg_margin=0.5)
    triplets = miner(embeddings.detach(), labels)
    expected = v3_reference(embeddings.detach(), labels, concept_kge, triplets, 2, 50, 1.0, 0.5)
    value = sap_loss(embeddings, labels, miner, loss, kge)
    assert float(value.detach()) == pytest.approx(expected, rel=1e-4)
    assert expected != pytest.approx(v3_reference(embeddings.detach(), labels, concept_kge * 0 + float("nan"), triplets, 2, 50, 1.0, 0.5))
    pairs = {(int(a), int(p)) for a, p, _ in zip(*triplets)} | {(int(a), int(q)) for a, _, q in zip(*triplets)}
    fallback = sum(1 for a, b in pairs if 3 in (int(labels[a]), int(labels[b])))
    assert (loss.fallback_pairs, loss.kge_pairs) == (fallback, len(pairs) - fallback) and fallback > 0
    value.backward()
    assert float(embeddings.grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="needs the knowledge-graph similarities"):
        sap_loss(embeddings, labels, miner, loss)


KGE_OBO = "format-version: 1.2\n\n" + "".join(
    f"[Term]\nid: HP:{i:07d}\nname: term {i}\n" + (f"is_a: HP:{i // 2:07d} ! parent\n" if i > 1 else "")
    + (f"xref: UMLS:C{i:07d}\n" if i % 3 == 0 else "") + "\n"
    for i in range(1, 13)
)


@pytest.fixture(scope="module")
def kge_model(tmp_path_factory):
    """A train-kge run through the CLI on a 12-term OBO tree with a few UMLS xrefs."""
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    tmp = tmp_path_factory.mktemp("kge")
    (tmp / "hp.obo").write_text(KGE_OBO, encoding="utf8")
    result = CliRunner().invoke(app, [
        "train-kge", "--output", str(tmp / "run"), "--vocab", str(tmp / "hp.obo"), "--dim", "8", "--epochs", "3",
        "--batch-size", "8", "--device", "cpu", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    return tmp / "run"


def test_train_kge_writes_the_embedding_and_its_record(kge_model):
    from spacy_sapbert.training.kge import KgeEmbeddings

    model = kge_model / "model"
    record = json.loads((model / "kge.json").read_text())
    assert record["relations"] == {"is_a": 11, "xref": 4} and record["triples"] == 15 and record["entities"] == 16
    assert [json.loads(line)["epoch"] for line in (kge_model / "train_log.jsonl").read_text().splitlines()] == [1, 2, 3]
    kge = KgeEmbeddings(str(model))
    assert kge.vectors.shape == (16, 8) and "C0000003" in kge.row  # xref targets named as the UMLS reader names CUIs
    similarity = kge.similarity(["HP:0000002", "HP:0000004", "unknown"])
    assert similarity[0, 0] == pytest.approx(1.0) and -1 <= float(similarity[0, 1]) <= 1
    assert torch.isnan(similarity[2]).all() and torch.isnan(similarity[:, 2]).all()
    assert kge.coverage(["HP:0000002", "HP:0000002", "nope"]) == (1, 2)
    numpy.save(model / "embeddings.npy", numpy.zeros((3, 8), dtype=numpy.float32))
    with pytest.raises(SapbertError, match=r"embeddings.npy: \(3, 8\) does not fit the 16 rows"):
        KgeEmbeddings(str(model))


@pytest.fixture(scope="module")
def kge_embedding(tmp_path_factory):
    """A KGE model folder written by hand: HP:0000001..6 with fixed vectors (no training needed)."""
    folder = tmp_path_factory.mktemp("kge-fixed")
    entities = [f"HP:{i:07d}" for i in range(1, 7)]
    (folder / "entities.txt").write_text("".join(e + "\n" for e in entities))
    numpy.save(folder / "embeddings.npy", numpy.random.default_rng(0).normal(size=(6, 4)).astype(numpy.float32))
    (folder / "kge.json").write_text("{}")
    return folder


def sap_run(tmp_path, tiny_bert, pairs, name, **settings):
    from spacy_sapbert.training.trainer import TrainConfig, train

    config = TrainConfig(model=tiny_bert, output=str(tmp_path / name), pairs=str(pairs), batch_size=8, lr=2e-3, max_steps=4,
                         log_every=2, device="cpu", progress=False, **settings)
    model = train(config)
    log = [json.loads(line) for line in (tmp_path / name / "train_log.jsonl").read_text().splitlines()]
    from safetensors.torch import load_file

    return load_file(str(model / "model.safetensors")), log


def test_sap_with_ms_v3_uses_the_kge_margins_and_falls_back_to_v2(tmp_path, tiny_bert, kge_embedding, one_thread):
    from spacy_sapbert.training.pairs import write_pairs

    names = [["heart failure", "cardiac failure"], ["liver cancer", "hepatoma"], ["kidney disease", "renal disease"],
             ["vitamin deficiency", "hypovitaminosis"], ["breast cancer", "mammary cancer"], ["heart attack", "cardiac infarction"]]
    covered, uncovered = tmp_path / "covered.txt", tmp_path / "uncovered.txt"
    write_pairs(covered, [(f"HP:{i + 1:07d}" if i < 4 else f"X{i}", n) for i, n in enumerate(names)], seed=0)
    write_pairs(uncovered, [(f"X{i}", n) for i, n in enumerate(names)], seed=0)
    v2, _ = sap_run(tmp_path, tiny_bert, uncovered, "v2", loss="ms-v2")
    v3_none, log_none = sap_run(tmp_path, tiny_bert, uncovered, "v3-none", loss="ms-v3", kge=str(kge_embedding))
    assert all(torch.equal(v2[k], v3_none[k]) for k in v2)  # no concept with a vector: exactly v2
    assert sum(e["kge_pairs"] for e in log_none) == 0 and sum(e["fallback_pairs"] for e in log_none) > 0
    v2_covered, _ = sap_run(tmp_path, tiny_bert, covered, "v2-covered", loss="ms-v2")
    v3, log = sap_run(tmp_path, tiny_bert, covered, "v3", loss="ms-v3", kge=str(kge_embedding))
    assert not all(torch.equal(v2_covered[k], v3[k]) for k in v3)  # the margins changed the training
    assert sum(e["kge_pairs"] for e in log) > 0 and sum(e["fallback_pairs"] for e in log) > 0


def test_an_earlier_checkpoint_is_refused_without_resume_and_kept(kge_model):
    from spacy_sapbert.training.kge import KgeConfig, train_kge

    checkpoint = kge_model / "checkpoints" / "kge.pt"
    before = checkpoint.stat().st_mtime_ns
    config = KgeConfig(output=str(kge_model), vocab=[str(kge_model.parent / "hp.obo")], dim=8, epochs=3, batch_size=8,
                       device="cpu", progress=False)
    with pytest.raises(SapbertError, match=r"kge.pt: an earlier run's checkpoint; continue it with resume"):
        train_kge(config)
    assert checkpoint.stat().st_mtime_ns == before
    recorded = (kge_model / "kge_config.json").read_text()
    with pytest.raises(SapbertError, match=r"kge.pt: cannot resume with another dim \(8 -> 16\)"):  # not PyKEEN's shape error
        train_kge(dataclasses.replace(config, dim=16), resume=True)
    assert checkpoint.stat().st_mtime_ns == before and (kge_model / "kge_config.json").read_text() == recorded


def test_a_finished_run_resumed_with_other_settings_or_fewer_epochs_is_refused(kge_model):
    """PyKEEN trained nothing more for a finished run, and its config file was rewritten with the new settings."""
    from spacy_sapbert.training.kge import KgeConfig, train_kge

    recorded = (kge_model / "kge_config.json").read_text()
    model = (kge_model / "model" / "embeddings.npy").read_bytes()
    config = KgeConfig(output=str(kge_model), vocab=[str(kge_model.parent / "hp.obo")], dim=8, epochs=3, batch_size=8,
                       device="cpu", progress=False)
    with pytest.raises(SapbertError, match=r"kge.pt: the run already finished \(3 epochs\).*lr"):
        train_kge(dataclasses.replace(config, lr=0.5), resume=True)
    with pytest.raises(SapbertError, match=r"kge.pt: the checkpoint has done 3 epochs, more than this run's 2"):
        train_kge(dataclasses.replace(config, epochs=2), resume=True)
    assert (kge_model / "kge_config.json").read_text() == recorded
    assert (kge_model / "model" / "embeddings.npy").read_bytes() == model


def test_a_checkpoint_is_replaced_whole_and_a_damaged_one_is_named(kge_model, tmp_path, monkeypatch):
    """PyKEEN wrote kge.pt in place: a kill while saving left a truncated file, the run's only checkpoint, and the
    resume failed with torch's zip-reader error. The save now goes through a temporary file."""
    import shutil

    from spacy_sapbert.extras import require
    from spacy_sapbert.training.kge import KgeConfig, train_kge

    pykeen_loop = require("pykeen.training.training_loop")  # the kge extra; missing: a one-line error naming it

    run = tmp_path / "run"
    shutil.copytree(kge_model, run)
    checkpoint = run / "checkpoints" / "kge.pt"
    before = checkpoint.read_bytes()
    config = KgeConfig(output=str(run), vocab=[str(kge_model.parent / "hp.obo")], dim=8, epochs=4, batch_size=8,
                       device="cpu", progress=False)

    def killed_while_saving(obj, path, **kwargs):
        Path(path).write_bytes(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(pykeen_loop.torch, "save", killed_while_saving)
    with pytest.raises(KeyboardInterrupt):
        train_kge(config, resume=True)
    monkeypatch.undo()
    assert checkpoint.read_bytes() == before and sorted(p.name for p in checkpoint.parent.iterdir()) == ["kge.pt"]
    checkpoint.write_bytes(before[: len(before) // 2])
    with pytest.raises(SapbertError, match=r"kge.pt: not a readable checkpoint .*start the run again with --overwrite"):
        train_kge(config, resume=True)


def test_a_sap_resume_whose_kge_vectors_changed_is_refused(tmp_path, tiny_bert, kge_embedding, one_thread):
    """ms-v3's margins come from the KGE vectors: recorded by path only, vectors replaced in place were resumed
    silently (found by an audit)."""
    import shutil

    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.training.pairs import write_pairs
    from spacy_sapbert.training.trainer import TrainConfig, train

    pairs = tmp_path / "pairs.txt"
    write_pairs(pairs, [("HP:0000001", ["heart failure", "cardiac failure"]), ("HP:0000002", ["liver cancer", "hepatoma"])], seed=0)
    kge = tmp_path / "kge"
    shutil.copytree(kge_embedding, kge)
    settings = dict(model=tiny_bert, output=str(tmp_path / "run"), pairs=str(pairs), batch_size=4, loss="ms-v3", kge=str(kge),
                    device="cpu", progress=False)
    train(TrainConfig(max_steps=1, **settings))
    numpy.save(kge / "embeddings.npy", numpy.random.default_rng(1).normal(size=(6, 4)).astype(numpy.float32))
    with pytest.raises(SapbertError, match=r"cannot resume: the run's kge changed since the checkpoint"):
        train(TrainConfig(max_steps=2, **settings), resume=True)
    (kge / "embeddings.npy").write_bytes(b"\x93NUMPY")  # cut short: named, before a run folder exists
    with pytest.raises(SapbertError, match="embeddings.npy: not a numpy array file"):
        train(TrainConfig(max_steps=1, **{**settings, "output": str(tmp_path / "new")}))
    assert not (tmp_path / "new").exists()
