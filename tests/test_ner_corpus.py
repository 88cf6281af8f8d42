"""PubTator -> NER training Docs: exact gold offsets, and every mention not kept as it is counted."""
import json

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import SapbertError
from spacy_sapbert.ner_corpus import parse_label_map, split_at_boundaries, training_doc
from spacy_sapbert.readers.corpora import Document, Mention

from conftest import shared_file

runner = CliRunner()
nlp = spacy.blank("en")


def mention(text: str, part: str, label: str = "SpecificDisease", gold: str = "D1", nth: int = 0) -> Mention:
    start = -1
    for _ in range(nth + 1):
        start = text.index(part, start + 1)
    return Mention(start=start, end=start + len(part), text=part, label=label, gold=gold)


def test_split_at_boundaries_keeps_the_text_and_cuts_inside_tokens():
    doc = nlp.make_doc("PAN)-induced nephrosis, twice.")
    words, spaces = split_at_boundaries(doc, {3, 4, 0, 13})  # 0 and 13 are token edges already
    assert "".join(w + (" " if s else "") for w, s in zip(words, spaces)) == doc.text
    assert words == ["PAN", ")", "-induced", "nephrosis", ",", "twice", "."]
    assert spaces == [False, False, True, False, True, False, False]


def test_a_boundary_inside_a_token_is_split_there_and_counted():
    text = "Puromycin aminonucleoside (PAN)-induced nephrosis in rats."
    document = Document("1", text, [mention(text, "PAN", "Chemical", "D011692"), mention(text, "nephrosis", "Disease", "D009401")])
    assert nlp.make_doc(text).char_span(text.index("PAN"), text.index("PAN") + 3) is None  # the premise
    doc, report = training_doc(nlp.make_doc, document)
    assert [(e.text, e.label_, e.kb_id_) for e in doc.ents] == [("PAN", "Chemical", "D011692"), ("nephrosis", "Disease", "D009401")]
    assert doc.text == text
    assert report.split_tokens == 1 and report.entities == {"Chemical": 1, "Disease": 1}


def test_overlaps_keep_the_longer_duplicates_merge_and_types_map():
    text = "Hereditary breast cancer and ovarian cancer."
    document = Document(
        "2",
        text,
        [
            mention(text, "breast cancer", "DiseaseClass"),
            mention(text, "Hereditary breast cancer", "SpecificDisease"),
            mention(text, "ovarian cancer", "Modifier", "D2"),
            mention(text, "ovarian cancer", "CompositeMention", "D2"),
        ],
    )
    doc, report = training_doc(nlp.make_doc, document)
    assert [(e.text, e.label_) for e in doc.ents] == [("Hereditary breast cancer", "Disease"), ("ovarian cancer", "Disease")]
    assert (report.overlapping, report.duplicates, report.mentions) == (1, 1, 4)
    assert report.duplicates_with_other_ids == 0 and doc.ents[1].kb_id_ == "D2"


def test_a_span_annotated_twice_with_two_ids_keeps_both():
    """The second gold id of a duplicate span was dropped while the report said "merged" (found by an audit)."""
    text = "Breast cancer runs in families."
    document = Document("3", text, [mention(text, "Breast cancer", "SpecificDisease", "D001"),
                                    mention(text, "Breast cancer", "DiseaseClass", "D002"),
                                    mention(text, "Breast cancer", "Modifier", "D001")])
    doc, report = training_doc(nlp.make_doc, document)
    assert [(e.text, e.kb_id_) for e in doc.ents] == [("Breast cancer", "D001|D002")]  # either id right, as an "A|B" gold
    assert (report.duplicates, report.duplicates_with_other_ids) == (2, 1)
    assert "2 duplicates (merged; 1 of them with another gold id, joined as A|B)" in report.summary()


def test_unknown_types_and_labels_not_asked_for_are_counted_by_name():
    text = "Cisplatin nephrotoxicity with BRCA1."
    document = Document(
        "3",
        text,
        [mention(text, "Cisplatin", "Chemical"), mention(text, "nephrotoxicity", "Disease"), mention(text, "BRCA1", "Gene")],
    )
    doc, report = training_doc(nlp.make_doc, document, labels=["Disease"])
    assert [e.text for e in doc.ents] == ["nephrotoxicity"]
    assert report.unknown_labels == {"Gene": 1} and report.left_out_labels == {"Chemical": 1}
    assert "Gene 1" in report.summary() and "Chemical 1" in report.summary()
    doc, report = training_doc(nlp.make_doc, document, label_map=parse_label_map(["Gene=Gene"]))
    assert [e.label_ for e in doc.ents] == ["Chemical", "Disease", "Gene"]


def test_whitespace_at_a_mention_end_is_trimmed():
    text = "Severe ataxia  telangiectasia here."
    document = Document("4", text, [Mention(7, 15, "ataxia  ", "SpecificDisease", "D1"), Mention(13, 15, "  ", "Disease", "D2")])
    doc, report = training_doc(nlp.make_doc, document)
    assert [e.text for e in doc.ents] == ["ataxia"] and report.split_tokens == 0
    assert report.blank == 1 and "1 of nothing but whitespace" in report.summary()


