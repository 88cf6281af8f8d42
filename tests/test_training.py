"""Self-alignment pretraining: synonyms, pairs, loss, trainer (determinism, resume, torchrun), commands."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import subprocess
import sys
import warnings
from itertools import combinations
from pathlib import Path

import pytest
import torch

from spacy_sapbert.encoder import Encoder
from spacy_sapbert.errors import EncoderLoadError, SapbertError, VocabularyFormatError
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.readers.corpora import read_pubtator
from spacy_sapbert.training.extract import extract_synonyms, read_synonyms, umls_concepts, write_synonyms
from spacy_sapbert.training.losses import make_loss, make_miner, sap_loss
from spacy_sapbert.training.pairs import PairsFile, concept_pairs, finetune_pairs, read_pairs, write_pairs
from spacy_sapbert.training.trainer import TrainConfig, TrainingWarning, train

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------------
# synonyms and pairs


def test_concept_pairs_are_all_unordered_pairs_of_distinct_names():
    for n in range(1, 9):
        names = [f"name {i}" for i in range(n)]
        pairs = concept_pairs("C1", names + names[:2])  # repeated names count once
        assert len(pairs) == n * (n - 1) // 2
        assert {frozenset((a, b)) for _, a, b in pairs} == {frozenset(p) for p in combinations(names, 2)}
        assert all(cid == "C1" and a != b for cid, a, b in pairs)


def test_concept_pairs_cut_to_max_pairs_with_a_seed():
    names = [f"name {i}" for i in range(15)]  # 105 pairs
    first = concept_pairs("C1", names, 50, random.Random(7))
    again = concept_pairs("C1", names, 50, random.Random(7))
    other = concept_pairs("C1", names, 50, random.Random(8))
    assert len(first) == 50 and len(set(first)) == 50
    assert first == again
    assert set(first) != set(other)
    # the same sample as the reference code's random.sample over the full list of pairs
    reference = random.Random(7).sample([("C1", a, b) for a, b in combinations(names, 2)], 50)
    assert first == reference


def test_write_pairs_is_seeded_per_concept(tmp_path):
    synonyms = [("C1", [f"a{i}" for i in range(12)]), ("C2", ["x", "y", "z"]), ("C3", ["only"])]
    write_pairs(tmp_path / "s1.txt", synonyms, max_pairs=50, seed=1)
    write_pairs(tmp_path / "s1b.txt", synonyms, max_pairs=50, seed=1)
    write_pairs(tmp_path / "s2.txt", synonyms, max_pairs=50, seed=2)
    one = list(read_pairs(tmp_path / "s1.txt"))
    assert (tmp_path / "s1.txt").read_text() == (tmp_path / "s1b.txt").read_text()
    assert one != list(read_pairs(tmp_path / "s2.txt"))
    assert sum(1 for p in one if p[0] == "C1") == 50 and sum(1 for p in one if p[0] == "C2") == 3
    assert not any(p[0] == "C3" for p in one)
    assert (tmp_path / "s1.txt").read_text().splitlines()[-1].count("||") == 2


def test_extract_synonyms_lowercases_and_deduplicates(tmp_path):
    concepts = [
        Concept("D1", "Heart Failure", ["heart failure", "HEART  FAILURE", "Cardiac failure"]),
        Concept("D2", "Hepatoma", []),
    ]
    items = list(extract_synonyms(concepts))
    assert items == [("D1", ["heart failure", "cardiac failure"]), ("D2", ["hepatoma"])]
    assert list(extract_synonyms(concepts, lowercase=False))[0][1] == ["Heart Failure", "heart failure", "HEART FAILURE", "Cardiac failure"]
    path = tmp_path / "syn.txt"
    assert write_synonyms(path, items) == 2
    assert path.read_text(encoding="utf8") == "D1||heart failure|cardiac failure\nD2||hepatoma\n"
    assert list(read_synonyms(path)) == items


def conso(cui, lat, name, ispref="N", ts="S", stt="VO", sab="RXNORM", suppress="N", aui=0):
    fields = [cui, lat, ts, "L1", stt, "S1", ispref, f"A{aui}", "", "", "", sab, "PT", "123", name, "0", suppress, "256"]
    assert len(fields) == 18
    return "|".join(fields) + "|\n"


def rel(cui1, rela, cui2):
    fields = [cui1, "A1", "CUI", "RO", cui2, "A2", "CUI", rela, "R1", "", "RXNORM", "RXNORM", "", "Y", "N", "256"]
    assert len(fields) == 16
    return "|".join(fields) + "|\n"


@pytest.fixture
def umls_dir(tmp_path):
    (tmp_path / "MRCONSO.RRF").write_text(
        conso("C0000001", "ENG", "Aspirin", "Y", "P", "PF")
        + conso("C0000001", "ENG", "Acetylsalicylic acid")
        + conso("C0000001", "FRE", "Aspirine")
        + conso("C0000002", "ENG", "Bayer Aspirin", "Y", "P", "PF")
        + conso("C0000002", "ENG", "BAYER ASPIRIN")
        + conso("C0000003", "ENG", "Heart attack", "Y", "P", "PF")
        + conso("C0000003", "ENG", "Myocardial infarction old", suppress="O")
        + conso("C0000004", "ENG", "Ecotrin", "Y", "P", "PF")
        + conso("C0000005", "SPA", "solo espanol"),
        encoding="utf8",
    )
    (tmp_path / "MRREL.RRF").write_text(
        rel("C0000001", "has_tradename", "C0000002")
        + rel("C0000002", "tradename_of", "C0000001")
        + rel("C0000004", "tradename_of", "C0000001")
        + rel("C0000003", "isa", "C0000001"),
        encoding="utf8",
    )
    (tmp_path / "MRSTY.RRF").write_text(
        "C0000001|T121|A1.4.1.1.1|Pharmacologic Substance|AT1|256|\n"
        "C0000001|T109|A1.4.1.2.1|Organic Chemical|AT2|256|\n"
        "C0000002|T121|A1.4.1.1.1|Pharmacologic Substance|AT3|256|\n"
        "C0000003|T047|B2.2.1.2.1|Disease or Syndrome|AT4|256|\n",
        encoding="utf8",
    )
    return tmp_path


def test_umls_tradenames_are_appended_not_overwritten(umls_dir):
    concepts = list(umls_concepts(umls_dir / "MRCONSO.RRF", mrrel=umls_dir / "MRREL.RRF"))
    synonyms = dict(extract_synonyms(concepts))
    assert synonyms == {
        "C0000001": ["aspirin", "acetylsalicylic acid", "bayer aspirin", "ecotrin"],
        "C0000002": ["bayer aspirin", "aspirin", "acetylsalicylic acid"],
        "C0000003": ["heart attack"],  # the "isa" relation adds nothing; suppressed row dropped
        "C0000004": ["ecotrin", "aspirin", "acetylsalicylic acid"],
    }
    by_id = {c.id: c for c in concepts}
    assert by_id["C0000002"].name == "Bayer Aspirin"  # its own canonical name is kept
    without = dict(extract_synonyms(umls_concepts(umls_dir / "MRCONSO.RRF")))
    assert without["C0000001"] == ["aspirin", "acetylsalicylic acid"]
    all_languages = dict(extract_synonyms(umls_concepts(umls_dir / "MRCONSO.RRF", languages=None)))
    assert "aspirine" in all_languages["C0000001"] and "C0000005" in all_languages


def test_an_mrconso_not_sorted_by_cui_is_refused_by_extract_and_nothing_is_written(umls_dir, cli_app):
    """Unsorted, a CUI's rows make two concepts, so two synonyms lines of one name each: no pair, no error (found by
    an audit). The file is refused where the CUI comes again; the earlier output stays. Rows grouped by CUI in another
    order are fine (test_crosslingual's file)."""
    from typer.testing import CliRunner

    runner = CliRunner()
    mrconso = umls_dir / "MRCONSO.RRF"
    mrconso.write_text(
        conso("C0000001", "ENG", "Heart attack", "Y", "P", "PF") + conso("C0000002", "ENG", "Fever", "Y", "P", "PF")
        + conso("C0000001", "ENG", "Myocardial infarction"), encoding="utf8",
    )
    output = umls_dir / "synonyms.txt"
    output.write_text("C9||earlier\n", encoding="utf8")
    result = runner.invoke(cli_app, ["extract", "--mrconso", str(mrconso), "-o", str(output)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"error: {mrconso}: the rows of CUI C0000001 are not together (it comes again after other CUIs), as they are in "
        "MRCONSO.RRF as released; sort the file by CUI first (LC_ALL=C sort -t'|' -k1,1 -s)"
    )
    assert output.read_text(encoding="utf8") == "C9||earlier\n"
    result = runner.invoke(cli_app, ["extract", "--mrconso", str(mrconso), "--languages", "SPA", "-o", str(output)])
    assert result.exit_code == 1 and f"error: {output}: no concept with a name to write" in result.output  # not its temporary file


def test_umls_semantic_types_merge_join_and_unsorted_fallback(umls_dir):
    mrconso, mrsty = umls_dir / "MRCONSO.RRF", umls_dir / "MRSTY.RRF"
    types = {c.id: c.types for c in umls_concepts(mrconso, mrsty=mrsty)}
    assert types == {"C0000001": ["T121", "T109"], "C0000002": ["T121"], "C0000003": ["T047"], "C0000004": []}
    lines = mrsty.read_text().splitlines(keepends=True)
    mrsty.write_text("".join(reversed(lines)))  # not sorted by CUI: falls back to a dict
    again = {c.id: sorted(c.types) for c in umls_concepts(mrconso, mrsty=mrsty)}
    assert again == {k: sorted(v) for k, v in types.items()}
    drugs = [c.id for c in umls_concepts(mrconso, mrsty=mrsty, semantic_types=["T121"])]
    assert drugs == ["C0000001", "C0000002"]


def test_finetune_pairs_from_pubtator(tmp_path):
    title = "Aspirin after a heart attack."
    abstract = "Breast and ovarian cancer risk, and hepatoma."
    text = f"{title} {abstract}"

    def line(mention, gold, parts=None, nth=0):
        start = text.index(mention) if not nth else text.index(mention, text.index(mention) + 1)
        extra = f"\t{parts}" if parts else ""
        return f"1\t{start}\t{start + len(mention)}\t{mention}\tDisease\t{gold}{extra}\n"

    corpus = tmp_path / "train.pubtator"
    corpus.write_text(
        f"1|t|{title}\n1|a|{abstract}\n"
        + line("Aspirin", "D001")
        + line("heart attack", "-1")
        + line("Breast and ovarian cancer", "D010|D011", "Breast cancer|ovarian cancer")
        + line("ovarian cancer risk", "D010|D011")  # composite without listed parts: skipped
        + line("cancer", "D010+D011")  # combination: skipped
        + line("hepatoma", "D999")  # not in the vocabulary
        + "\n",
        encoding="utf8",
    )
    kb = KnowledgeBase([
        Concept("D001", "Aspirin", ["Acetylsalicylic acid", "ASA"]),
        Concept("D010", "Breast cancer", ["breast carcinoma"]),
        Concept("D011", "Ovarian cancer", ["ovary cancer"]),
    ])
    stats = {}
    pairs = finetune_pairs(read_pubtator(corpus), kb, stats=stats)
    assert pairs == [
        ("D001", "aspirin", "acetylsalicylic acid"),
        ("D001", "aspirin", "asa"),
        ("D010", "breast cancer", "breast carcinoma"),
        ("D011", "ovarian cancer", "ovary cancer"),
    ]
    assert stats == {"mentions": 6, "used": 2, "cuiless": 1, "combination": 1, "composite_skipped": 1, "unknown_id": 1, "cuiless_part": 0}
    assert len(finetune_pairs(read_pubtator(corpus), kb, composites="skip")) == 2


def test_finetune_pairs_read_prefixed_golds_bare_and_count_a_parts_missing_concept(tmp_path):
    """MedMentions writes "UMLS:C..." and PubTator "MESH:D..." golds, the readers name those concepts bare: every
    MedMentions mention was "not in the vocabulary" (found by an audit). A "-1" part of a composite names no concept."""
    text = "Mucoviscidosis and naloxone. Breast and skin lesions."
    corpus = tmp_path / "train.pubtator"
    corpus.write_text(
        f"1|t|{text}\n1|a|\n"
        f"1\t0\t14\tMucoviscidosis\tDisease\tUMLS:C0010674\n"
        f"1\t19\t27\tnaloxone\tChemical\tMESH:D009270\n"
        f"1\t29\t52\tBreast and skin lesions\tDisease\tD001|-1\tBreast lesions|skin lesions\n\n",
        encoding="utf8",
    )
    kb = KnowledgeBase([
        Concept("C0010674", "Cystic fibrosis"), Concept("D009270", "Naloxone", ["narcan"]), Concept("D001", "Breast disease"),
    ])
    stats = {}
    pairs = finetune_pairs(read_pubtator(corpus), kb, stats=stats)
    assert pairs == [
        ("C0010674", "mucoviscidosis", "cystic fibrosis"), ("D009270", "naloxone", "narcan"), ("D001", "breast lesions", "breast disease"),
    ]
    assert stats["unknown_id"] == 0 and stats["cuiless_part"] == 1 and stats["used"] == 3


def test_malformed_pairs_line_names_file_and_line(tmp_path, tiny_bert):
    path = tmp_path / "pairs.txt"
    path.write_text("C1||a||b\n\nC2||only one name\nC3||x||y\n", encoding="utf8")
    with pytest.raises(VocabularyFormatError, match=r"pairs\.txt, line 3"):
        list(read_pairs(path))
    with pytest.raises(VocabularyFormatError, match=r"pairs\.txt, line 3"):
        PairsFile(path)
    config = TrainConfig(model=tiny_bert, output=str(tmp_path / "out"), pairs=str(path), device="cpu", progress=False)
    with pytest.raises(VocabularyFormatError, match=r"pairs\.txt, line 3"):
        train(config)
    path.write_text("C1||a||b\n\nC3||x||y\n", encoding="utf8")
    with PairsFile(path) as pairs:
        assert len(pairs) == 2 and pairs[1] == ("C3", "x", "y")


def test_a_byte_order_mark_is_not_part_of_the_first_pairs_id(tmp_path):
    """An editor's BOM made the first line's id "\\ufeffC1", a class of its own beside C1 (found by an audit)."""
    path = tmp_path / "pairs.txt"
    path.write_bytes("\ufeffC1||heart attack||myocardial infarction\r\nC1||heart attack||mi\r\n".encode("utf8"))
    assert [pair[0] for pair in read_pairs(path)] == ["C1", "C1"]
    with PairsFile(path) as pairs:
        assert pairs[0] == ("C1", "heart attack", "myocardial infarction") and pairs[1][0] == "C1"


def test_missing_model_is_the_encoder_error(tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("C1||a||b\n", encoding="utf8")
    (tmp_path / "empty-model").mkdir()
    config = TrainConfig(model=str(tmp_path / "empty-model"), output=str(tmp_path / "out"), pairs=str(pairs), device="cpu", progress=False)
    with pytest.raises(EncoderLoadError, match="config.json"):
        train(config)


# ----------------------------------------------------------------------------------------------------
# loss and miner


def ms_loss_reference(embeddings, triplets, alpha, beta, base, neg_base=None):
    """Multi-similarity loss (Wang et al. 2019) over the miner's pairs, in plain python loops; with
    `neg_base`, v2's separate margins (`base` for the positives, `neg_base` for the negatives)."""
    neg_base = base if neg_base is None else neg_base
    vectors = [[float(x) for x in row] for row in embeddings]
    norms = [math.sqrt(sum(x * x for x in v)) for v in vectors]
    n = len(vectors)

    def sim(i, j):
        return sum(a * b for a, b in zip(vectors[i], vectors[j])) / (norms[i] * norms[j])

    positives = {(int(a), int(p)) for a, p, _ in zip(*triplets)}
    negatives = {(int(a), int(q)) for a, _, q in zip(*triplets)}
    total = 0.0
    for i in range(n):
        pos = [sim(i, p) for a, p in positives if a == i]
        neg = [sim(i, q) for a, q in negatives if a == i]
        if pos:
            total += 1.0 / alpha * math.log(1 + sum(math.exp(-alpha * (s - base)) for s in pos))
        if neg:
            total += 1.0 / beta * math.log(1 + sum(math.exp(beta * (s - neg_base)) for s in neg))
    return total / n  # mean over every embedding of the batch


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
@pytest.mark.parametrize("alpha,beta,base", [(2, 50, 0.5), (1, 60, 0.5), (3, 40, 0.3)])
def test_library_loss_matches_the_loop_reference(distance, alpha, beta, base):
    generator = torch.Generator().manual_seed(alpha * 100 + beta)
    embeddings = torch.randn(16, 8, generator=generator)
    labels = torch.arange(8).repeat(2)  # B=8 pairs: both names of a pair share a label
    miner, loss = make_miner(0.2, distance=distance), make_loss(alpha, beta, base)
    triplets = miner(embeddings, labels)
    assert len(triplets[0]) > 1
    expected = ms_loss_reference(embeddings, triplets, alpha, beta, base)
    assert float(loss(embeddings, labels, triplets)) == pytest.approx(expected, rel=1e-4)
    assert float(sap_loss(embeddings, labels, miner, loss)) == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("pos_margin,neg_margin", [(1.0, 0.5), (0.8, 0.3)])
def test_ms_v2_matches_the_loop_reference_with_separate_margins(pos_margin, neg_margin):
    embeddings = torch.randn(16, 8, generator=torch.Generator().manual_seed(7), requires_grad=True)
    labels = torch.arange(8).repeat(2)
    miner = make_miner(0.2)
    loss = make_loss(2, 50, 0.5, kind="ms-v2", pos_margin=pos_margin, neg_margin=neg_margin)
    triplets = miner(embeddings, labels)
    expected = ms_loss_reference(embeddings.detach(), triplets, 2, 50, pos_margin, neg_base=neg_margin)
    value = sap_loss(embeddings, labels, miner, loss)
    assert float(value.detach()) == pytest.approx(expected, rel=1e-4)
    value.backward()
    assert embeddings.grad is not None and float(embeddings.grad.abs().sum()) > 0


@pytest.mark.parametrize("mined", [True, False])
def test_ms_v2_with_one_margin_is_the_librarys_loss(mined):
    embeddings = torch.randn(16, 8, generator=torch.Generator().manual_seed(11))
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2, 3, 4, 4, 5, 5, 6, 6, 7, 7])
    triplets = make_miner(0.2)(embeddings, labels) if mined else None
    library = make_loss(2, 50, 0.4)
    v2 = make_loss(2, 50, kind="ms-v2", pos_margin=0.4, neg_margin=0.4)
    args = (embeddings, labels, triplets) if mined else (embeddings, labels)
    assert float(v2(*args)) == pytest.approx(float(library(*args)), rel=1e-5)
    with pytest.raises(ValueError, match="ms-v4"):
        make_loss(kind="ms-v4")
    with pytest.raises(SapbertError, match="loss='ms-v4'"):
        TrainConfig(model="m", output="o", pairs="p", loss="ms-v4").validate()
    with pytest.raises(SapbertError, match="ms-v3 needs --kge"):
        TrainConfig(model="m", output="o", pairs="p", loss="ms-v3").validate()


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_miner_returns_exactly_the_triplets_that_violate_the_margin(distance):
    margin = 0.2
    embeddings = torch.randn(12, 6, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])
    a, p, n = make_miner(margin, distance=distance)(embeddings, labels)
    mined = set(zip(a.tolist(), p.tolist(), n.tolist()))
    unit = torch.nn.functional.normalize(embeddings.double(), dim=1)
    cos = unit @ unit.T
    violating = set()
    for i in range(12):
        for j in range(12):
            for k in range(12):
                if i == j or labels[i] != labels[j] or labels[i] == labels[k]:
                    continue
                if distance == "euclidean":
                    d_ap, d_an = math.sqrt(max(2 - 2 * cos[i, j], 0)), math.sqrt(max(2 - 2 * cos[i, k], 0))
                    gap = d_an - d_ap
                else:
                    gap = float(cos[i, j] - cos[i, k])
                if gap <= margin - 1e-6:
                    violating.add((i, j, k))
                elif gap <= margin + 1e-6:
                    mined.discard((i, j, k))  # on the margin: float32 may go either way
    assert mined and mined == violating


