"""Cross-lingual SAP (XL-BEL): names of every language with their language recorded, translation pairs as
classes of their own, the XL-BEL open subset, and the multilingual path on a tiny random XLM-R."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.training.pairs import read_pairs, translation_pairs
from test_training import conso

WORDS = ("heart failure insuficiencia cardiaca herzinsuffizienz liver cancer cáncer de hígado leberkrebs kidney disease "
         "enfermedad renal nierenerkrankung fever fiebre fieber cough tos husten")


@pytest.fixture(scope="module")
def tiny_xlmr(tmp_path_factory) -> str:
    """A randomly initialised 2-layer XLM-RoBERTa with a unigram tokenizer (XLM-R's kind) trained here on a few words."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers.processors import RobertaProcessing
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-xlmr")
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator([WORDS] * 5, trainers.UnigramTrainer(vocab_size=120, special_tokens=specials, unk_token="<unk>"))
    tokenizer.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 0))
    fast = XLMRobertaTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    config = XLMRobertaConfig(vocab_size=fast.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=64, max_position_embeddings=130, pad_token_id=1)
    torch.manual_seed(0)
    XLMRobertaModel(config).save_pretrained(str(folder))
    fast.save_pretrained(str(folder))
    return str(folder)


@pytest.fixture
def multilingual_umls(tmp_path):
    path = tmp_path / "MRCONSO.RRF"
    path.write_text(
        conso("C0018801", "ENG", "Heart failure", "Y", "P", "PF") + conso("C0018801", "SPA", "Insuficiencia cardiaca")
        + conso("C0018801", "GER", "Herzinsuffizienz") + conso("C0018801", "SPA", "INSUFICIENCIA CARDIACA")
        + conso("C0015967", "ENG", "Fever", "Y", "P", "PF") + conso("C0015967", "SPA", "Fiebre")
        + conso("C0015967", "GER", "Fieber", suppress="O"),
        encoding="utf8",
    )
    return path


