"""Shared fixtures: paths to ../shared/data and a tiny random BERT built locally (never downloaded)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def shared_file(*parts: str) -> Path:
    """A file under ../shared/data; the test is skipped when the shared data is not there, except
    under CI (CI=true), where ../shared sits beside the clone and a missing file is an error."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"shared data file not found under CI: {path}")
        pytest.skip(f"shared data file not found: {path}")
    return path


TOY_VOCAB = FIXTURES / "toy_vocab.txt"


def toy_tokenizer(tokenizer_class):
    """The toy word-piece tokenizer; transformers 5 takes `vocab`, transformers 4 `vocab_file`."""
    import inspect

    if "vocab" in inspect.signature(tokenizer_class.__init__).parameters:
        tokens = TOY_VOCAB.read_text(encoding="utf8").split("\n")
        return tokenizer_class(vocab={t: i for i, t in enumerate(t for t in tokens if t)}, do_lower_case=True)
    return tokenizer_class(vocab_file=str(TOY_VOCAB), do_lower_case=True)


def make_tiny_bert(folder: Path, hidden_size: int = 32, seed: int = 0) -> Path:
    """A randomly initialised 2-layer BERT with the committed toy word-piece vocabulary, saved as a HF folder."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tokenizer = toy_tokenizer(BertTokenizerFast)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def replace_saved_encoder(pipeline: Path, model: str, component: str = "sapbert_linker") -> None:
    """Put another model folder in place of a saved pipeline's encoder (a user's swap, or a corruption)."""
    import shutil

    encoder_dir = Path(pipeline) / component / "encoder"
    shutil.rmtree(encoder_dir)
    shutil.copytree(model, encoder_dir)


@pytest.fixture
def index_builds(monkeypatch) -> list:
    """A list that grows by one at every ConceptIndex.build (an encoding of a whole vocabulary)."""
    from spacy_sapbert.index import ConceptIndex

    builds: list = []
    original = ConceptIndex.build.__func__

    def counting_build(cls, *args, **kwargs):
        builds.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(ConceptIndex, "build", classmethod(counting_build))
    return builds


@pytest.fixture
def one_thread():
    """One intra-op thread: on 2 shared cores, OpenMP thread contention makes tiny models 50x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    return str(make_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="session")
def tiny_bert_48(tmp_path_factory) -> str:
    """A second tiny BERT whose vectors have another dimension, for mismatch tests."""
    return str(make_tiny_bert(tmp_path_factory.mktemp("tiny-bert-48"), hidden_size=48))


@pytest.fixture
def toy_concepts():
    from spacy_sapbert.kb import Concept

    return [
        Concept("D001", "Heart failure", ["cardiac failure", "heart decompensation"], types=["T047"]),
        Concept("D002", "Liver cancer", ["hepatic cancer", "hepatoma"], types=["T191"]),
        Concept("D003", "Kidney disease", ["renal disease", "nephropathy"], xrefs=["UMLS:C0022658"]),
        Concept("OMIM:100", "Acute kidney failure", ["acute renal failure", "ARF"], alt_ids=["D004"]),
        Concept("D005", "Vitamin deficiency", ["hypovitaminosis"]),
        Concept("D006", "Renal disease", ["kidney disorder"]),
    ]


@pytest.fixture
def linker_nlp(tiny_bert, toy_concepts):
    """A blank English pipeline with an initialized sapbert_linker over the toy concepts."""
    import spacy

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu", "k": 5})
    linker.initialize(vocabulary=toy_concepts)
    return nlp