def test_a_bad_label_map_item_is_an_error_naming_it():
    with pytest.raises(SapbertError, match="Gene:Gene"):
        parse_label_map(["Gene:Gene"])
    with pytest.raises(SapbertError, match="maps Modifier twice"):  # the last one won, silently
        parse_label_map(["Modifier=A", "Modifier=B"])
    assert parse_label_map(["Modifier=A", "Modifier=A"])["Modifier"] == "A"


PUBTATOR = (
    "10|t|Hereditary breast cancer.\n10|a|Breast cancer (BC)-linked genes.\n"
    "10\t0\t24\tHereditary breast cancer\tSpecificDisease\tD001943\n"
    "10\t26\t39\tBreast cancer\tDiseaseClass\tD001943\n"
    "10\t41\t43\tBC\tSpecificDisease\tD001943\n"
)


def test_convert_writes_a_docbin_for_spacy_train_and_reports_per_file(tmp_path):
    corpus = tmp_path / "mini.txt"
    corpus.write_text(PUBTATOR, encoding="utf8")
    out, report = tmp_path / "train.spacy", tmp_path / "report.json"
    result = runner.invoke(app, ["convert", str(corpus), "-o", str(out), "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert "mini.txt: 1 documents, 3 mentions -> 3 entities (Disease 3); 1 with a boundary inside a token" in result.output
    docs = list(DocBin().from_disk(out).get_docs(nlp.vocab))
    assert [(e.text, e.label_, e.kb_id_) for e in docs[0].ents] == [
        ("Hereditary breast cancer", "Disease", "D001943"),
        ("Breast cancer", "Disease", "D001943"),
        ("BC", "Disease", "D001943"),
    ]
    written = json.loads(report.read_text())[0]
    assert written["split_tokens"] == 1 and written["entities"] == {"Disease": 3}


def test_convert_with_kb_ids_rewrites_gold_ids_to_the_linkers_concepts(tmp_path, tiny_bert):
    import spacy

    from spacy_sapbert.kb import Concept

    pipeline = spacy.blank("en")
    pipeline.add_pipe("sapbert_linker", config={"model": tiny_bert, "device": "cpu"}).initialize(
        vocabulary=[Concept("MESH:D001943", "Breast Neoplasms", alt_ids=["D001943"]), Concept("D009369", "Neoplasms")]
    )
    pipeline.to_disk(tmp_path / "pipe")
    corpus = tmp_path / "mini.txt"
    corpus.write_text(PUBTATOR.replace("D001943\n10\t41", "D009369+D001943\n10\t41").replace("BC\tSpecificDisease\tD001943", "BC\tSpecificDisease\tD404|D009369"), encoding="utf8")
    out, report = tmp_path / "el.spacy", tmp_path / "report.json"
    result = runner.invoke(app, ["convert", str(corpus), "-o", str(out), "--report", str(report), "--kb-ids", str(tmp_path / "pipe")])
    assert result.exit_code == 0, result.output
    docs = list(DocBin().from_disk(out).get_docs(nlp.vocab))
    # an alternative id -> its primary id; a combination -> no id; "A|B" -> the first part the vocabulary has
    assert [e.kb_id_ for e in docs[0].ents] == ["MESH:D001943", "", "D009369"]
    assert json.loads(report.read_text())[0]["kb_ids"] == {"alternative": 1, "combination": 1, "kept": 1}


def test_convert_refuses_a_result_without_entities_and_names_bad_lines(tmp_path):
    corpus = tmp_path / "mini.txt"
    corpus.write_text(PUBTATOR, encoding="utf8")
    result = runner.invoke(app, ["convert", str(corpus), "-o", str(tmp_path / "x.spacy"), "--labels", "Chemical"])
    assert result.exit_code != 0 and "--labels Chemical names no label of" in result.output and not (tmp_path / "x.spacy").exists()
    assert "(types: DiseaseClass, SpecificDisease; labels after mapping: Disease)" in result.output
    # a map entry of a type the corpus does not have (a case slip) was accepted and changed nothing
    result = runner.invoke(app, ["convert", str(corpus), "-o", str(tmp_path / "x.spacy"), "--label-map", "specificdisease=Illness"])
    assert result.exit_code != 0 and "--label-map specificdisease=Illness names no type" in result.output
    result = runner.invoke(app, ["convert", str(corpus), "-o", str(tmp_path / "x.spacy"), "--label-map", "SpecificDisease=Illness", "--labels", "Illness"])
    assert result.exit_code == 0 and "(Illness 2)" in result.output  # a map entry and a label that match are taken
    (tmp_path / "x.spacy").unlink()  # the test's own output, written just above: the next convert writes it anew
    corpus.write_text(PUBTATOR + "10\tx\t43\tBC\tSpecificDisease\tD001943\n", encoding="utf8")
    result = runner.invoke(app, ["convert", str(corpus), "-o", str(tmp_path / "x.spacy")])
    assert result.exit_code != 0 and "mini.txt" in result.output and "line 6" in result.output


def test_ncbi_disease_training_set_converts_whole():
    path = shared_file("ncbi-disease", "NCBItrainset_corpus.txt")
    from spacy_sapbert.ner_corpus import convert_pubtator

    docs, report = convert_pubtator(path, nlp.make_doc)
    assert report.documents == len(docs) == 593
    assert report.mentions == sum(report.entities.values()) == sum(len(d.ents) for d in docs) == 5145
    assert 0 < report.split_tokens < 50 and report.overlapping == report.duplicates == 0