# ----------------------------------------------------------------------------------------------------
# trainer

TOY_SYNONYMS = [
    ("D1", ["heart failure", "cardiac failure", "heart decompensation", "cardiac insufficiency"]),
    ("D2", ["liver cancer", "hepatic cancer", "hepatoma"]),
    ("D3", ["kidney disease", "renal disease", "nephropathy"]),
    ("D4", ["acute kidney failure", "acute renal failure", "arf"]),
    ("D5", ["vitamin deficiency", "hypovitaminosis"]),
    ("D6", ["breast cancer", "breast carcinoma", "mammary cancer"]),
    ("D7", ["high blood pressure", "hypertension"]),
    ("D8", ["heart attack", "myocardial infarction", "cardiac infarction"]),
]


@pytest.fixture
def toy_pairs(tmp_path):
    path = tmp_path / "pairs.txt"
    write_pairs(path, TOY_SYNONYMS, seed=0)
    return path


def eval_loss(model_dir, pairs_path):
    """The loss of a model on all toy pairs, eval mode, all pairs in one batch."""
    from spacy_sapbert.encoder import load_pretrained, pool

    tokenizer, model = load_pretrained(str(model_dir))
    model.eval()
    pairs = list(read_pairs(pairs_path))
    ids = {}
    labels = [ids.setdefault(c, len(ids)) for c, _, _ in pairs]
    texts = [a for _, a, _ in pairs] + [b for _, _, b in pairs]
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, truncation=True, max_length=25, return_tensors="pt")
        embeddings = pool(model(**batch).last_hidden_state, batch["attention_mask"], "cls")
        return float(sap_loss(embeddings, torch.tensor(labels + labels), make_miner(), make_loss()))


