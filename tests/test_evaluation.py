import json
import re
from pathlib import Path

import numpy
import pytest
from typer.testing import CliRunner

from conftest import shared_file
from spacy_sapbert.cli import app
from spacy_sapbert.errors import SapbertError
from spacy_sapbert.evaluation import (
    EvalMention,
    ExactMatchRetriever,
    NormalizedBaseline,
    Preprocessing,
    System,
    TfidfRetriever,
    evaluate_end_to_end,
    gold_rank,
    markdown_table,
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


def training_split(tmp_path, name="seen.txt"):
    """corpus.txt again under other document ids: a --train or --memory corpus that is not the scored one (evaluate
    refuses the scored file itself and warns of shared documents)."""
    text = (tmp_path / "corpus.txt").read_text(encoding="utf8")
    (tmp_path / name).write_text(re.sub(r"(?m)^(\w+)(?=[|\t])", r"train\1", text), encoding="utf8")
    return tmp_path / name


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


def test_a_shared_top_name_counts_for_each_of_its_concepts_only_in_acc_at_1_shared():
    """Concepts tie exactly when they share their best name; BioSyn's check_label scores that name as a hit for
    each of them. acc@1 keeps one concept per rank (what the component returns); shared_acc@1 does not."""
    kb = KnowledgeBase(vocabulary())
    tied = [("D1", 0.9), ("D3", 0.9), ("D2", 0.8), ("D4", 0.8)]
    assert gold_rank(tied, {"D3"}, kb) == 2 and gold_rank(tied, {"D3"}, kb, shared=True) == 1
    assert gold_rank(tied, {"D4"}, kb) == 4 and gold_rank(tied, {"D4"}, kb, shared=True) == 3
    assert gold_rank(tied, {"D5"}, kb, shared=True) is None

    class Fixed:
        def rank(self, texts, k):
            return [{"dm": tied, "ckd": [("D1", 0.9), ("D3", 0.5)]}[t] for t in texts]

    mentions = [EvalMention("DM", "D3", ["dm"]), EvalMention("CKD", "D3", ["ckd"]), EvalMention("x", "D3|D4", ["dm", "dm"])]
    metrics, ranks = score_retriever(Fixed(), mentions, kb)
    assert ranks == [2, 2, 2] and metrics["acc@1"] == 0.0
    assert metrics["shared_acc@1"] == pytest.approx(2 / 3)  # the composite's parts both tie at the top
    report = {"n_mentions": 3, "n_missing_gold": 0, "n_cuiless": 0, "results": {"fixed": {"biosyn": metrics}}}
    assert "| fixed | biosyn | 0.0 | " in markdown_table(report) and markdown_table(report).endswith("| 66.7 |")


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
    # queries as written, abbreviations resolved; the searching system normalizes them
    assert [m.queries for m in mentions] == [["Heart failure"], ["breast cancer", "ovarian cancer"]]
    without = mentions_from_documents([doc], Preprocessing(abbreviations=False), labels=["Disease"])[0]
    assert without[0].queries == ["HF"]


def test_composite_is_a_hit_only_when_every_part_is():
    kb = KnowledgeBase(vocabulary())
    retriever = ExactMatchRetriever(vocabulary())
    both = EvalMention("x", "D4|D5", ["Breast cancer", "Ovarian cancer"])
    one = EvalMention("y", "D4|D5", ["Breast cancer", "no such name"])
    metrics, ranks = score_retriever(retriever, [both, one], kb)
    assert ranks == [1, None] and metrics["acc@1"] == 0.5


def test_a_retriever_that_reads_context_ranks_each_place_of_a_query_and_gets_it_from_the_document():
    """A re-ranker with context words sees one string twice when it is written in two places; the mentions of a
    document carry their place, and a composite's parts are read at the whole mention's place."""
    text = "drug induced hepatitis; viral hepatitis and hepatitis or cirrhosis"
    spans = [(13, 22, "D1"), (30, 39, "D2"), (44, 66, "D1|D3")]
    document = Document("1", text, [Mention(a, b, text[a:b], "Disease", gold) for a, b, gold in spans])
    mentions, _ = mentions_from_documents([document], Preprocessing(abbreviations=False))
    assert [(m.where.start, m.where.end) for m in mentions] == [(a, b) for a, b, _ in spans] and mentions[0].where.text == text
    asked = []

    class ByPlace:
        reads_context = True

        def rank(self, texts, k, contexts):
            asked.extend(zip(texts, [(c.start, c.end) for c in contexts]))
            return [[("D1", 0.9)] if c.start < 20 or q == "cirrhosis" else [("D2", 0.9)] for q, c in zip(texts, contexts)]

    kb = KnowledgeBase([Concept("D1", "Drug-induced liver injury"), Concept("D2", "Viral hepatitis"), Concept("D3", "Cirrhosis")])
    _, ranks = score_retriever(ByPlace(), mentions, kb)
    assert ranks == [1, 1, None]  # the composite's "hepatitis" part, read at its place, is D2: a miss
    assert sorted(asked) == [("cirrhosis", (44, 66)), ("hepatitis", (13, 22)), ("hepatitis", (30, 39)), ("hepatitis", (44, 66))]


def test_exact_match_ranks_a_shared_name_as_the_linker_does():
    """The baseline orders the concepts of a shared name by the index's TIE_ORDER: canonical names first."""
    shared = [Concept("S", "Steinert disease", ["DM"]), Concept("P", "DM"), Concept("Q", "dm")]
    assert ExactMatchRetriever(shared).rank(["DM", "dm", "Steinert disease", "none"], k=5) == [
        [("P", 1.0), ("S", 1.0)], [("Q", 1.0)], [("S", 1.0)], []
    ]


def test_the_biosyn_baselines_break_a_shared_names_tie_as_the_encoders_index_does(tiny_bert):
    """The biosyn protocol's training names come first on their names in the encoder's index (ConceptIndex.add_names),
    the most often given first; the string baselines appended them as synonyms, so the vocabulary's canonical owner
    won the tie (found by an audit: NCBI-disease test's exact-match biosyn acc@1 was 5.9 points low)."""
    from spacy_sapbert.encoder import Encoder
    from spacy_sapbert.evaluation import LinkerRetriever, build_encoder_index

    concepts = [Concept("B", "DM", ["diabetes mellitus"]), Concept("A", "Dystrophia myotonica"), Concept("C", "dm type 2")]
    mentions = [EvalMention("DM", "A", ["DM"]), EvalMention("dm type 2", "A", ["dm type 2"])]
    extra = [("A", "dm"), ("A", "DM"), ("C", "dm type 2"), ("A", "dm type 2"), ("A", "dm type 2")]
    normalizer = Preprocessing().normalizer
    encoder = Encoder(tiny_bert, device="cpu")
    systems = [
        System("exact", lambda d: NormalizedBaseline(ExactMatchRetriever, normalizer, d)),
        System("tfidf", lambda d: NormalizedBaseline(TfidfRetriever, normalizer, d)),
        System("encoder", lambda d: LinkerRetriever("tiny", encoder, build_encoder_index(encoder, d, normalizer=normalizer))),
    ]
    results = run_protocols(systems, concepts, mentions, extra, progress=False)
    assert {name: rows["biosyn"]["acc@1"] for name, rows in results.items()} == {"exact": 1.0, "tfidf": 1.0, "encoder": 1.0}
    assert results["exact"]["strict"]["acc@1"] == 0.0


def test_bc5cdr_listed_composite_parts_are_searched_and_scored():
    """BC5CDR lists a composite's parts by hand; they, not the mention or the coordination rule, are the queries."""
    from spacy_sapbert.readers.corpora import read_pubtator

    path = shared_file("bc5cdr", "CDR_TrainingSet.PubTator.txt")
    [document] = [d for d in read_pubtator(path) if d.id == "20722491"]
    mentions, _ = mentions_from_documents([document], Preprocessing(), labels=["Disease"])
    [composite] = [m for m in mentions if m.text == "colorectal, breast and head and neck cancers"]
    assert composite.gold == "D015179|D001943|D006258"
    assert composite.queries == ["colorectal cancers", "breast cancers", "head and neck cancers"]
    parts = [Concept("D015179", "colorectal cancers"), Concept("D001943", "breast cancers"), Concept("D006258", "head and neck cancers")]
    metrics, ranks = score_retriever(ExactMatchRetriever(parts), [composite], KnowledgeBase(parts))
    assert ranks == [1] and metrics["acc@1"] == 1.0


def test_missing_gold_ids_are_counted_not_fatal():
    kb = KnowledgeBase(vocabulary())
    mentions = [EvalMention("a", "D404", ["a"]), EvalMention("b", "D1+D404", ["b"]), EvalMention("c", "D1", ["c"])]
    assert missing_gold(mentions, kb) == (1, ["D404"])
    metrics, ranks = score_retriever(ExactMatchRetriever(vocabulary()), mentions, kb)
    assert ranks == [None, None, None]


def test_training_mentions_become_extra_names_of_their_concepts():
    kb = KnowledgeBase(vocabulary())
    train = [EvalMention("m", "OMIM:2", ["liver tumour"]), EvalMention("n", "D4|D5", ["a", "b"]),
             EvalMention("o", "D404", ["cardiotoxicity"]), EvalMention("p", "D404", ["cardiac toxicity"])]
    extra = training_names(train, kb)
    assert extra == [("D2", "liver tumour")]  # an id the vocabulary lacks is left out (DHNS mining, the memory)
    extended = with_extra_names(vocabulary(), extra)
    assert "liver tumour" in extended[1].names and vocabulary()[1].names == ["Liver cancer", "hepatoma"]
    assert len(extended) == len(vocabulary())
    # the biosyn dictionary, as BioSyn builds it, keeps them under their gold id: a new concept of their names
    with_new = training_names(train, kb, new_concepts=True)
    assert with_new == [("D2", "liver tumour"), ("D404", "cardiotoxicity"), ("D404", "cardiac toxicity")]
    extended = with_extra_names(vocabulary(), with_new)
    assert len(extended) == len(vocabulary()) + 1
    assert extended[-1].id == "D404" and extended[-1].names == ["cardiotoxicity", "cardiac toxicity"]
    assert with_extra_names(vocabulary(), [("OMIM:2", "x")]) == vocabulary()  # an alternative id is no new concept


def test_biosyn_protocol_links_to_gold_ids_only_training_mentions_have(tmp_path, tiny_bert):
    """A dev mention whose gold id the vocabulary lacks can only be found under biosyn, through a training
    mention of that id; strict counts it as a miss, and the report says how many concepts biosyn added."""
    from spacy_sapbert import evaluation

    train = "1|t|Cardiotoxicity and hepatoma.\n1\t0\t14\tCardiotoxicity\tDisease\tD404\n1\t19\t27\thepatoma\tDisease\tD2\n\n"
    dev = "2|t|Cardiotoxicity, liver cancer.\n2\t0\t14\tCardiotoxicity\tDisease\tD404\n2\t16\t28\tliver cancer\tDisease\tD2\n\n"
    (tmp_path / "train.txt").write_text(train, encoding="utf8")
    (tmp_path / "dev.txt").write_text(dev, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure\nD2||Liver cancer\n", encoding="utf8")
    report = evaluation.run_benchmark(
        tmp_path / "dev.txt", [(tmp_path / "vocab.txt", "auto", {})], model=tiny_bert, train=[tmp_path / "train.txt"],
        cache_dir=tmp_path / "cache",
    )
    assert report["n_missing_gold"] == 1 and report["n_new_concepts_biosyn"] == 1
    [row] = report["results"].values()
    assert row["strict"]["acc@1"] == 0.5  # liver cancer only
    assert row["biosyn"]["acc@1"] == 1.0  # cardiotoxicity is a training name of D404
    assert "the biosyn dictionary adds 1 concepts of training mentions" in evaluation.markdown_table(report)


def test_a_vocabulary_whose_mesh_ids_carry_their_prefix_scores_like_a_bare_one(tmp_path, tiny_bert):
    """Gold ids lose their "MESH:" prefix; a BioSyn-style dictionary's "MESH:D2" kept it, so every mention counted as
    having no gold id in the vocabulary and scored 0 (found by an audit)."""
    from spacy_sapbert import evaluation

    dev = "2|t|Heart failure, liver cancer.\n2\t0\t13\tHeart failure\tDisease\tMESH:D1\n2\t15\t27\tliver cancer\tDisease\tD2\n\n"
    (tmp_path / "dev.txt").write_text(dev, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("MESH:D1||Heart failure\nMESH:D2||Liver cancer\n", encoding="utf8")
    report = evaluation.run_benchmark(tmp_path / "dev.txt", [(tmp_path / "vocab.txt", "auto", {})], model=tiny_bert,
                                      protocols=["strict"], cache_dir=None)
    assert report["n_missing_gold"] == 0
    [row] = report["results"].values()
    assert row["strict"]["acc@1"] == 1.0  # each mention is written as its concept's name


def test_without_training_corpora_there_is_no_biosyn_row(tmp_path, tiny_bert):
    """Without --train the biosyn row repeated the strict one under another name (found by an audit): the default is
    strict alone, and biosyn asked for without training corpora is an error."""
    from spacy_sapbert import evaluation

    dev = "2|t|Heart failure, liver cancer.\n2\t0\t13\tHeart failure\tDisease\tD1\n2\t15\t27\tliver cancer\tDisease\tD2\n\n"
    (tmp_path / "dev.txt").write_text(dev, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure\nD2||Liver cancer\n", encoding="utf8")
    report = evaluation.run_benchmark(tmp_path / "dev.txt", [(tmp_path / "vocab.txt", "auto", {})], model=tiny_bert, cache_dir=None)
    assert [list(row) for row in report["results"].values()] == [["strict"]]
    with pytest.raises(SapbertError, match="the biosyn protocol adds the mentions of training corpora.*--train"):
        evaluation.run_benchmark(tmp_path / "dev.txt", [(tmp_path / "vocab.txt", "auto", {})], model=tiny_bert, cache_dir=None,
                                 protocols=["strict", "biosyn"])


def test_tfidf_ranks_a_misspelling_near_its_concept():
    concepts = normalized_concepts(vocabulary(), Preprocessing().normalizer)
    [hits] = TfidfRetriever(concepts).rank(["hepatomma"], k=3)
    assert hits[0][0] == "D2" and len({cid for cid, _ in hits}) == len(hits)


@pytest.mark.parametrize("first", ["OMIM:101400", "OMIM:101200"])
def test_tfidf_breaks_exact_ties_by_vocabulary_order(first, monkeypatch):
    """Word permutations share every 3-gram, so their scores tie exactly; the name listed first wins,
    whatever order numpy's selection leaves ties in (another CPU's SIMD code orders them otherwise:
    simulated here by an argpartition that reverses its selected rows)."""
    real = numpy.argpartition

    def other_cpu_argpartition(a, kth, axis=-1, **kwargs):
        out = real(a, kth, axis=axis, **kwargs)
        out[..., : kth + 1] = out[..., kth::-1].copy()
        return out

    monkeypatch.setattr(numpy, "argpartition", other_cpu_argpartition)
    names = {"OMIM:101400": "saethre chotzen syndrome", "OMIM:101200": "syndrome saethre chotzen"}
    second = next(cid for cid in names if cid != first)
    fillers = [Concept(f"F{i}", f"chotzen variant {i} syndrome") for i in range(60)]  # more names than the depth
    concepts = [Concept(first, names[first])] + fillers + [Concept(second, names[second])]
    [hits] = TfidfRetriever(concepts).rank(["saethre chotzen syndrome"], k=3)
    assert [cid for cid, _ in hits[:2]] == [first, second]
    assert hits[0][1] == hits[1][1]


def test_biosyn_protocol_adds_names_for_every_system():
    concepts = normalized_concepts(vocabulary(), Preprocessing().normalizer)
    mentions = [EvalMention("liver tumour", "D2", ["liver tumour"])]
    systems = [System("exact", ExactMatchRetriever), System("tfidf", TfidfRetriever)]
    results = run_protocols(systems, concepts, mentions, [("D2", "liver tumour")], progress=False)
    assert results["exact"]["strict"]["acc@1"] == 0.0 and results["exact"]["biosyn"]["acc@1"] == 1.0
    assert results["tfidf"]["biosyn"]["acc@1"] == 1.0


def test_a_systems_retriever_is_released_before_the_next_is_built():
    """Each retriever holds an index (and a memory): with many rows (a re-ranker at several weights) only the
    running system's may live."""
    import gc
    import weakref

    concepts = normalized_concepts(vocabulary(), Preprocessing().normalizer)
    mentions = [EvalMention("liver tumour", "D2", ["liver tumour"])]
    made: list = []  # (system name, weak reference to a retriever it made)

    def maker(name: str):
        def make(dictionary):
            gc.collect()
            assert {owner for owner, ref in made if ref() is not None} <= {name}, "an earlier system's retriever is still held"
            retriever = ExactMatchRetriever(dictionary)
            made.append((name, weakref.ref(retriever)))
            return retriever

        return make

    names = [f"exact {i}" for i in range(3)]
    results = run_protocols([System(name, maker(name)) for name in names], concepts, mentions, [("D2", "liver tumour")], progress=False)
    assert len(made) == 3 and all(results[name]["biosyn"]["acc@1"] == 1.0 for name in names)  # biosyn adds to it


def test_misses_name_system_protocol_gold_and_the_candidates_ranked_above_it():
    concepts = normalized_concepts(vocabulary(), Preprocessing().normalizer)
    mentions = [
        EvalMention("hepatoma", "OMIM:2", ["hepatoma"], "doc1"),  # found through the alternative id: not a miss
        EvalMention("mammary cancer", "D4|D5", ["mammary cancer", "ovary carcinoma"], "doc2"),
        EvalMention("liver tumour", "D2", ["liver tumour"], "doc3"),
    ]
    misses: list = []
    results = run_protocols([System("exact", ExactMatchRetriever)], concepts, mentions, [("D2", "liver tumour")], progress=False, misses=misses)
    assert results["exact"]["strict"]["acc@1"] == pytest.approx(1 / 3)
    by_protocol = {p: [m for m in misses if m["protocol"] == p] for p in ("strict", "biosyn")}
    assert [m["doc_id"] for m in by_protocol["strict"]] == ["doc2", "doc3"]
    assert [m["doc_id"] for m in by_protocol["biosyn"]] == ["doc2"]  # "liver tumour" is a name under biosyn
    composite = by_protocol["strict"][0]
    assert composite["system"] == "exact" and composite["gold_names"] == ["breast cancer", "ovarian cancer"]
    first, second = composite["queries"]
    assert first == {"query": "mammary cancer", "candidates": []}
    assert second == {"query": "ovary carcinoma", "candidates": [["D5", "ovarian cancer", 1.0]]}
    assert composite["rank"] is None  # one part not found: the mention is a miss


def test_biosyn_protocol_adds_training_mentions_to_the_encoder_index(tiny_bert):
    """The encoder systems' biosyn rows: the training mentions become names in the strict index (add_names)."""
    from spacy_sapbert.evaluation import LinkerRetriever, build_encoder_index

    concepts = vocabulary()
    base, mentions = misled_mentions(tiny_bert, concepts)  # the encoder ranks a wrong concept first
    extra = [(m.gold, m.text) for m in mentions]
    encoder = base.linker.encoder
    systems = [System("tiny", lambda dictionary: LinkerRetriever("tiny", encoder, build_encoder_index(encoder, dictionary)))]
    results = run_protocols(systems, concepts, mentions, extra, progress=False)
    assert results["tiny"]["strict"]["acc@1"] == 0.0
    assert results["tiny"]["biosyn"]["acc@1"] == 1.0  # each mention is now a name of its gold concept


def test_end_to_end_precision_recall_f1(tiny_bert):
    from spacy_sapbert.pipeline import build_pipeline

    nlp = build_pipeline(vocabulary(), tiny_bert, label="Disease", linker_config={"device": "cpu"})
    text = "Hepatoma and nephropathy, not heart failure."
    gold = [
        Mention(0, 8, "Hepatoma", "Disease", "OMIM:2"),  # found, right id through the alternative id
        Mention(13, 24, "nephropathy", "SpecificDisease", "D1"),  # found, wrong gold on purpose; an NCBI-disease type
        Mention(100, 110, "missed", "Disease", "D5"),  # never found
    ]
    scores = evaluate_end_to_end(nlp, [Document("1", text, gold)])
    assert (scores["tp"], scores["fp"], scores["fn"]) == (1, 2, 2)  # "heart failure" predicted, not in gold
    assert scores["precision"] == pytest.approx(1 / 3) and scores["recall"] == pytest.approx(1 / 3)
    # the NER alone found both placed mentions: SpecificDisease is scored as the label Disease
    assert (scores["ner"]["Disease"]["tp"], scores["ner"]["Disease"]["fp"], scores["ner"]["Disease"]["fn"]) == (2, 1, 1)
    # scored for Chemical golds only, the Disease entities are neither right nor wrong (they counted as false positives)
    chemical = Document("1", text, gold + [Mention(30, 43, "heart failure", "Chemical", "D3")])
    scores = evaluate_end_to_end(nlp, [chemical], labels=["Chemical"])
    assert (scores["tp"], scores["fp"], scores["fn"]) == (0, 0, 1) and "Disease" not in scores["ner"]
    # scored for SpecificDisease golds only: the Disease entity on the Disease (DiseaseClass-like) gold "Hepatoma" is no
    # false positive (both types are the label Disease); "nephropathy" (its wrong gold id) and "heart failure" still are
    scores = evaluate_end_to_end(nlp, [Document("1", text, gold)], labels=["SpecificDisease"])
    assert (scores["tp"], scores["fp"], scores["fn"]) == (0, 2, 1)
    assert (scores["ner"]["Disease"]["tp"], scores["ner"]["Disease"]["fp"]) == (1, 1)
    # a Disease entity over a Chemical gold left out is still a false positive of a Disease score (it was dropped
    # whatever its label: found by an audit); "heart" is the Chemical gold inside the predicted "heart failure"
    with_chemical = Document("1", text, gold + [Mention(30, 35, "heart", "Chemical", "D3")])
    scores = evaluate_end_to_end(nlp, [with_chemical], labels=["Disease", "SpecificDisease"])
    assert (scores["tp"], scores["fp"], scores["fn"]) == (1, 2, 2)


def test_end_to_end_with_gold_mentions_links_every_gold_and_never_copies_its_id(tiny_bert):
    from spacy_sapbert.pipeline import build_pipeline

    nlp = build_pipeline(vocabulary(), tiny_bert, label="Disease", linker_config={"device": "cpu"})
    text = "Hepatoma and nephropathy, not heart failure."
    gold = [
        Mention(0, 8, "Hepatoma", "Disease", "OMIM:2"),
        Mention(13, 24, "nephropathy", "SpecificDisease", "D1"),  # wrong gold on purpose: a copied id would score
        Mention(26, 29, "not", "Disease", "D5"),  # no matcher would find it; linked all the same
    ]
    scores = evaluate_end_to_end(nlp, [Document("1", text, gold)], gold_mentions=True)
    # "heart failure" is not a gold mention: the matcher did not run, so no false positive
    assert (scores["tp"], scores["fp"], scores["fn"]) == (1, 2, 2)
    assert scores["ner"]["Disease"]["f1"] == 1.0


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
    vocabulary_ = KnowledgeBase(read_vocabulary(shared_file("medic", "medic_06Jul2012.txt"), "medic"))
    mentions, _, _ = read_corpus(shared_file("ncbi-disease", "NCBIdevelopset_corpus.txt"), "pubtator", prep)
    kb = KnowledgeBase(vocabulary_)
    retriever = NormalizedBaseline(TfidfRetriever, prep.normalizer, list(vocabulary_))
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
            "--baselines", "--baseline-model", tiny_bert, "--train", str(training_split(tmp_path)),
            "--cache-dir", str(tmp_path / "cache"), "--plot", str(tmp_path / "acc.png"), "--errors", str(tmp_path / "misses.jsonl")]
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
    misses = [json.loads(line) for line in (tmp_path / "misses.jsonl").read_text().splitlines()]
    for system, by_protocol in report["results"].items():  # one line per mention not ranked first
        for protocol, metrics in by_protocol.items():
            n = sum(1 for m in misses if m["system"] == system and m["protocol"] == protocol)
            assert n == round((1 - metrics["acc@1"]) * report["n_mentions"])


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
    assert "end to end" in result.output and "| (span, id), overlap |" in result.output
    assert e2e["ner"]["Disease"]["tp"] == 3 and e2e["overlap"]["tp"] == 3


def misled_mentions(tiny_bert, concepts):
    """Two nonsense mentions whose gold is *not* what the random encoder ranks first, and its retriever."""
    from spacy_sapbert.encoder import Encoder
    from spacy_sapbert.evaluation import LinkerRetriever, build_encoder_index

    encoder = Encoder(tiny_bert, device="cpu")
    base = LinkerRetriever("tiny", encoder, build_encoder_index(encoder, concepts))
    texts = ["xq", "zzv"]
    mentions = []
    for text, hits in zip(texts, base.rank(texts, 5)):
        gold = next(c.id for c in concepts if c.id != hits[0][0])
        mentions.append(EvalMention(text, gold, [text]))
    return base, mentions


def test_tune_memory_finds_that_the_memory_fixes_what_the_encoder_gets_wrong(tiny_bert):
    from spacy_sapbert.evaluation import LinkerRetriever, tune_memory
    from spacy_sapbert.memory import MemorySettings

    concepts = vocabulary()
    kb = KnowledgeBase(concepts)
    base, mentions = misled_mentions(tiny_bert, concepts)
    memory = [(m.text, m.gold) for m in mentions]
    encoder, index = base.linker.encoder, base.linker.index
    retriever = LinkerRetriever("tiny + memory", encoder, index, memory, MemorySettings())
    grid = {"memory_k": (1, 2), "memory_weight": (0.0, 0.5, 0.9), "concept_temperature": (0.01,), "memory_temperature": (0.1, 1.0)}
    rows = tune_memory(retriever, mentions, kb, grid)
    assert len(rows) == 2 * 3 * 1 * 2
    assert all(row["acc@1"] == 0.0 for row in rows if row["memory_weight"] == 0.0)  # the encoder alone
    assert rows[0]["acc@1"] == 1.0 and rows[0]["memory_weight"] > 0.0
    assert [r["acc@1"] for r in rows] == sorted((r["acc@1"] for r in rows), reverse=True)
    assert score_retriever(LinkerRetriever("m", encoder, index, memory, MemorySettings(1, 0.9)), mentions, kb)[0]["acc@1"] == 1.0


class FixedCandidates:
    """A stand-in LinkerRetriever (and its linker): fixed concept hits and memory neighbours for every query."""

    memory_active = True

    def __init__(self, concepts, neighbours):
        self.concepts, self.neighbours = concepts, neighbours
        self.linker = self

    class normalizer:  # noqa: N801 - stands in for Normalizer, whose query() is used
        @staticmethod
        def query(text):
            return text

    def retrieve(self, keys, memory_k):
        return [list(self.concepts) for _ in keys], [self.neighbours[:memory_k] for _ in keys]


def test_tune_memory_scores_each_memory_k_with_only_that_many_neighbours():
    """Neighbours are retrieved once per memory_k; a row of memory_k = 1 must see one.

    The index ranks the gold A just above B; the nearest neighbour votes for B, the second for A.
    With one neighbour B's vote wins; with both, the votes nearly cancel and the index's lead puts A
    first (test_memory.test_memory_k_cuts_the_neighbours_before_mixing has the numbers, names swapped).
    """
    from spacy_sapbert.evaluation import tune_memory
    from spacy_sapbert.evaluation.memory_tuning import grid_ranks

    kb = KnowledgeBase([Concept("A", "a"), Concept("B", "b")])
    retriever = FixedCandidates([("A", 0.90), ("B", 0.89)], [("B", 0.99), ("A", 0.98)])
    grid = {"memory_k": (1, 2), "memory_weight": (0.5,), "concept_temperature": (0.01,), "memory_temperature": (1.0,)}
    rows = tune_memory(retriever, [EvalMention("q", "A", ["q"])], kb, grid)
    assert {row["memory_k"]: row["acc@1"] for row in rows} == {1: 0.0, 2: 1.0}
    assert {row["memory_mixture"] for row in rows} == {"published"}  # not in this grid: the default
    ranks = grid_ranks(retriever, [EvalMention("q", "A", ["q"])], kb, grid)  # what tune_memory sorts, in grid order
    assert [(settings.memory_k, mention_ranks) for settings, mention_ranks in ranks] == [(1, [2]), (2, [1])]


def test_tune_memory_ranks_nothing_for_a_query_the_component_does_not_link():
    """A query without a letter or digit is never linked by the component (`is_linkable`); the grid scored its
    candidates as if it were, and counted it right (found by an audit)."""
    from spacy_sapbert.evaluation import tune_memory

    searched = []

    class Recording(FixedCandidates):
        def retrieve(self, keys, memory_k):
            searched.extend(keys)
            return super().retrieve(keys, memory_k)

    kb = KnowledgeBase([Concept("A", "a"), Concept("B", "b")])
    retriever = Recording([("A", 0.90), ("B", 0.89)], [("A", 0.99)])
    grid = {"memory_k": (1,), "memory_weight": (0.5,), "concept_temperature": (0.01,), "memory_temperature": (1.0,)}
    rows = tune_memory(retriever, [EvalMention("q", "A", ["q"]), EvalMention("-", "A", ["-"])], kb, grid)
    assert rows[0]["acc@1"] == 0.5 and "-" not in searched
    assert tune_memory(retriever, [EvalMention("(", "A", ["("])], kb, grid)[0]["acc@1"] == 0.0


def test_tune_memory_searches_each_memory_k_as_the_pipeline_does_and_ties_keep_grid_order(monkeypatch):
    """faiss orders exact ties (one string stored under several ids) otherwise for each k: the grid cut its memory_k = 1
    row from a deeper search and scored a setting as it never links; and an MRR tie on the last bit of a float sum
    put a later setting first (found by an audit)."""
    from spacy_sapbert.evaluation import memory_tuning, tune_memory
    from spacy_sapbert.memory import MemorySettings

    class TiesByDepth(FixedCandidates):
        def retrieve(self, keys, memory_k):  # the order faiss gave three equal vectors: k = 1 finds D3, k = 16 D6 first
            near = [("D3", 1.0)] if memory_k == 1 else [("D6", 1.0), ("D2", 1.0), ("D3", 1.0)][:memory_k]
            return [list(self.concepts) for _ in keys], [near for _ in keys]

    kb = KnowledgeBase([Concept(cid, cid.lower()) for cid in ("D2", "D3", "D6")])
    retriever = TiesByDepth([("D2", 0.50), ("D3", 0.49), ("D6", 0.48)], [])
    grid = {"memory_k": (1, 16), "memory_weight": (0.9,), "concept_temperature": (0.01,), "memory_temperature": (1.0,)}
    rows = tune_memory(retriever, [EvalMention("np", "D3", ["np"])], kb, grid)
    assert {row["memory_k"]: row["acc@1"] for row in rows}[1] == 1.0  # what a pipeline with memory_k = 1 links
    first, second = MemorySettings(memory_mixture="published"), MemorySettings(memory_mixture="union")
    same_ranks = [[3, 1, 1, 5, None, 1, 5, 7, 5], [1, 5, 1, 3, 1, None, 5, 7, 5]]  # one multiset, its sum rounded otherwise
    monkeypatch.setattr(memory_tuning, "grid_ranks", lambda *a, **k: [(first, same_ranks[0]), (second, same_ranks[1])])
    assert tune_memory(None, [], None, {})[0]["memory_mixture"] == "published"


def test_memory_settings_from_a_report_or_a_plain_mapping():
    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.memory import MemorySettings

    assert MemorySettings.from_dict({"memory_k": 8, "memory_weight": 0.3}) == MemorySettings(8, 0.3, 0.01, 1.0, "published")
    report = {"memory": {"settings": {"memory_k": 2, "memory_weight": 0.2, "concept_temperature": 0.05, "memory_temperature": 0.1,
                                      "memory_mixture": "union"}}}
    assert MemorySettings.from_dict(report) == MemorySettings(2, 0.2, 0.05, 0.1, "union")
    with pytest.raises(SapbertError, match="unknown memory setting.*lambda"):
        MemorySettings.from_dict({"lambda": 0.1}, source="x.json")


def test_evaluate_command_tunes_the_memory_on_dev_and_reuses_the_settings(tmp_path, tiny_bert):
    from spacy_sapbert.evaluation.memory_tuning import FULL_GRID
    from spacy_sapbert.memory import MemorySettings

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text(
        "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nD3||Kidney disease|nephropathy\n", encoding="utf8"
    )
    common = ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--model", tiny_bert,
              "--memory", str(training_split(tmp_path)), "--protocol", "strict", "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(app, common + ["--tune-memory", "--output", str(tmp_path / "dev.json")])
    assert result.exit_code == 0, result.output
    dev = json.loads((tmp_path / "dev.json").read_text())
    name = Path(tiny_bert).name
    memory = dev["memory"]
    assert memory["tuned_on_this_corpus"] and memory["n_entries"] == 3  # hepatoma, heart failure, nephropathy
    grid = memory["grid"]["strict"]
    assert list(memory["grid"]) == ["strict"] and memory["grid_name"] == "full" and len(grid) == 2 * 5 * 8 * 4 * 5
    assert {row["memory_mixture"] for row in grid} == {"published", "union"}
    assert {row["memory_k"] for row in grid} == {1, 2, 4, 8, 16}
    assert memory["settings"] == {k: grid[0][k] for k in memory["settings"]} == memory["settings_by_protocol"]["strict"]
    tuned = dev["results"][f"{name} + memory (tuned here)"]["strict"]
    assert tuned["acc@1"] == grid[0]["acc@1"] == 1.0  # every query is in the memory
    assert tuned["acc@1"] >= dev["results"][name]["strict"]["acc@1"]

    result = CliRunner().invoke(app, common + ["--tune-memory", "--memory-grid", "weight", "--output", str(tmp_path / "weight.json")])
    assert result.exit_code == 0, result.output
    weight = json.loads((tmp_path / "weight.json").read_text())["memory"]
    rows, paper = weight["grid"]["strict"], MemorySettings().to_dict()
    assert weight["grid_name"] == "weight" and len(rows) == 8
    assert {row["memory_weight"] for row in rows} == set(FULL_GRID["memory_weight"])
    assert all(row[k] == v for row in rows for k, v in paper.items() if k != "memory_weight")  # the paper's values

    result = CliRunner().invoke(app, common + ["--tune-memory", "--memory-grid", "wide", "--output", str(tmp_path / "x.json")])
    assert result.exit_code != 0 and "--memory-grid is 'wide'" in result.output and not (tmp_path / "x.json").exists()

    result = CliRunner().invoke(app, common + ["--memory-settings", str(tmp_path / "dev.json"), "--output", str(tmp_path / "test.json")])
    assert result.exit_code == 0, result.output
    test = json.loads((tmp_path / "test.json").read_text())
    assert test["memory"]["settings"] == memory["settings"] and not test["memory"]["tuned_on_this_corpus"]
    assert test["results"][f"{name} + memory"]["strict"] == tuned


def test_a_memory_or_train_corpus_that_adds_nothing_is_an_error_naming_it(tmp_path, tiny_bert):
    """A --memory corpus whose mentions --label kept none of (NCBI-disease's types are not 'Disease') gave a report
    without memory rows, and such a --train corpus biosyn rows equal to the strict ones, without a word."""
    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "ncbi.txt").write_text(PUBTATOR.replace("\tDisease\t", "\tSpecificDisease\t"), encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure\nD2||Liver cancer|hepatoma\nD3||Kidney disease|nephropathy\n", encoding="utf8")
    common = ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--model", tiny_bert,
              "--label", "Disease", "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "out.json")]
    for option in ("--memory", "--train"):
        result = CliRunner().invoke(app, common + [option, str(tmp_path / "ncbi.txt")])
        assert result.exit_code == 1 and f"{option} {tmp_path / 'ncbi.txt'}: no gold mention" in result.output
        assert "SpecificDisease" in result.output and not (tmp_path / "out.json").exists()
    assert CliRunner().invoke(app, common + ["--memory", str(training_split(tmp_path))]).exit_code == 0


def test_memory_settings_are_tuned_and_reused_per_protocol(tmp_path, tiny_bert):
    """Under biosyn the training mentions are names too, so the memory is tuned on that dictionary."""
    from spacy_sapbert import evaluation
    from spacy_sapbert.memory import MemorySettings

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "memory.txt").write_text("\n".join(PUBTATOR.splitlines()[:3]) + "\n\n", encoding="utf8")  # Hepatoma only
    # no mention is a vocabulary name: only the memory and biosyn's training names can find them exactly
    (tmp_path / "vocab.txt").write_text("D1||Cardiac insufficiency\nD2||Liver cancer\nD3||Kidney disease\n", encoding="utf8")
    common = dict(model=tiny_bert, train=[training_split(tmp_path)], memory=[tmp_path / "memory.txt"], cache_dir=tmp_path / "cache")
    dev = evaluation.run_benchmark(tmp_path / "corpus.txt", [(tmp_path / "vocab.txt", "auto", {})], tune=True, **common)
    memory = dev["memory"]
    assert list(memory["grid"]) == ["strict", "biosyn"]
    row = dev["results"][f"{Path(tiny_bert).name} + memory (tuned here)"]
    for protocol in ("strict", "biosyn"):
        best = memory["grid"][protocol][0]
        assert memory["settings_by_protocol"][protocol] == {k: best[k] for k in memory["settings"]}
        assert row[protocol]["acc@1"] == best["acc@1"]  # each protocol is scored with the settings tuned under it
    assert row["biosyn"]["acc@1"] == 1.0 > row["strict"]["acc@1"]  # the corpus's mentions are biosyn names
    assert memory["settings"] == memory["settings_by_protocol"]["strict"]

    per_protocol = {p: MemorySettings.from_dict(dev, protocol=p) for p in ("strict", "biosyn")}
    test = evaluation.run_benchmark(tmp_path / "corpus.txt", [(tmp_path / "vocab.txt", "auto", {})], memory_settings=per_protocol, **common)
    assert test["memory"]["settings_by_protocol"] == memory["settings_by_protocol"]
    assert test["results"][f"{Path(tiny_bert).name} + memory"] == row


def test_memory_settings_from_a_report_pick_the_protocol():
    from spacy_sapbert.memory import MemorySettings

    strict = MemorySettings(2, 0.2, 0.05, 0.1, "union")
    biosyn = MemorySettings(16, 0.7, 0.01, 0.1, "union")
    report = {"memory": {"settings": strict.to_dict(), "settings_by_protocol": {"strict": strict.to_dict(), "biosyn": biosyn.to_dict()}}}
    assert MemorySettings.from_dict(report) == strict  # what add-memory stores: a pipeline's index has vocabulary names only
    assert MemorySettings.from_dict(report, protocol="biosyn") == biosyn
    older = {"memory": {"settings": strict.to_dict()}}  # a report written before settings were chosen per protocol
    assert MemorySettings.from_dict(older, protocol="biosyn") == strict
    # a report that chose settings under one protocol only: not silently the other's (found by an audit)
    from spacy_sapbert.errors import ConfigWarning, SapbertError

    biosyn_only = {"memory": {"settings": biosyn.to_dict(), "settings_by_protocol": {"biosyn": biosyn.to_dict()}}}
    with pytest.raises(SapbertError, match=r"r.json: the report chose memory settings under \['biosyn'\] only, not under strict"):
        MemorySettings.from_dict(biosyn_only, source="r.json")  # add-memory: a pipeline takes the strict ones
    with pytest.warns(ConfigWarning, match=r"not under strict: strict runs with them"):
        assert MemorySettings.from_dict(biosyn_only, source="r.json", other_protocol=True) == biosyn  # evaluate


def test_run_benchmark_without_a_cache_encodes_the_vocabulary_once(tmp_path, tiny_bert, index_builds):
    """The model, the memory system and the tuning share one strict index even with no --cache-dir."""
    from spacy_sapbert import evaluation

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\n", encoding="utf8")
    builds = index_builds
    report = evaluation.run_benchmark(
        tmp_path / "corpus.txt", [(tmp_path / "vocab.txt", "auto", {})], model=tiny_bert,
        memory=[training_split(tmp_path)], tune=True, protocols=["strict"], cache_dir=None,
    )
    assert len(builds) == 1
    assert report["memory"]["tuned_on_this_corpus"] and len(report["results"]) == 2


def test_score_end_to_end_strict_overlap_and_ner_per_label():
    from spacy_sapbert.evaluation import Entity, score_end_to_end

    ids = frozenset
    golds = [
        Entity(0, 10, "Disease", ids({"D1"})),
        Entity(20, 30, "Disease", ids({"D2"})),
        Entity(40, 45, "Chemical", ids({"C1"})),
        Entity(50, 55, "Disease", ids()),  # cui-less: a NER target, no (span, id) target
    ]
    predictions = [
        Entity(0, 10, "Disease", ids({"D1", "ALT"})),  # exact, right id
        Entity(18, 30, "Disease", ids({"D2"})),  # overlapping, right id
        Entity(40, 45, "Disease", ids({"C9"})),  # exact span, wrong id and wrong label
        Entity(50, 55, "Disease", ids()),  # unlinked: no (span, id) prediction
        Entity(60, 65, "Chemical", ids({"C2"})),  # spurious
    ]
    scores = score_end_to_end([(golds, predictions)])
    assert (scores["tp"], scores["fp"], scores["fn"]) == (1, 3, 2)
    assert (scores["overlap"]["tp"], scores["overlap"]["fp"], scores["overlap"]["fn"]) == (2, 2, 1)
    assert scores["overlap"]["recall"] == pytest.approx(2 / 3)
    ner = scores["ner"]
    assert (ner["Disease"]["tp"], ner["Disease"]["fp"], ner["Disease"]["fn"]) == (2, 2, 1)
    assert (ner["Chemical"]["tp"], ner["Chemical"]["fp"], ner["Chemical"]["fn"]) == (0, 1, 1)
    assert (ner["micro"]["tp"], ner["micro"]["fp"], ner["micro"]["fn"]) == (2, 3, 2)
    assert ner["micro"]["f1"] == pytest.approx(2 * (2 / 5) * (2 / 4) / (2 / 5 + 2 / 4))


def test_evaluate_scores_a_reranker_through_the_component_and_refuses_one_of_another_encoder(tmp_path, tiny_bert):
    import torch

    from spacy_sapbert.reranker import Reranker

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text(
        "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nD3||Kidney disease|nephropathy\n", encoding="utf8"
    )
    torch.manual_seed(0)
    Reranker(tiny_bert, device="cpu").save(tmp_path / "reranker")  # an untrained head: any order, the same candidates
    args = ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--model", tiny_bert,
            "--cache-dir", str(tmp_path / "cache"), "--reranker", str(tmp_path / "reranker")]
    result = CliRunner().invoke(app, args + ["--output", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    name = Path(tiny_bert).name
    assert set(report["results"]) == {name, f"{name} + re-ranker"} and report["reranker"] == str(tmp_path / "reranker")
    for protocol in ("strict",):  # the re-ranker re-orders the top 10 of the same search (no --train: no biosyn row)
        assert report["results"][f"{name} + re-ranker"][protocol]["acc@10"] == report["results"][name][protocol]["acc@10"]
    # with a memory too: the re-ranker re-orders the memory's combined top 10
    result = CliRunner().invoke(app, args + ["--memory", str(training_split(tmp_path)), "--output", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "m.json").read_text())["results"]
    assert set(results) == {name, f"{name} + re-ranker", f"{name} + memory", f"{name} + memory + re-ranker"}
    for protocol in ("strict",):
        assert results[f"{name} + memory + re-ranker"][protocol]["acc@10"] == results[f"{name} + memory"][protocol]["acc@10"]
    Reranker(tiny_bert, device="cpu").save(tmp_path / "other", trained_on={"encoder_fingerprint": "0" * 16, "normalizer": {}})
    result = CliRunner().invoke(app, args[:-1] + [str(tmp_path / "other")])
    assert result.exit_code == 1 and "was trained on the candidates of encoder 0000000000000000" in result.output


def test_evaluate_scores_several_rerank_weights_in_one_run_each_pair_once(tmp_path, tiny_bert, monkeypatch):
    import torch

    from spacy_sapbert.reranker import Reranker

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text(
        "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nD3||Kidney disease|nephropathy\n", encoding="utf8"
    )
    torch.manual_seed(3)
    head = Reranker(tiny_bert, device="cpu")
    head.bi_temperature = 0.1  # its logit joins the linker's score: the weight moves the order
    head.save(tmp_path / "reranker")
    scored = []
    original = Reranker._score
    monkeypatch.setattr(Reranker, "_score", lambda self, pairs: scored.extend(pairs) or original(self, pairs))
    args = ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--model", tiny_bert,
            "--cache-dir", str(tmp_path / "cache"), "--reranker", str(tmp_path / "reranker"), "--memory", str(training_split(tmp_path)),
            "--train", str(training_split(tmp_path))]

    def run(weights, output):
        result = CliRunner().invoke(app, args + [f"--rerank-weight={w}" for w in weights] + ["--output", str(tmp_path / output)])
        assert result.exit_code == 0, result.output
        return json.loads((tmp_path / output).read_text())

    several = run(["0.001", "1000", "0.001"], "several.json")  # a repeated weight is scored once
    assert len(scored) == len(set(scored)) > 0  # each (mention, candidate) pair once for every weight and row
    assert several["rerank_weights"] == [0.001, 1000.0]
    results, name = several["results"], Path(tiny_bert).name
    rows = [f"{name} + re-ranker (weight {w})" for w in ("0.001", "1000")]
    memory_rows = [f"{name} + memory + re-ranker (weight {w})" for w in ("0.001", "1000")]
    assert set(results) == {name, f"{name} + memory", *rows, *memory_rows}
    for protocol in ("strict", "biosyn"):  # a tiny weight leaves the linker's order
        assert results[rows[0]][protocol] == results[name][protocol]
        assert results[memory_rows[0]][protocol] == results[f"{name} + memory"][protocol]
    single = run(["1000"], "single.json")["results"]  # one weight: the rows keep their plain names
    assert set(single) == {name, f"{name} + re-ranker", f"{name} + memory", f"{name} + memory + re-ranker"}
    assert single[f"{name} + re-ranker"] == results[rows[1]]
    assert single[f"{name} + memory + re-ranker"] == results[memory_rows[1]]
    result = CliRunner().invoke(app, args + ["--rerank-weight", "1", "--rerank-weight", "0"])
    assert result.exit_code == 1 and "--rerank-weight must be a positive number, got 0.0" in result.output


class CountingEncoder:
    """What build_encoder_index reads of an encoder, with vectors from the texts alone and a count of encode calls."""

    def __init__(self, batch_size: int = 128, delay: float = 0.0):
        self.fingerprint, self.backend, self.pooling, self.max_length = "0123456789abcdef", "torch", "mean", 25
        self.batch_size, self.delay, self.calls = batch_size, delay, 0

    def encode(self, texts, progress=False):
        import time
        import zlib

        self.calls += 1
        time.sleep(self.delay)
        return numpy.array([[zlib.crc32(t.encode()) % 97 + 1, len(t), 1.0] for t in texts], dtype="float32")


def test_the_eval_index_cache_is_keyed_by_batch_size_and_built_once_by_runs_at_the_same_time(tmp_path):
    """Two evaluations of one key at once shared its chunk folder: the first removed it while the second still wrote
    there, leaving a folder without manifest that stopped every later build; and a --batch-size 1 run read the
    vectors a --batch-size 128 run had encoded (found by an audit)."""
    import threading

    from spacy_sapbert.evaluation import build_encoder_index

    concepts = [Concept("D1", "heart failure"), Concept("D2", "liver cancer"), Concept("D3", "kidney disease")]
    cache = tmp_path / "cache"
    encoders = [CountingEncoder(delay=0.5), CountingEncoder(delay=0.5)]
    built = [None, None]

    def run(number):
        built[number] = build_encoder_index(encoders[number], concepts, cache_dir=cache, chunk_size=1)

    threads = [threading.Thread(target=run, args=(number,)) for number in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(encoder.calls for encoder in encoders) == [0, 3]  # one run encoded (a chunk a call), the other read it
    assert list(built[0].names) == list(built[1].names)
    assert not [p for p in cache.iterdir() if p.name.endswith(".chunks")]
    build_encoder_index(CountingEncoder(batch_size=1), concepts, cache_dir=cache)
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2  # another batch size: another cache entry


def test_the_report_counts_the_memory_entries_the_memory_holds(tmp_path, tiny_bert):
    """n_entries counted the raw (text, id) pairs: three spellings of one normalized mention were 3 entries, the memory
    held 1 (found by an audit)."""
    from spacy_sapbert import evaluation

    (tmp_path / "vocab.txt").write_text("D1||Cardiac insufficiency\nD2||Liver cancer\n", encoding="utf8")
    (tmp_path / "dev.txt").write_text("1|t|Hepatoma.\n1|a|x\n1\t0\t8\tHepatoma\tDisease\tD2\n\n", encoding="utf8")
    text = "Heart failure, heart failure, heart-failure."
    (tmp_path / "mem.txt").write_text(
        f"2|t|{text}\n2|a|x\n2\t0\t13\tHeart failure\tDisease\tD1\n2\t15\t28\theart failure\tDisease\tD1\n"
        "2\t30\t43\theart-failure\tDisease\tD1\n\n", encoding="utf8")
    report = evaluation.run_benchmark(tmp_path / "dev.txt", [(tmp_path / "vocab.txt", "auto", {})], model=tiny_bert,
                                      memory=[tmp_path / "mem.txt"], cache_dir=None)
    assert report["memory"]["n_entries"] == 1


def test_evaluate_caches_its_dictionaries_under_spacy_sapbert_home(tmp_path, tiny_bert, monkeypatch):
    """The offline default honoured $SPACY_SAPBERT_HOME, evaluate's index cache wrote to ~/.cache all the same (found by
    a fresh-user walk through the README)."""
    monkeypatch.setenv("SPACY_SAPBERT_HOME", str(tmp_path / "home"))
    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure\nD2||Liver cancer|hepatoma\n", encoding="utf8")
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--model", tiny_bert])
    assert result.exit_code == 0, result.output
    assert any((tmp_path / "home" / "eval-index").iterdir())


def test_a_training_or_memory_corpus_that_is_the_scored_corpus_is_refused_and_shared_documents_are_warned_of(tmp_path, tiny_bert):
    """--train or --memory naming the scored corpus put its own gold mentions in the dictionary or the memory: near 100%,
    silently (found by an audit)."""
    import warnings

    from spacy_sapbert.evaluation import run_benchmark
    from spacy_sapbert.readers.corpora import CorpusWarning

    (tmp_path / "corpus.txt").write_text(PUBTATOR, encoding="utf8")
    (tmp_path / "vocab.txt").write_text("D1||Heart failure\nD2||Liver cancer\nD3||Kidney disease\n", encoding="utf8")
    vocab = [(tmp_path / "vocab.txt", "auto", {})]
    for option in ("train", "memory"):
        with pytest.raises(SapbertError, match=f"--{option} .*corpus.txt is the corpus being scored"):
            run_benchmark(tmp_path / "corpus.txt", vocab, model=tiny_bert, **{option: [tmp_path / "corpus.txt"]})
    (tmp_path / "copy.txt").write_text(PUBTATOR, encoding="utf8")
    with pytest.warns(CorpusWarning, match=r"--train .*copy.txt shares 1 document\(s\) with the scored corpus"):
        run_benchmark(tmp_path / "corpus.txt", vocab, model=tiny_bert, train=[tmp_path / "copy.txt"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusWarning)
        run_benchmark(tmp_path / "corpus.txt", vocab, model=tiny_bert, train=[training_split(tmp_path)])


def test_tfidf_looks_deeper_when_the_first_names_fill_fewer_than_k_concepts():
    """It looked 8k + 32 names deep: nine concepts of thirteen close names each filled that depth, and the tenth
    concept was never ranked (found by an audit)."""
    concepts = [Concept(f"C{i}", f"abc disease {i}", [f"abc disease {i} v{j}" for j in range(12)]) for i in range(9)]
    concepts += [Concept("GOLD", "abc zzzzz")] + [Concept(f"F{i}", f"qqq rrr {i}") for i in range(5)]
    [hits] = TfidfRetriever(concepts).rank(["abc disease"], k=10)
    assert len(hits) == 10 and hits[-1][0] == "GOLD"
    [few] = TfidfRetriever(concepts).rank(["zzzzz"], k=10)  # fewer concepts share a 3-gram with it: all of those
    assert [cid for cid, _ in few] == ["GOLD"]
