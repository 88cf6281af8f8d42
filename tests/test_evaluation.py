import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import shared_file
from spacy_sapbert.cli import app
from spacy_sapbert.evaluation import (
    EvalMention,
    ExactMatchRetriever,
    Preprocessing,
    System,
    TfidfRetriever,
    evaluate_end_to_end,
    gold_rank,
    mention_rank,
    mentions_from_documents,
    metrics_from_ranks,
    missing_gold,
    normalized_concepts,
    run_protocols,
    score_retriever,
    training_names,
    with_extra_names,
)
from spacy_sapbert.kb import Concept, KnowledgeBase
from spacy_sapbert.readers.corpora import Document, Mention


def vocabulary():
    return [
        Concept("D1", "Heart failure", ["cardiac failure"]),
        Concept("D2", "Liver cancer", ["hepatoma"], alt_ids=["OMIM:2"]),
        Concept("D3", "Kidney disease", ["nephropathy"]),
        Concept("D4", "Breast cancer", ["mammary carcinoma"]),
        Concept("D5", "Ovarian cancer", ["ovary carcinoma"]),
    ]


def test_metrics_from_known_ranks():
    m = metrics_from_ranks([1, 2, None, 6], ks=(1, 5, 10))
    assert m["acc@1"] == 0.25 and m["acc@5"] == 0.5 and m["acc@10"] == 0.75
    assert m["mrr"] == pytest.approx((1 + 0.5 + 1 / 6) / 4)


def test_gold_rank_counts_alternative_and_combined_ids():
    kb = KnowledgeBase(vocabulary())
    assert gold_rank([("D1", 0.9), ("D2", 0.8)], {"OMIM:2"}, kb) == 2
    assert gold_rank([("D3", 0.9)], {"D3", "D9"}, kb) == 1  # "D3+D9": any shared id
    assert gold_rank([("D1", 0.9)], {"D3"}, kb) is None


def test_a_composite_mention_ranks_as_its_worst_part():
    assert mention_rank([1, 3]) == 3
    assert mention_rank([1, None]) is None


def test_mentions_from_documents_resolve_abbreviations_split_composites_and_skip_cuiless():
    text = "Heart failure (HF) and breast and ovarian cancer. HF again. Unknown thing."
    doc = Document(
        "1",
        text,
        [
            Mention(text.index("HF again"), text.index("HF again") + 2, "HF", "Disease", "D1"),
            Mention(23, 48, "breast and ovarian cancer", "Disease", "D4|D5"),
            Mention(text.index("Unknown"), text.index("Unknown") + 13, "Unknown thing", "Disease", "-1"),
            Mention(0, 13, "Heart failure", "Chemical", "D1"),
        ],
    )
    mentions, cuiless = mentions_from_documents([doc], Preprocessing(), labels=["Disease"])
    assert cuiless == 1
    assert [m.queries for m in mentions] == [["heart failure"], ["breast cancer", "ovarian cancer"]]
    without = mentions_from_documents([doc], Preprocessing(abbreviations=False), labels=["Disease"])[0]
    assert without[0].queries == ["hf"]


def test_composite_is_a_hit_only_when_every_part_is():
    kb = KnowledgeBase(vocabulary())
    retriever = ExactMatchRetriever(vocabulary())
    both = EvalMention("x", "D4|D5", ["Breast cancer", "Ovarian cancer"])
    one = EvalMention("y", "D4|D5", ["Breast cancer", "no such name"])
    metrics, ranks = score_retriever(retriever, [both, one], kb)
    assert ranks == [1, None] and metrics["acc@1"] == 0.5


def test_missing_gold_ids_are_counted_not_fatal():
    kb = KnowledgeBase(vocabulary())
    mentions = [EvalMention("a", "D404", ["a"]), EvalMention("b", "D1+D404", ["b"]), EvalMention("c", "D1", ["c"])]
    assert missing_gold(mentions, kb) == (1, ["D404"])
    metrics, ranks = score_retriever(ExactMatchRetriever(vocabulary()), mentions, kb)
    assert ranks == [None, None, None]