def state_dict(model_dir):
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(model_dir)).state_dict()


def test_training_lowers_the_loss_and_writes_model_log_and_plot(tmp_path, tiny_bert, toy_pairs, one_thread):
    out = tmp_path / "run"
    config = TrainConfig(
        model=tiny_bert, output=str(out), pairs=str(toy_pairs), batch_size=16, lr=2e-3, epochs=12,
        log_every=2, checkpoint_every=10, device="cpu", progress=False,
    )
    model_dir = train(config)
    assert model_dir == out / "model"
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == list(range(2, 25, 2))  # 23 pairs -> 2 steps per epoch, 24 steps
    assert set(log[0]) == {"step", "epoch", "loss", "pairs_per_s", "lr", "elapsed"}
    assert log[-1]["epoch"] == 11 and log[0]["lr"] == pytest.approx(2e-3)
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "checkpoints/last/trainer_state.json").read_text())["step"] == 24
    before, after = state_dict(tiny_bert), state_dict(model_dir)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert "encoder.layer.0.attention.self.query.weight" in changed
    assert all(k.startswith("pooler.") is False for k in changed)  # the unused pooler is frozen
    assert eval_loss(model_dir, toy_pairs) < eval_loss(tiny_bert, toy_pairs)
    vectors = Encoder(str(model_dir), device="cpu").encode(["heart failure", "hepatoma"])
    assert vectors.shape == (2, 32)
    assert not list(out.glob("checkpoints/.*")) and not list(out.glob(".*tmp*"))  # no temp folders left
    card = (model_dir / "README.md").read_text(encoding="utf8")
    assert card.startswith("---\nlibrary_name: transformers") and "self-alignment pretraining" in card
    assert f"Last logged step 24 (epoch 11), loss {log[-1]['loss']}" in card and f"| `pairs` | `{toy_pairs}` |" in card
    assert "| `lr` | `0.002` |" in card and "mean pooling" not in card and "cls pooling at max_length 25" in card