def test_extract_keeps_chosen_languages_and_records_each_names_language(tmp_path, multilingual_umls):
    runner = CliRunner()
    result = runner.invoke(app, ["extract", "--mrconso", str(multilingual_umls), "--languages", "all", "-o", str(tmp_path / "syn.txt"),
                                 "--name-languages", str(tmp_path / "lang.tsv")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "syn.txt").read_text() == (
        "C0018801||heart failure|insuficiencia cardiaca|herzinsuffizienz\nC0015967||fever|fiebre\n")
    assert (tmp_path / "lang.tsv").read_text().splitlines() == [
        "C0018801\tENG\theart failure", "C0018801\tSPA\tinsuficiencia cardiaca", "C0018801\tGER\therzinsuffizienz",
        "C0015967\tENG\tfever", "C0015967\tSPA\tfiebre",  # the suppressed German row is left out, as in syn.txt
    ]
    assert "ENG 2, GER 1, SPA 2" in result.output
    result = runner.invoke(app, ["extract", "--mrconso", str(multilingual_umls), "--languages", "SPA", "-o", str(tmp_path / "spa.txt"),
                                 "--name-languages", str(tmp_path / "spa.tsv")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "spa.txt").read_text() == "C0018801||insuficiencia cardiaca\nC0015967||fiebre\n"
    assert {line.split("\t")[1] for line in (tmp_path / "spa.tsv").read_text().splitlines()} == {"SPA"}
    result = runner.invoke(app, ["extract", str(tmp_path / "syn.txt"), "-o", str(tmp_path / "x.txt"), "--name-languages", str(tmp_path / "x.tsv")])
    assert result.exit_code == 1 and "--name-languages goes with --mrconso" in result.output
    # only the concepts written: --semantic-types left fever out of the synonyms but not out of the languages file
    mrsty = tmp_path / "MRSTY.RRF"
    mrsty.write_text("C0018801|T047|B2.2.1.2.1|Disease or Syndrome|AT1|256|\nC0015967|T184|A2.2.2|Sign or Symptom|AT2|256|\n", encoding="utf8")
    result = runner.invoke(app, ["extract", "--mrconso", str(multilingual_umls), "--mrsty", str(mrsty), "--semantic-types", "T184",
                                 "--languages", "all", "-o", str(tmp_path / "t184.txt"), "--name-languages", str(tmp_path / "t184.tsv")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t184.txt").read_text() == "C0015967||fever|fiebre\n"
    assert (tmp_path / "t184.tsv").read_text().splitlines() == ["C0015967\tENG\tfever", "C0015967\tSPA\tfiebre"]


def test_extract_writes_the_synonyms_and_their_languages_together_or_neither(tmp_path, multilingual_umls, monkeypatch):
    """An extract that fails on its second pass over MRCONSO (the languages) leaves the earlier run's two files as
    they were, not a new synonyms file beside the old languages file."""
    import spacy_sapbert.readers.umls

    args = ["extract", "--mrconso", str(multilingual_umls), "-o", str(tmp_path / "syn.txt"), "--name-languages", str(tmp_path / "lang.tsv")]
    assert CliRunner().invoke(app, args + ["--languages", "ENG"]).exit_code == 0  # an earlier run: English names only
    before = {name: (tmp_path / name).read_text() for name in ("syn.txt", "lang.tsv")}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(spacy_sapbert.readers.umls, "read_mrconso_languages", interrupted)
    assert CliRunner().invoke(app, args + ["--languages", "all"]).exit_code != 0
    assert {name: (tmp_path / name).read_text() for name in ("syn.txt", "lang.tsv")} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["MRCONSO.RRF", "lang.tsv", "syn.txt"]  # no temporary left


def test_translation_pairs_are_two_member_classes_of_their_own(tmp_path, multilingual_umls, tiny_xlmr):
    runner = CliRunner()
    runner.invoke(app, ["extract", "--mrconso", str(multilingual_umls), "--languages", "all", "-o", str(tmp_path / "syn.txt")])
    (tmp_path / "dict.txt").write_text("cough||tos\n\nkidney disease||Enfermedad renal\nsame||SAME\n", encoding="utf8")
    (tmp_path / "dict2.txt").write_text("fever||fieber\n", encoding="utf8")
    result = runner.invoke(app, ["pairs", str(tmp_path / "syn.txt"), str(tmp_path / "pairs.txt"), "--translations", str(tmp_path / "dict.txt"),
                                 "--translations", str(tmp_path / "dict2.txt")])
    assert result.exit_code == 0, result.output
    pairs = list(read_pairs(tmp_path / "pairs.txt"))
    translations = [p for p in pairs if p[0].startswith("translation:")]
    assert translations == [("translation:0:1", "cough", "tos"), ("translation:0:3", "kidney disease", "enfermedad renal"),
                            ("translation:1:1", "fever", "fieber")]  # line 1 of two files: two classes
    assert len(pairs) == 3 + 1 + 3  # heart failure: 3 pairs of 3 names, fever: 1, then the translations
    # a pair given twice is one pair, and lines that share a side are one class: as two classes, "heart" was the
    # negative of "heart" at similarity 1 (found by an audit)
    (tmp_path / "dup.txt").write_text("heart||cuore\nHeart||Cuore\nheart||cardiaco\nrene||kidney\n", encoding="utf8")
    (tmp_path / "dup2.txt").write_text("cuore||herz\n", encoding="utf8")
    assert list(translation_pairs([tmp_path / "dup.txt", tmp_path / "dup2.txt"])) == [
        ("translation:0:1", "heart", "cuore"), ("translation:0:1", "heart", "cardiaco"), ("translation:0:4", "rene", "kidney"),
        ("translation:0:1", "cuore", "herz"),
    ]
    (tmp_path / "bad.txt").write_text("cough||tos\nfever|fiebre\n", encoding="utf8")
    result = runner.invoke(app, ["pairs", str(tmp_path / "syn.txt"), str(tmp_path / "p2.txt"), "--translations", str(tmp_path / "bad.txt")])
    assert result.exit_code == 1 and "bad.txt, line 2" in result.output and not (tmp_path / "p2.txt").exists()
    # the multilingual path: SAP on the tiny XLM-R, then its vectors
    result = runner.invoke(app, ["train", str(tmp_path / "pairs.txt"), "--model", tiny_xlmr, "--output", str(tmp_path / "run"),
                                 "--batch-size", "4", "--max-steps", "2", "--device", "cpu", "--no-progress", "--pooling", "mean"])
    assert result.exit_code == 0, result.output
    from spacy_sapbert.encoder import Encoder, default_pooling

    model = str(tmp_path / "run/model")
    encoder = Encoder(model, pooling=default_pooling(model), device="cpu")
    assert encoder.pooling == "mean" and encoder.encode(["fiebre", "herzinsuffizienz"]).shape == (2, 32)
    pieces = encoder.tokenizer("cáncer de hígado")["input_ids"]
    assert pieces[0] == 0 and pieces[-1] == 2 and 3 not in pieces  # <s> ... </s>, no unknown pieces


XLBEL = (
    "C0018801||insuficiencia cardiaca||La <tgt>insuficiencia cardiaca</tgt> es grave.\n"
    "C0015967|C9999999||fiebre||Tiene <tgt>fiebre</tgt> alta.\n"
    "C0000001||tos||La <tgt>tos</tgt> persiste.\n"
)
OBO = """format-version: 1.2

[Term]
id: HP:0001635
name: Congestive heart failure
synonym: "insuficiencia cardiaca" EXACT []
xref: UMLS:C0018801

[Term]
id: MONDO:0001
name: Fever
synonym: "fiebre" EXACT []
xref: UMLS:C0015967
xref: UMLS:C0000002

[Term]
id: HP:0000002
name: No UMLS xref
"""


def test_xlbel_open_subset_scores_only_reachable_queries_and_counts_the_rest(tmp_path, tiny_xlmr):
    (tmp_path / "es_xlbel.txt").write_text(XLBEL, encoding="utf8")
    (tmp_path / "onto.obo").write_text(OBO, encoding="utf8")
    args = ["evaluate", str(tmp_path / "es_xlbel.txt"), "--corpus-format", "xlbel", "--vocab", str(tmp_path / "onto.obo"),
            "--key-by", "UMLS", "--model", tiny_xlmr, "--baselines", "--baseline-model", tiny_xlmr, "--protocol", "strict",
            "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(app, args + ["--reachable-only", "--output", str(tmp_path / "open.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "open.json").read_text())
    assert report["n_mentions"] == 2 and report["n_missing_gold"] == 1 and report["n_concepts"] == 3
    assert report["results"]["exact match"]["strict"]["acc@1"] == 1.0  # both names reach their CUIs
    assert "1 with no gold id in the vocabulary left out" in result.output
    assert report["preprocessing"]["abbreviations"] is False  # no document text to resolve them from (it said True)
    result = CliRunner().invoke(app, args + ["--output", str(tmp_path / "all.json")])
    report = json.loads((tmp_path / "all.json").read_text())
    assert report["n_mentions"] == 3 and report["results"]["exact match"]["strict"]["acc@1"] == pytest.approx(2 / 3)