def test_training_mentions_become_extra_names_of_their_concepts():
    kb = KnowledgeBase(vocabulary())
    train = [EvalMention("m", "OMIM:2", ["liver tumour"]), EvalMention("n", "D4|D5", ["a", "b"])]
    extra = training_names(train, kb)
    assert extra == [("D2", "liver tumour")]
    extended = with_extra_names(vocabulary(), extra)
    assert "liver tumour" in extended[1].names and vocabulary()[1].names == ["Liver cancer", "hepatoma"]


def test_tfidf_ranks_a_misspelling_near_its_concept():
    concepts = normalized_concepts(vocabulary(), Preprocessing())
    [hits] = TfidfRetriever(concepts).rank(["hepatomma"], k=3)
    assert hits[0][0] == "D2" and len({cid for cid, _ in hits}) == len(hits)


def test_biosyn_protocol_adds_names_for_every_system():
    concepts = normalized_concepts(vocabulary(), Preprocessing())
    mentions = [EvalMention("liver tumour", "D2", ["liver tumour"])]
    systems = [System("exact", ExactMatchRetriever), System("tfidf", TfidfRetriever)]
    results = run_protocols(systems, concepts, mentions, [("D2", "liver tumour")], progress=False)
    assert results["exact"]["strict"]["acc@1"] == 0.0 and results["exact"]["biosyn"]["acc@1"] == 1.0
    assert results["tfidf"]["biosyn"]["acc@1"] == 1.0


def test_end_to_end_precision_recall_f1(tiny_bert):
    from spacy_sapbert.pipeline import build_pipeline

    nlp = build_pipeline(vocabulary(), tiny_bert, label="Disease", linker_config={"device": "cpu"})
    text = "Hepatoma and nephropathy, not heart failure."
    gold = [
        Mention(0, 8, "Hepatoma", "Disease", "OMIM:2"),  # found, right id through the alternative id
        Mention(13, 24, "nephropathy", "Disease", "D1"),  # found, wrong gold on purpose
        Mention(100, 110, "missed", "Disease", "D5"),  # never found
    ]
    scores = evaluate_end_to_end(nlp, [Document("1", text, gold)])
    assert (scores["tp"], scores["fp"], scores["fn"]) == (1, 2, 2)  # "heart failure" predicted, not in gold
    assert scores["precision"] == pytest.approx(1 / 3) and scores["recall"] == pytest.approx(1 / 3)


def test_end_to_end_resolves_alternative_ids_through_the_linker_of_each_label(tiny_bert):
    import spacy

    from spacy_sapbert.errors import SapbertError

    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "Disease", "pattern": "hepatoma"}, {"label": "Chemical", "pattern": "advil"}])
    for label, concepts in (("Disease", vocabulary()), ("Chemical", [Concept("C2", "Ibuprofen", ["advil"], alt_ids=["C2B"])])):
        nlp.add_pipe("sapbert_linker", name=label, config={"model": tiny_bert, "labels": [label]}).initialize(vocabulary=concepts)
    gold = [Mention(0, 8, "hepatoma", "Disease", "OMIM:2"), Mention(13, 18, "advil", "Chemical", "C2B")]
    scores = evaluate_end_to_end(nlp, [Document("1", "hepatoma and advil", gold)])
    assert (scores["tp"], scores["fp"], scores["fn"]) == (2, 0, 0)  # both through alternative ids, each of its own linker
    with pytest.raises(SapbertError, match="no sapbert_linker component"):
        evaluate_end_to_end(spacy.blank("en"), [Document("1", "hepatoma", gold[:1])])


def test_tfidf_baseline_on_ncbi_dev_is_deterministic_and_sensible():
    from spacy_sapbert.evaluation import read_corpus
    from spacy_sapbert.readers import read_vocabulary

    prep = Preprocessing()
    concepts = normalized_concepts(KnowledgeBase(read_vocabulary(shared_file("medic", "medic_06Jul2012.txt"), "medic")), prep)
    mentions, _, _ = read_corpus(shared_file("ncbi-disease", "NCBIdevelopset_corpus.txt"), "pubtator", prep)
    kb = KnowledgeBase(concepts)
    retriever = TfidfRetriever(concepts)
    first, _ = score_retriever(retriever, mentions, kb)
    second, _ = score_retriever(retriever, mentions, kb)
    assert first == second and len(mentions) == 787
    assert 0.6 < first["acc@1"] < first["acc@5"] <= first["acc@10"]