def test_resumed_run_ends_with_the_same_weights(tmp_path, tiny_bert, toy_pairs, one_thread):
    def config(name, max_steps):
        return TrainConfig(
            model=tiny_bert, output=str(tmp_path / name), pairs=str(toy_pairs), batch_size=3, grad_accum=2, lr=1e-3,
            epochs=3, max_steps=max_steps, checkpoint_every=3, log_every=1, seed=5, device="cpu", progress=False,
        )

    # 23 pairs / 3 = 8 micro-batches = 4 steps per epoch; 10 steps cross two epoch boundaries
    full = train(config("full", 10))
    train(config("split", 5))  # stops inside the second epoch
    state = json.loads((tmp_path / "split/checkpoints/last/trainer_state.json").read_text())
    assert (state["step"], state["epoch"], state["step_in_epoch"]) == (5, 1, 1)
    resumed = train(config("split", 10), resume=True)
    a, b = state_dict(full), state_dict(resumed)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], state_dict(tiny_bert)[k]) for k in a)
    steps = [json.loads(line)["step"] for line in (tmp_path / "split/train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 11))
    full_log = (tmp_path / "full/train_log.jsonl").read_text().splitlines()
    split_log = (tmp_path / "split/train_log.jsonl").read_text().splitlines()
    assert [json.loads(x)["loss"] for x in full_log] == [json.loads(x)["loss"] for x in split_log]


def test_a_run_killed_between_log_entries_logs_the_losses_of_an_uninterrupted_one(tmp_path, tiny_bert, toy_pairs, one_thread, monkeypatch):
    """The first log entry after a resume averaged only the steps since the resume, not those since the last entry."""
    from spacy_sapbert.training.loop import TrainingRun

    def config(name):
        return TrainConfig(
            model=tiny_bert, output=str(tmp_path / name), pairs=str(toy_pairs), batch_size=3, lr=1e-3, max_steps=8,
            checkpoint_every=3, log_every=4, seed=5, device="cpu", progress=False,
        )

    train(config("full"))
    real_update, updates = TrainingRun.update, []

    def killed_at_step_4(self):
        if len(updates) == 3:  # after the checkpoint at step 3, with steps 1..3 not yet in the log
            raise KeyboardInterrupt
        updates.append(1)
        real_update(self)

    monkeypatch.setattr(TrainingRun, "update", killed_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        train(config("split"))
    monkeypatch.undo()
    train(config("split"), resume=True)
    read = lambda name: [json.loads(line) for line in (tmp_path / name / "train_log.jsonl").read_text().splitlines()]
    assert [(e["step"], e["loss"]) for e in read("split")] == [(e["step"], e["loss"]) for e in read("full")]
    assert [e["step"] for e in read("full")] == [4, 8]


def test_prefetching_the_next_micro_batch_in_a_thread_trains_the_same_weights(tmp_path, tiny_bert, toy_pairs, one_thread, monkeypatch):
    """On CUDA the next micro-batch is read and tokenized in a worker thread; forced on here, over epoch ends,
    gradient accumulation, checkpoints and a resume, it must give the weights and losses of the plain loop."""
    import threading

    from spacy_sapbert.training import trainer
    from spacy_sapbert.training.pairs import PairsFile

    threads = set()
    real_batch = PairsFile.batch

    def recording_batch(self, indices):
        threads.add(threading.current_thread().name.split("_")[0])
        return real_batch(self, indices)

    monkeypatch.setattr(PairsFile, "batch", recording_batch)

    def config(name, max_steps):
        return TrainConfig(
            model=tiny_bert, output=str(tmp_path / name), pairs=str(toy_pairs), batch_size=3, grad_accum=2, lr=1e-3,
            epochs=3, max_steps=max_steps, checkpoint_every=3, log_every=1, seed=5, device="cpu", progress=False,
        )

    plain = train(config("plain", 10))
    assert threads == {"MainThread"}
    monkeypatch.setattr(trainer, "prefetch_ahead", lambda device: True)
    threads.clear()
    ahead = train(config("ahead", 10))
    assert threads == {"MainThread", "prefetch"}  # the first micro-batch in the caller, the others in the worker
    train(config("split", 5))
    resumed = train(config("split", 10), resume=True)
    a = state_dict(plain)
    for other in (state_dict(ahead), state_dict(resumed)):
        assert all(torch.equal(a[k], other[k]) for k in a)
    losses = {name: [json.loads(x)["loss"] for x in (tmp_path / name / "train_log.jsonl").read_text().splitlines()]
              for name in ("plain", "ahead", "split")}
    assert losses["plain"] == losses["ahead"] == losses["split"] and len(losses["plain"]) == 10


def test_prefetcher_prepares_the_predicted_key_ahead_and_raises_its_errors_on_get():
    import threading

    from spacy_sapbert.training.prefetch import Prefetcher

    seen = []

    def prepare(key):
        seen.append((key, threading.current_thread().name.startswith("prefetch")))
        if key == "bad":
            raise ValueError("broken line")
        return key * 2

    prefetch = Prefetcher(prepare, ahead=True)
    assert prefetch.get(1, 2) == 2
    assert prefetch.get(2, 3) == 4  # prepared in the worker
    assert prefetch.get(7, "bad") == 14  # 3 was predicted but not asked for: 7 runs in the caller
    with pytest.raises(ValueError, match="broken line"):
        prefetch.get("bad", None)
    prefetch.close()
    assert seen == [(1, False), (2, True), (3, True), (7, False), ("bad", True)]
    inline = Prefetcher(prepare, ahead=False)
    assert inline.get(4, 5) == 8 and inline.get(5, 6) == 10
    assert seen[-2:] == [(4, False), (5, False)]


def test_encode_chunk_defaults_to_64_on_cpu_and_the_whole_micro_batch_on_cuda():
    from spacy_sapbert.training.trainer import resolve_encode_chunk

    assert resolve_encode_chunk(0, 256, torch.device("cpu")) == 64
    assert resolve_encode_chunk(0, 256, torch.device("cuda")) == 512  # both names of 256 pairs
    assert resolve_encode_chunk(13, 256, torch.device("cuda")) == 13
    with pytest.raises(SapbertError, match="encode_chunk=-1"):
        TrainConfig(model="m", output="o", pairs="p", encode_chunk=-1).validate()


def test_a_run_records_the_chunk_it_used_and_resumes_a_run_of_the_old_default(tmp_path, tiny_bert, toy_pairs, one_thread):
    import warnings

    def config(max_steps, **kwargs):
        return TrainConfig(model=tiny_bert, output=str(tmp_path / "run"), pairs=str(toy_pairs), batch_size=4,
                           max_steps=max_steps, checkpoint_every=1, device="cpu", progress=False, **kwargs)

    train(config(2, encode_chunk=64))  # as recorded before the default became 0 (auto)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(config(3), resume=True)
    assert not [w for w in caught if "encode_chunk" in str(w.message)]  # a changed trajectory setting warns
    assert json.loads((tmp_path / "run/train_config.json").read_text())["encode_chunk"] == 64
    with pytest.warns(TrainingWarning, match="encode_chunk"):
        train(config(4, encode_chunk=8), resume=True)


def test_train_config_from_dict_names_unknown_settings():
    config = {"model": "m", "output": "o", "pairs": "p", "batch_size": 8}
    assert TrainConfig.from_dict(config).batch_size == 8
    with pytest.raises(SapbertError, match="unknown training setting\\(s\\) 'batch'"):
        TrainConfig.from_dict(dict(config, batch=8))


@pytest.mark.parametrize("num_pairs, world_size, batch_size", [(21, 2, 4), (24, 3, 5), (10, 4, 3), (7, 1, 3)])
def test_ranks_split_each_micro_batch_and_together_cover_the_epoch(num_pairs, world_size, batch_size):
    from collections import Counter

    from spacy_sapbert.training.trainer import epoch_order, micro_batch

    order = epoch_order(num_pairs, world_size, seed=3, epoch=1)
    pad = (-num_pairs) % world_size
    n_batches = math.ceil((num_pairs + pad) / (batch_size * world_size))
    seen = [[micro_batch(order, i, batch_size, rank, world_size) for i in range(n_batches)] for rank in range(world_size)]
    for i in range(n_batches):
        sizes = {len(batches[i]) for batches in seen}
        assert len(sizes) == 1 and 0 < sizes.pop() <= batch_size  # every rank the same number of pairs
    counts = Counter(index for batches in seen for batch in batches for index in batch)
    assert set(counts) == set(range(num_pairs))  # together: the whole epoch
    assert sum(counts.values()) == num_pairs + pad and sum(c - 1 for c in counts.values()) == pad  # once, bar the padding
    for batches in seen:
        own = [index for batch in batches for index in batch]
        assert len(own) == len(set(own)) == (num_pairs + pad) // world_size


# Run under torchrun: records, per rank, the pair indices each micro-batch read from the pairs file.
RECORDING_ENTRY = """
import json, os, runpy, sys
from spacy_sapbert.training.pairs import PairsFile

real_batch = PairsFile.batch

def recording_batch(self, indices):
    indices = [int(i) for i in indices]
    with open(os.path.join(os.environ["SEEN_DIR"], f"rank{os.environ['RANK']}.jsonl"), "a") as out:
        out.write(json.dumps(indices) + "\\n")
    return real_batch(self, indices)

PairsFile.batch = recording_batch
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""


def test_torchrun_two_cpu_processes(tmp_path, tiny_bert, toy_pairs):
    out = tmp_path / "ddp"
    entry = tmp_path / "recording_entry.py"
    entry.write_text(RECORDING_ENTRY, encoding="utf8")
    (tmp_path / "seen").mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT), SEEN_DIR=str(tmp_path / "seen"))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(entry)]
    command += [
        "spacy_sapbert", "train", str(toy_pairs), "--model", tiny_bert, "--output", str(out),
        "--batch-size", "4", "--lr", "1e-3", "--max-steps", "3", "--epochs", "5", "--log-every", "1",
        "--checkpoint-every", "2", "--device", "cpu", "--no-progress",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "model/config.json").exists()
    state = json.loads((out / "checkpoints/last/trainer_state.json").read_text())
    assert state["world_size"] == 2 and state["step"] == 3
    assert len(torch.load(out / "checkpoints/last/rng.pt", weights_only=True)) == 2  # both ranks' RNG states
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == [1, 2, 3]  # written once, by rank 0
    before, after = state_dict(tiny_bert), state_dict(out / "model")
    assert not all(torch.equal(before[k], after[k]) for k in before)
    # 23 pairs, 4 per rank and micro-batch: 3 steps are one epoch, padded to 24 by repeating one pair
    assert len(list(read_pairs(toy_pairs))) == 23
    seen = [[json.loads(line) for line in (tmp_path / "seen" / f"rank{rank}.jsonl").read_text().splitlines()] for rank in (0, 1)]
    assert [len(batch) for batch in seen[0]] == [len(batch) for batch in seen[1]] == [4, 4, 4]
    first, second = ([index for batch in batches for index in batch] for batches in seen)
    assert len(set(first)) == len(first) and len(set(second)) == len(second)
    assert len(set(first) & set(second)) == 1  # the ranks' shards are disjoint but for the padding pair
    assert set(first) | set(second) == set(range(23))  # and together cover the epoch


# ----------------------------------------------------------------------------------------------------
# commands


@pytest.fixture
def cli_app():
    """The package's CLI, which turns a command's error into one line."""
    from spacy_sapbert.cli import app

    return app


@pytest.mark.parametrize("command", ["extract", "pairs", "train"])
def test_commands_have_help(cli_app, command):
    from typer.testing import CliRunner

    result = CliRunner().invoke(cli_app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_extract_pairs_train_commands(cli_app, tmp_path, tiny_bert, umls_dir, one_thread):
    from typer.testing import CliRunner

    runner = CliRunner()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("D1||Heart failure|Cardiac failure|HEART FAILURE\nD2||Hepatoma|Liver cancer|hepatic cancer\n", encoding="utf8")
    syn = tmp_path / "syn.txt"
    result = runner.invoke(cli_app, ["extract", str(vocab), "-o", str(syn)])
    assert result.exit_code == 0, result.output
    assert syn.read_text() == "D1||heart failure|cardiac failure\nD2||hepatoma|liver cancer|hepatic cancer\n"
    umls_syn = tmp_path / "umls.txt"
    result = runner.invoke(cli_app, ["extract", "--mrconso", str(umls_dir / "MRCONSO.RRF"), "--mrrel", str(umls_dir / "MRREL.RRF"), "-o", str(umls_syn)])
    assert result.exit_code == 0, result.output
    assert "C0000004||ecotrin|aspirin|acetylsalicylic acid" in umls_syn.read_text()
    pairs = tmp_path / "pairs.txt"
    result = runner.invoke(cli_app, ["pairs", str(syn), str(pairs), "--max-pairs", "2", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert len(list(read_pairs(pairs))) == 3
    result = runner.invoke(cli_app, [
        "train", str(pairs), "--model", tiny_bert, "--output", str(tmp_path / "run"), "--batch-size", "2",
        "--max-steps", "2", "--device", "cpu", "--no-progress", "--log-every", "1",
    ])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run/model/config.json").exists()
    bad = tmp_path / "bad.txt"
    bad.write_text("C1||a||b\nC1|a|b\n", encoding="utf8")
    result = runner.invoke(cli_app, ["train", str(bad), "--model", tiny_bert, "--output", str(tmp_path / "bad-run"), "--device", "cpu"])
    assert result.exit_code == 1 and "bad.txt, line 2" in result.output


def test_mixed_precision_is_plain_float32_on_cpu_and_saves_its_scaler(tmp_path):
    """Both trainers step through MixedPrecision: on CPU it must be exactly a plain backward + step."""
    from spacy_sapbert.training.checkpoints import MixedPrecision

    def run(use_precision: bool) -> torch.Tensor:
        torch.manual_seed(0)
        layer = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        loss = layer(torch.ones(2, 3)).pow(2).mean()
        if use_precision:
            precision = MixedPrecision(torch.device("cpu"), amp=True)
            assert not precision.enabled  # fp16 only on CUDA
            with precision.autocast():
                loss = layer(torch.ones(2, 3)).pow(2).mean()
            precision.backward(loss)
            precision.step(optimizer)
            precision.save(tmp_path)
        else:
            loss.backward()
            optimizer.step()
        return layer.weight.detach().clone()

    assert torch.equal(run(True), run(False))
    assert (tmp_path / MixedPrecision.FILE).is_file()
    MixedPrecision(torch.device("cpu"), amp=True).load(tmp_path)  # a saved state loads back


def test_cpu_bf16_runs_the_forward_pass_in_bfloat16_and_sap_still_learns(tmp_path, tiny_bert, toy_pairs, one_thread):
    from spacy_sapbert.training.checkpoints import MixedPrecision

    layer = torch.nn.Linear(3, 1)
    with MixedPrecision(torch.device("cpu"), amp=True, cpu_bf16=True).autocast():
        assert layer(torch.ones(2, 3)).dtype == torch.bfloat16
    with MixedPrecision(torch.device("cpu"), amp=True).autocast():
        assert layer(torch.ones(2, 3)).dtype == torch.float32  # off unless asked for
    out = tmp_path / "run"
    config = TrainConfig(
        model=tiny_bert, output=str(out), pairs=str(toy_pairs), batch_size=16, lr=2e-3, epochs=12,
        log_every=2, device="cpu", cpu_bf16=True, progress=False,
    )
    model_dir = train(config)
    assert json.loads((out / "train_config.json").read_text())["cpu_bf16"] is True
    assert all(p.dtype == torch.float32 for p in state_dict(model_dir).values() if p.is_floating_point())
    assert eval_loss(model_dir, toy_pairs) < eval_loss(tiny_bert, toy_pairs)


def test_cpu_bf16_warns_where_the_cpu_emulates_bfloat16(monkeypatch):
    from spacy_sapbert import backends
    from spacy_sapbert.training.checkpoints import MixedPrecision

    monkeypatch.setattr(backends, "_native_on_cpu", lambda dtype: False)
    with pytest.warns(RuntimeWarning, match="--cpu-bf16: this CPU has no native"):
        MixedPrecision(torch.device("cpu"), amp=True, cpu_bf16=True)


def test_a_damaged_checkpoint_file_is_named_on_resume(tmp_path, tiny_bert, toy_pairs, one_thread):
    config = TrainConfig(model=tiny_bert, output=str(tmp_path / "run"), pairs=str(toy_pairs), batch_size=4, max_steps=2,
                         checkpoint_every=1, device="cpu", progress=False)
    train(config)
    optimizer = tmp_path / "run" / "checkpoints" / "last" / "optimizer.pt"
    optimizer.write_bytes(optimizer.read_bytes()[:100])  # a run killed while it wrote the file
    with pytest.raises(SapbertError, match=f"{optimizer}: the checkpoint file cannot be read"):
        train(dataclasses.replace(config, max_steps=3), resume=True)
    # its state and its weights, cut short, are named too (a JSONDecodeError and a SafetensorError before: found by an audit)
    state = tmp_path / "run" / "checkpoints" / "last" / "trainer_state.json"
    state.write_text(state.read_text(encoding="utf8")[:20], encoding="utf8")
    with pytest.raises(SapbertError, match=f"{state}: the checkpoint's state cannot be read"):
        train(dataclasses.replace(config, max_steps=3), resume=True)
    weights = tmp_path / "run" / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(EncoderLoadError, match="its weights file is damaged"):
        train(dataclasses.replace(config, model=str(weights.parent), output=str(tmp_path / "run2")))


def test_a_checkpoint_that_cannot_be_written_is_named_and_the_one_before_kept(tmp_path, tiny_bert, toy_pairs, one_thread, monkeypatch):
    """A full disk while torch.save wrote a checkpoint surfaced as "RuntimeError: [enforce fail at inline_container.cc]"."""
    config = TrainConfig(model=tiny_bert, output=str(tmp_path / "run"), pairs=str(toy_pairs), batch_size=4, max_steps=1,
                         checkpoint_every=1, device="cpu", progress=False)
    train(config)
    state = (tmp_path / "run" / "checkpoints" / "last" / "trainer_state.json").read_text(encoding="utf8")

    def full_disk(obj, path, *args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(SapbertError, match=r"could not write the checkpoint .*is the disk full\? The checkpoint before it is kept"):
        train(dataclasses.replace(config, max_steps=2), resume=True)
    assert (tmp_path / "run" / "checkpoints" / "last" / "trainer_state.json").read_text(encoding="utf8") == state


def test_a_resume_that_would_train_nothing_with_new_settings_or_other_pairs_is_refused(tmp_path, tiny_bert, toy_pairs, one_thread, monkeypatch):
    """A finished run resumed with another lr trained nothing, yet its config and card then said the new lr; a run past
    --max-steps kept its extra steps; the same pairs path with other pairs went on silently. The same path spelled
    otherwise is the same run."""
    def config(max_steps, pairs=toy_pairs, **kwargs):
        return TrainConfig(model=tiny_bert, output=str(tmp_path / "run"), pairs=str(pairs), batch_size=4,
                           max_steps=max_steps, checkpoint_every=1, device="cpu", progress=False, **kwargs)

    train(config(2))
    recorded = (tmp_path / "run" / "train_config.json").read_text()
    with pytest.raises(SapbertError, match=r"the run already finished \(2 steps\), so resuming trains nothing and the model would not have lr"):
        train(config(2, lr=1e-3), resume=True)
    with pytest.raises(SapbertError, match=r"the checkpoint has done 2 steps, more than this run's 1"):
        train(config(1), resume=True)
    assert (tmp_path / "run" / "train_config.json").read_text() == recorded
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingWarning)
        train(config(3, pairs=Path("pairs.txt")), resume=True)  # relative: the same file
    lines = toy_pairs.read_text(encoding="utf8").splitlines()
    toy_pairs.write_text("\n".join(reversed(lines)) + "\n", encoding="utf8")  # the same pairs, in another order
    with pytest.raises(SapbertError, match=r"cannot resume: the run's pairs changed since the checkpoint"):
        train(config(4), resume=True)


def test_a_resume_with_another_lr_and_weight_decay_trains_with_them(tmp_path, tiny_bert, toy_pairs, one_thread):
    """The checkpoint's optimizer and schedule state carried the old lr and weight decay back in, while the warning,
    train_config.json and the model card said the new ones."""
    def config(max_steps, **kwargs):
        return TrainConfig(model=tiny_bert, output=str(tmp_path / "run"), pairs=str(toy_pairs), batch_size=4, max_steps=max_steps,
                           checkpoint_every=1, log_every=1, device="cpu", progress=False, **kwargs)

    train(config(2, lr=1e-3, weight_decay=0.01))
    with pytest.warns(TrainingWarning, match=r"lr \(0.001 -> 0.05\), weight_decay \(0.01 -> 0.5\)"):
        train(config(4, lr=5e-2, weight_decay=0.5), resume=True)
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [(entry["step"], entry["lr"]) for entry in log if "lr" in entry] == [(1, 1e-3), (2, 1e-3), (3, 5e-2), (4, 5e-2)]
    saved = torch.load(tmp_path / "run" / "checkpoints" / "last" / "optimizer.pt", weights_only=True)
    assert {(group["lr"], group["weight_decay"]) for group in saved["param_groups"]} == {(5e-2, 0.5)}
    recorded = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert recorded["lr"] == 5e-2
    # the records say that the first two steps ran otherwise (they gave the new settings alone: an audit), and keep
    # saying it across a later resume; so does the model card
    changed = [{"at": "2 steps", "changed": ["lr (0.001 -> 0.05)", "weight_decay (0.01 -> 0.5)"]}]
    assert recorded["resumed_with_other_settings"] == changed
    with pytest.warns(TrainingWarning, match=r"seed \(42 -> 7\)"):
        train(config(5, lr=5e-2, weight_decay=0.5, seed=7), resume=True)
    changed.append({"at": "4 steps", "changed": ["seed (42 -> 7)"]})
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["resumed_with_other_settings"] == changed
    assert "resumed_with_other_settings" in (tmp_path / "run" / "model" / "README.md").read_text()


def test_seen_ids_tells_a_cui_or_any_id_seen_before():
    from spacy_sapbert.training.extract import SeenIds

    seen = SeenIds()
    assert [seen.add(i) for i in ["C0000008", "C9999999", "C0000009", "C0000008", "X1", "X1", "C000001", "C000001"]] == [
        False, False, False, True, False, True, False, True]


def test_a_checkpoint_that_recorded_a_fingerprint_without_its_later_part_resumes(tmp_path):
    """A run on a DistilBERT-like base checkpointed before fingerprints gained their third part could not resume
    ("the run's model changed"; an audit): a recorded fingerprint matches on the parts it has, also inside the
    re-ranker's linker record; another model is still refused."""
    from spacy_sapbert.training.loop import check_resumed_settings

    config = TrainConfig(model="m", output=str(tmp_path), pairs="p.txt")
    state = {"config": dataclasses.asdict(config), "inputs": {"model": "0123456789abcdef-01234567",
                                                              "linker": {"encoder_fingerprint": "fedcba9876543210-76543210", "pooling": "cls"}}}
    now = {"model": "0123456789abcdef-01234567-89abcdef", "linker": {"encoder_fingerprint": "fedcba9876543210-76543210-0badcafe", "pooling": "cls"}}
    assert check_resumed_settings(config, state, tmp_path, (), (), now) is None
    for other in ({**now, "model": "1123456789abcdef-01234567-89abcdef"}, {**now, "linker": {**now["linker"], "pooling": "mean"}}):
        with pytest.raises(SapbertError, match="cannot resume: the run's (model|linker) changed"):
            check_resumed_settings(config, state, tmp_path, (), (), other)