PUBTATOR = """1|t|Hepatoma and heart failure.
1|a|The nephropathy (NP) was mild. NP is common.
1\t0\t8\tHepatoma\tDisease\tD2
1\t13\t26\theart failure\tDisease\tD1
1\t32\t43\tnephropathy\tDisease\tD3
1\t59\t61\tNP\tDisease\tD3
1\t13\t26\theart failure\tDisease\t-1

"""


def test_evaluate_command_writes_report_and_plot_and_repeats_exactly(tmp_path, tiny_bert):
    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text(
        "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nD3||Kidney disease|nephropathy\n", encoding="utf8"
    )
    args = ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--model", tiny_bert,
            "--baselines", "--baseline-model", tiny_bert, "--train", str(tmp_path / "corpus.txt"),
            "--cache-dir", str(tmp_path / "cache"), "--plot", str(tmp_path / "acc.png")]
    runs = []
    for i in range(2):
        result = CliRunner().invoke(app, args + ["--output", str(tmp_path / f"r{i}.json")])
        assert result.exit_code == 0, result.output
        runs.append(json.loads((tmp_path / f"r{i}.json").read_text()))
    assert runs[0]["results"] == runs[1]["results"]
    report = runs[0]
    assert report["n_mentions"] == 4 and report["n_cuiless"] == 1
    assert set(report["results"]) == {"exact match", "tf-idf char 3-grams", Path(tiny_bert).name}
    exact = report["results"]["exact match"]["strict"]
    assert exact["acc@1"] == 1.0  # "np" resolves to its long form "nephropathy"
    assert "| exact match | strict | 100.0 |" in result.output
    assert (tmp_path / "acc.png").read_bytes()[:4] == b"\x89PNG"
    assert list((tmp_path / "cache").iterdir())  # the encoded dictionary was cached and reused


def test_evaluate_command_scores_a_pipeline_end_to_end(tmp_path, tiny_bert):
    from spacy_sapbert.pipeline import build_pipeline, save_pipeline

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure\nD2||Hepatoma\nD3||Nephropathy\n", encoding="utf8")
    save_pipeline(build_pipeline(vocabulary(), tiny_bert, label="Disease"), tmp_path / "pipe")
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"),
                                      "--model", tiny_bert, "--protocol", "strict", "--cache-dir", str(tmp_path / "c"),
                                      "--end-to-end", str(tmp_path / "pipe"), "--output", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    e2e = json.loads((tmp_path / "r.json").read_text())["end_to_end"]
    # the matcher finds Hepatoma, heart failure, nephropathy (not "NP"); all three link to their gold ids
    assert (e2e["tp"], e2e["fp"], e2e["fn"]) == (3, 0, 1)
    assert "end to end" in result.output


def misled_mentions(tiny_bert, concepts):
    """Two nonsense mentions whose gold is *not* what the random encoder ranks first, and its retriever."""
    from spacy_sapbert.encoder import Encoder
    from spacy_sapbert.evaluation import EncoderRetriever, build_encoder_index

    encoder = Encoder(tiny_bert, device="cpu")
    base = EncoderRetriever("tiny", encoder, build_encoder_index(encoder, concepts))
    texts = ["xq", "zzv"]
    mentions = []
    for text, hits in zip(texts, base.rank(texts, 5)):
        gold = next(c.id for c in concepts if c.id != hits[0][0])
        mentions.append(EvalMention(text, gold, [text]))
    return base, mentions


def test_tune_memory_finds_that_the_memory_fixes_what_the_encoder_gets_wrong(tiny_bert):
    from spacy_sapbert.evaluation import MemoryRetriever, tune_memory
    from spacy_sapbert.memory import MemorySettings

    concepts = vocabulary()
    kb = KnowledgeBase(concepts)
    base, mentions = misled_mentions(tiny_bert, concepts)
    retriever = MemoryRetriever("tiny + memory", base, [(m.text, m.gold) for m in mentions], MemorySettings())
    grid = {"memory_k": (1, 2), "memory_weight": (0.0, 0.5, 0.9), "concept_temperature": (0.01,), "memory_temperature": (0.1, 1.0)}
    rows = tune_memory(retriever, mentions, kb, grid)
    assert len(rows) == 2 * 3 * 1 * 2
    assert all(row["acc@1"] == 0.0 for row in rows if row["memory_weight"] == 0.0)  # the encoder alone
    assert rows[0]["acc@1"] == 1.0 and rows[0]["memory_weight"] > 0.0
    assert [r["acc@1"] for r in rows] == sorted((r["acc@1"] for r in rows), reverse=True)
    assert score_retriever(MemoryRetriever("m", base, [(m.text, m.gold) for m in mentions], MemorySettings(1, 0.9)), mentions, kb)[0]["acc@1"] == 1.0


def test_memory_settings_from_a_report_or_a_plain_mapping():
    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.memory import MemorySettings

    assert MemorySettings.from_dict({"memory_k": 8, "memory_weight": 0.3}) == MemorySettings(8, 0.3)
    report = {"memory": {"settings": {"memory_k": 2, "memory_weight": 0.2, "concept_temperature": 0.05, "memory_temperature": 0.1}}}
    assert MemorySettings.from_dict(report) == MemorySettings(2, 0.2, 0.05, 0.1)
    with pytest.raises(SapbertError, match="unknown memory setting.*lambda"):
        MemorySettings.from_dict({"lambda": 0.1}, source="x.json")


def test_evaluate_command_tunes_the_memory_on_dev_and_reuses_the_settings(tmp_path, tiny_bert):
    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text(
        "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nD3||Kidney disease|nephropathy\n", encoding="utf8"
    )
    common = ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--model", tiny_bert,
              "--memory", str(tmp_path / "corpus.txt"), "--protocol", "strict", "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(app, common + ["--tune-memory", "--output", str(tmp_path / "dev.json")])
    assert result.exit_code == 0, result.output
    dev = json.loads((tmp_path / "dev.json").read_text())
    name = Path(tiny_bert).name
    memory = dev["memory"]
    assert memory["tuned_on_this_corpus"] and memory["n_entries"] == 3  # hepatoma, heart failure, nephropathy
    assert len(memory["grid"]) == 5 * 8 * 4 * 5
    assert memory["settings"] == {k: memory["grid"][0][k] for k in memory["settings"]}
    tuned = dev["results"][f"{name} + memory (tuned here)"]["strict"]
    assert tuned["acc@1"] == memory["grid"][0]["acc@1"] == 1.0  # every query is in the memory
    assert tuned["acc@1"] >= dev["results"][name]["strict"]["acc@1"]

    result = CliRunner().invoke(app, common + ["--memory-settings", str(tmp_path / "dev.json"), "--output", str(tmp_path / "test.json")])
    assert result.exit_code == 0, result.output
    test = json.loads((tmp_path / "test.json").read_text())
    assert test["memory"]["settings"] == memory["settings"] and not test["memory"]["tuned_on_this_corpus"]
    assert test["results"][f"{name} + memory"]["strict"] == tuned


def test_run_benchmark_without_a_cache_encodes_the_vocabulary_once(tmp_path, tiny_bert, monkeypatch):
    """The model, the memory system and the tuning share one strict index even with no --cache-dir."""
    from spacy_sapbert import evaluation
    from spacy_sapbert.index import ConceptIndex

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\n", encoding="utf8")
    builds = []
    original = ConceptIndex.build.__func__

    def counting_build(cls, *args, **kwargs):
        builds.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(ConceptIndex, "build", classmethod(counting_build))
    report = evaluation.run_benchmark(
        tmp_path / "corpus.txt", [(tmp_path / "vocab.txt", "auto", {})], model=tiny_bert,
        memory=[tmp_path / "corpus.txt"], tune=True, protocols=["strict"], cache_dir=None,
    )
    assert len(builds) == 1
    assert report["memory"]["tuned_on_this_corpus"] and len(report["results"]) == 2
