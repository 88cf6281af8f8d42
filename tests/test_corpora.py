"""Corpus readers: PubTator (NCBI-disease, BC5CDR, MedMentions), BioSyn .concept, XL-BEL, and gold Docs."""
from __future__ import annotations

import warnings
from collections import Counter

import pytest

from conftest import shared_file
from spacy_sapbert.errors import SapbertError, VocabularyFormatError
from spacy_sapbert.preprocess import gold_ids, is_cuiless
from spacy_sapbert.readers import FormatDetectionError
from spacy_sapbert.readers.corpora import (
    CorpusWarning,
    Document,
    Mention,
    Query,
    document_to_doc,
    documents_to_docs,
    detect_corpus_format,
    queries_from_documents,
    read_biosyn_concepts,
    read_pubtator,
    read_xlbel,
)

NCBI_FILES = {
    "train": "NCBItrainset_corpus.txt",
    "dev": "NCBIdevelopset_corpus.txt",
    "test": "NCBItestset_corpus.txt",
}
BC5CDR_FILES = {"train": "CDR_TrainingSet.PubTator.txt", "dev": "CDR_DevelopmentSet.PubTator.txt"}
XLBEL_LANGUAGES = ["de", "en", "es", "fi", "ja", "ko", "ru", "th", "tr", "zh"]

_cache: dict = {}


def ncbi(split: str):
    key = ("ncbi", split)
    if key not in _cache:
        _cache[key] = list(read_pubtator(shared_file("ncbi-disease", NCBI_FILES[split])))
    return _cache[key]


def bc5cdr(split: str):
    key = ("bc5cdr", split)
    if key not in _cache:
        _cache[key] = list(read_pubtator(shared_file("bc5cdr", BC5CDR_FILES[split])))
    return _cache[key]


def write(tmp_path, name: str, content, binary: bool = False):
    path = tmp_path / name
    if binary:
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf8")
    return path


# --------------------------------------------------------------------------------------------------
# NCBI-disease (counts from ncbi-disease/SOURCE.txt)


@pytest.mark.parametrize(
    "split, blocks, pmids, mentions, unique_ids, with_bar, with_plus",
    [
        ("train", 593, 592, 5145, 647, 93, 22),
        ("dev", 100, 100, 787, 170, 20, 10),
        ("test", 100, 100, 960, 200, 15, 0),
    ],
)
def test_ncbi_counts(split, blocks, pmids, mentions, unique_ids, with_bar, with_plus):
    docs = ncbi(split)
    all_mentions = [m for d in docs for m in d.mentions]
    assert len(docs) == blocks
    assert len({d.id for d in docs}) == pmids
    assert len(all_mentions) == mentions
    assert len(set().union(*(gold_ids(m.gold) for m in all_mentions))) == unique_ids
    assert sum("|" in m.gold for m in all_mentions) == with_bar
    assert sum("+" in m.gold for m in all_mentions) == with_plus
    for doc in docs:
        for m in doc.mentions:
            assert doc.text[m.start : m.end] == m.text
    assert {m.label for m in all_mentions} == {"SpecificDisease", "DiseaseClass", "Modifier", "CompositeMention"}


def test_ncbi_first_test_document():
    doc = ncbi("test")[0]
    assert doc.id == "9949209"
    assert doc.text.startswith("Genetic mapping of the copper toxicosis locus")
    # offsets are into title + " " + abstract
    title = "Genetic mapping of the copper toxicosis locus in Bedlington terriers to dog chromosome 10, in a region syntenic to human chromosome region 2p13-p16."
    assert doc.text[len(title)] == " " and doc.text[len(title) + 1 :].startswith("Abnormal hepatic copper")
    first = doc.mentions[0]
    assert first == Mention(23, 39, "copper toxicosis", "Modifier", "OMIM:215600")
    assert any(m.text == "Wilson disease" and m.gold == "D006527" for m in doc.mentions)
    assert any(m.gold.startswith("OMIM:") for d in ncbi("test") for m in d.mentions)


def test_ncbi_mention_with_trailing_spaces_takes_text_from_offsets():
    # NCBI train line 3249 writes 'generalized ... " plus "  ' (two trailing spaces) for offsets 711-761
    doc = next(d for d in ncbi("train") if d.id == "10923035")
    mention = next(m for m in doc.mentions if m.start == 711)
    assert mention.text == 'generalized epilepsy and febrile seizures " plus "'
    assert mention.gold == "D004829+D003294"


def test_ncbi_duplicate_pmid_gives_two_documents():
    docs = [d for d in ncbi("train") if d.id == "8528200"]
    assert len(docs) == 2
    assert docs[0].text == docs[1].text


# --------------------------------------------------------------------------------------------------
# BC5CDR (counts from bc5cdr/SOURCE.txt)


@pytest.mark.parametrize(
    "split, chemical, disease, chemical_cuiless, disease_cuiless, chemical_ids, disease_ids",
    [
        ("train", 5203, 4182, 44, 32, 664, 664),
        # SOURCE.txt gives 605 unique disease ids for dev: that figure counts "-1" as an id (604 + "-1")
        ("dev", 5347, 4244, 43, 16, 659, 604),
    ],
)
def test_bc5cdr_counts(split, chemical, disease, chemical_cuiless, disease_cuiless, chemical_ids, disease_ids):
    docs = bc5cdr(split)
    assert len(docs) == 500
    mentions = [m for d in docs for m in d.mentions]
    by_type = Counter(m.label for m in mentions)
    assert by_type == {"Chemical": chemical, "Disease": disease}  # relation (CID) lines are not mentions
    cuiless = Counter(m.label for m in mentions if m.gold == "-1")
    assert cuiless == {"Chemical": chemical_cuiless, "Disease": disease_cuiless}
    for label, expected in (("Chemical", chemical_ids), ("Disease", disease_ids)):
        ids = set().union(*(gold_ids(m.gold) for m in mentions if m.label == label))
        assert len({i for i in ids if not is_cuiless(i)}) == expected


@pytest.mark.parametrize("split, with_parts, bar_without_parts", [("train", 89, 9), ("dev", 89, 11)])
def test_bc5cdr_composite_parts(split, with_parts, bar_without_parts):
    mentions = [m for d in bc5cdr(split) for m in d.mentions]
    assert sum(bool(m.parts) for m in mentions) == with_parts
    assert sum("|" in m.gold and not m.parts for m in mentions) == bar_without_parts
    for m in mentions:
        if m.parts:
            assert "|" in m.gold
    if split == "train":
        ocular = next(m for d in bc5cdr("train") if d.id == "2234245" for m in d.mentions if m.start == 0)
        assert ocular.text == "Ocular and auditory toxicity"
        assert ocular.gold == "D014786|D006311"
        assert ocular.parts == ["Ocular toxicity", "auditory toxicity"]


@pytest.mark.parametrize("split", ["train", "dev"])
@pytest.mark.parametrize("label", ["Chemical", "Disease"])
def test_bc5cdr_agrees_with_biosyn_concept_files(split, label):
    concept = shared_file("biosyn-concept", f"bc5cdr-{label.lower()}-cl_{split}.concept")
    ours = Counter((d.id, m.text, m.gold) for d in bc5cdr(split) for m in d.mentions if m.label == label)
    theirs = Counter((q.doc_id, q.mention, q.gold) for q in read_biosyn_concepts(concept))
    assert ours == theirs


def test_queries_from_documents_filters_and_splits():
    docs = bc5cdr("train")
    disease = list(queries_from_documents(docs, labels=["Disease"]))
    assert len(disease) == 4182
    assert all(isinstance(q, Query) and q.label == "Disease" and q.context == "" for q in disease)
    assert len(list(queries_from_documents(docs))) == 9385
    split = [q for q in queries_from_documents(docs, labels={"Disease"}, split_composites=True) if q.doc_id == "2234245"]
    assert ("Ocular toxicity", "D014786") in [(q.mention, q.gold) for q in split]
    assert ("auditory toxicity", "D006311") in [(q.mention, q.gold) for q in split]
    assert not any("|" in q.gold for q in split)


# --------------------------------------------------------------------------------------------------
# BioSyn .concept, XL-BEL, MedMentions


@pytest.mark.parametrize(
    "name, docs, mentions, cuiless",
    [
        ("bc5cdr-disease-cl_dev.concept", 500, 4244, 16),
        ("bc5cdr-chemical-cl_train.concept", 500, 5203, 44),
        ("nlm-chem_dev.concept", 20, 5349, 54),
    ],
)
def test_biosyn_concept_counts(name, docs, mentions, cuiless):
    queries = list(read_biosyn_concepts(shared_file("biosyn-concept", name)))
    assert len(queries) == mentions
    assert len({q.doc_id for q in queries}) == docs
    assert sum(is_cuiless(q.gold) for q in queries) == cuiless
    if name.startswith("nlm-chem"):
        assert queries[0] == Query("celecoxib", "MESH:D000068579", "1479836", "0")
    else:
        assert all(q.label in ("Disease", "Chemical") for q in queries)


@pytest.mark.parametrize("language", XLBEL_LANGUAGES)
def test_xlbel_both_forms_have_1000_queries(language):
    v0 = list(read_xlbel(shared_file("xl-bel", "xlbel_v0.0", f"{language}_1k_test_query.txt")))
    v1 = list(read_xlbel(shared_file("xl-bel", "xlbel_v1.0", f"{language}_1k_test_query_with_context.txt")))
    assert len(v0) == len(v1) == 1000
    assert all(q.context == "" and q.gold for q in v0)
    # every gold is a UMLS CUI except one zh query whose id is written "90058"
    assert sum(not q.gold.startswith("C") for q in v0) == (1 if language == "zh" else 0)
    assert all(q.context and "<tgt>" not in q.context and "</tgt>" not in q.context for q in v1)
    assert sum(q.mention in q.context for q in v1) >= 999
    if language == "en":
        assert len({q.gold for q in v0}) == 875 and len({q.gold for q in v1}) == 807
        assert v0[0] == Query("streaked flycatcher", "C2297357", "en_1k_test_query.txt:1", "")
        assert v1[1].mention == "california quail" and v1[1].gold == "C0325638"
        assert v1[1].context.startswith("mammals and birds that inhabit this park include prairie falcon")
        assert ", california quail, raccoon" in v1[1].context


def test_xlbel_empty_marker_falls_back_to_mention_column():
    v1 = list(read_xlbel(shared_file("xl-bel", "xlbel_v1.0", "de_1k_test_query_with_context.txt")))
    query = v1[735]  # line 736 has "<tgt></tgt>"
    assert query.mention == "-dysphorie" and query.gold == "C3176494"
    assert query.doc_id == "de_1k_test_query_with_context.txt:736"


def test_xlbel_queries_with_several_cuis_are_searched_whole_any_cui_right(tmp_path):
    """In XL-BEL "C1|C2" lists the concepts any one of which is right; the query was split as a composite ("small and
    superficial dilated blood vessels" into two parts that both had to be found; found by an audit)."""
    from spacy_sapbert.evaluation.queries import Preprocessing, read_corpus

    path = shared_file("xl-bel", "xlbel_v1.0", "en_1k_test_query_with_context.txt")
    mentions, _, _ = read_corpus(path, "xlbel", Preprocessing())
    several = [m for m in mentions if "|" in m.gold]
    assert several and all(m.queries == [m.text] for m in several)
    assert any(m.text == "small and superficial dilated blood vessels" for m in several)
    # a BioSyn .concept file's "A|B" is a composite: still split
    (tmp_path / "x.concept").write_text("1||0|25||Disease||breast and ovarian cancer||D001943|D010051\n", encoding="utf8")
    [composite] = read_corpus(tmp_path / "x.concept", "biosyn", Preprocessing())[0]
    assert composite.queries == ["breast cancer", "ovarian cancer"]


def test_xlbel_all_file():
    queries = list(read_xlbel(shared_file("xl-bel", "xlbel_v0.0", "all_1k_test_query.txt")))
    assert len(queries) == 10000 and len({q.gold for q in queries}) == 5259


def test_medmentions_sample():
    docs = list(read_pubtator(shared_file("medmentions-sample", "scispacy_fixture_med_mentions.txt")))
    mentions = [m for d in docs for m in d.mentions]
    assert len(docs) == 3 and len(mentions) == 115
    assert len({m.gold for m in mentions}) == 51
    assert all(m.gold.startswith("UMLS:C") for m in mentions)
    assert all(m.label.startswith("T") for m in mentions)
    first = docs[0].mentions[0]
    assert (docs[0].id, first.text, first.label, first.gold) == ("25763772", "DCTN4", "T103", "UMLS:C4308010")


# --------------------------------------------------------------------------------------------------
# spaCy Docs


def test_document_to_doc_sets_gold_entities():
    import spacy

    nlp = spacy.blank("en")
    document = ncbi("test")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        doc = document_to_doc(nlp, document)
    assert doc.text == document.text
    assert len(doc.ents) == len(document.mentions)
    for ent, mention in zip(doc.ents, document.mentions):
        assert ent.kb_id_ == mention.gold
        assert ent.label_ == mention.label
        assert ent.start_char <= mention.start and ent.end_char >= mention.end
    assert doc.user_data["sapbert_unplaced_mentions"] == []
    # a text -> Doc function works too
    assert [e.kb_id_ for e in document_to_doc(nlp.make_doc, document).ents] == [e.kb_id_ for e in doc.ents]


def test_document_to_doc_composite_gold_string_and_expansion():
    import spacy

    nlp = spacy.blank("en")
    document = Document(
        "1",
        "Risk of breast and ovarian cancer and BRCA1-associated tumours.",
        [
            Mention(8, 33, "breast and ovarian cancer", "CompositeMention", "D001943|D010051"),
            Mention(38, 43, "BRCA1", "Modifier", "X1"),  # inside the token "BRCA1-associated"? expanded
        ],
    )
    doc = document_to_doc(nlp, document)
    assert [(e.text, e.kb_id_) for e in doc.ents][0] == ("breast and ovarian cancer", "D001943|D010051")
    assert doc.ents[1].kb_id_ == "X1" and "BRCA1" in doc.ents[1].text


def test_overlapping_mentions_keep_longer_and_warn():
    import spacy

    nlp = spacy.blank("en")
    document = Document(
        "7",
        "Patients with hereditary breast cancer were seen.",
        [
            Mention(25, 31, "breast", "Modifier", "D1"),
            Mention(14, 38, "hereditary breast cancer", "SpecificDisease", "D2"),
        ],
    )
    with pytest.warns(CorpusWarning, match="1 of 2"):
        doc = document_to_doc(nlp, document)
    assert [(e.text, e.kb_id_) for e in doc.ents] == [("hereditary breast cancer", "D2")]
    assert doc.user_data["sapbert_unplaced_mentions"] == [(25, 31, "breast", "D1")]


def test_documents_to_docs_cuts_tokens_so_mentions_inside_one_token_are_placed_as_written():
    """BC5CDR 19058010 has mentions inside one spaCy token: widened to the whole token, they overlapped and were
    left out (add-memory, choose-pipeline), or were searched as another string ("DMD)or")."""
    import warnings

    import spacy

    docs = [d for d in bc5cdr("train") if d.id == "19058010"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusWarning)
        [doc] = documents_to_docs(spacy.blank("en"), docs)
    assert doc.user_data["sapbert_unplaced_mentions"] == [] and doc.text == docs[0].text
    placed = sorted((e.start_char, e.end_char, e.text) for e in doc.ents)
    assert placed == sorted((m.start, m.end, m.text) for m in docs[0].mentions) and len(placed) > 1
    overlapping = Document("1", "ab", [Mention(0, 2, "ab", "Chemical", "D1"), Mention(1, 2, "b", "Chemical", "D2")])
    with pytest.warns(CorpusWarning, match="could not be placed"):
        [doc] = documents_to_docs(spacy.blank("en"), [overlapping])
    assert [e.text for e in doc.ents] == ["ab"] and len(doc.user_data["sapbert_unplaced_mentions"]) == 1


def test_document_to_doc_needs_nlp():
    with pytest.raises(SapbertError):
        document_to_doc(42, Document("1", "x", []))


# --------------------------------------------------------------------------------------------------
# malformed input

GOOD_DOC = "1|t|Naloxone reverses clonidine.\n1|a|It works.\n1\t0\t8\tNaloxone\tChemical\tD009270\n1\tCID\tD009270\tD006973\n\n"


def test_relation_lines_skipped_and_missing_final_blank_line(tmp_path):
    path = write(tmp_path, "ok.txt", GOOD_DOC + "2|t|Second\n2|a|doc\n2\t7\t10\tdoc\tDisease\t-1")
    docs = list(read_pubtator(path))
    assert [d.id for d in docs] == ["1", "2"]
    assert docs[0].text == "Naloxone reverses clonidine. It works."
    assert docs[0].mentions == [Mention(0, 8, "Naloxone", "Chemical", "D009270")]
    assert docs[1].mentions[0].gold == "-1"


@pytest.mark.parametrize(
    "bad_line, problem",
    [
        ("1\t18\t27\tclonidine\tChemical", "expected 6"),
        ("1\t18\t27\tclonidine\tChemical\tD003000\tclonidine\textra", "expected 6"),
        ("1\t18\t27\tclonidine\t\tD003000", "empty type"),
        ("1\t18\t27\tclonidine\tChemical\t ", "empty concept id"),
        ("1\tx18\t27\tclonidine\tChemical\tD003000", "start offset 'x18' is not an integer"),
        ("1\t18.0\t27\tclonidine\tChemical\tD003000", "start offset '18.0' is not an integer"),
        ("1\t\u00b9\u2078\t27\tclonidine\tChemical\tD003000", "is not an integer"),  # superscript digits
        ("1\t\t27\tclonidine\tChemical\tD003000", "start offset '' is not an integer"),
        ("1\t18\t" + "9" * 5000 + "\tclonidine\tChemical\tD003000", "end offset '9999"),  # int() refuses 5000 digits
        ("1\tCID\tD009270", "neither a mention line"),
        ("1\tCID\tD009270\t", "neither a mention line"),
        ("2\tCID\tD009270\tD006973", "relation of document 2 inside document 1"),
        ("1\t18\t27\tclonidin\tChemical\tD003000", "does not match"),
        ("1\t9\tx\tclonidine\tChemical\tD003000", "not an integer"),
        ("1\t20\t9\tclonidine\tChemical\tD003000", "bad offsets"),
        ("2\t18\t27\tclonidine\tChemical\tD003000", "inside document 1"),
        ("1\t9\t500\tclonidine\tChemical\tD003000", "after the end"),
        ("just some text", "neither"),
    ],
)
def test_pubtator_malformed_line_names_file_and_line(tmp_path, bad_line, problem):
    path = write(tmp_path, "bad.txt", GOOD_DOC.replace("\n1\tCID", f"\n{bad_line}\n1\tCID"))
    with pytest.raises(VocabularyFormatError, match=problem) as info:
        list(read_pubtator(path))
    assert info.value.line_no == 4
    assert "bad.txt, line 4" in str(info.value)


def test_pubtator_not_strict_skips_with_one_warning(tmp_path):
    text = GOOD_DOC.replace("\n1\tCID", "\n1\t18\t27\tclonidin\tChemical\tD003000\n1\t18\t27\tclonidine\tChemical\tD003000\n1\tCID")
    path = write(tmp_path, "bad.txt", text + "2|t|Second\n2|a|doc\n2\t7\t10\tdoc\tDisease\n")
    with pytest.warns(CorpusWarning, match=r"bad.txt: skipped 2 .*line 4"):
        docs = list(read_pubtator(path, strict=False))
    assert [len(d.mentions) for d in docs] == [2, 0]
    assert docs[0].mentions[1].text == "clonidine"


def test_invalid_utf8_names_file_and_line(tmp_path):
    data = GOOD_DOC.encode("utf8").replace(b"It works.", b"It w\xff rks.")
    path = write(tmp_path, "latin.txt", data, binary=True)
    with pytest.raises(VocabularyFormatError, match=r"latin.txt, line 2: not valid UTF-8"):
        list(read_pubtator(path))
    path = write(tmp_path, "latin.concept", b"1||0|5||Disease||caf\xe9||D1\n2||0|3||Disease||flu||D2\n", binary=True)
    with pytest.raises(VocabularyFormatError, match=r"latin.concept, line 1: not valid UTF-8"):
        list(read_biosyn_concepts(path))
    with pytest.warns(CorpusWarning):
        assert [q.mention for q in read_biosyn_concepts(path, strict=False)] == ["flu"]


def test_missing_file_raises_at_call():
    with pytest.raises(FileNotFoundError):
        read_pubtator("/nonexistent/corpus.txt")
    with pytest.raises(VocabularyFormatError):
        read_xlbel("/nonexistent/xlbel.txt")


def test_biosyn_concept_malformed(tmp_path):
    path = write(tmp_path, "x.concept", "1||0|5||Disease||fever||D1\n1||0-5||Disease||fever||D1\n")
    with pytest.raises(VocabularyFormatError, match=r"x.concept, line 2: .*start\|end"):
        list(read_biosyn_concepts(path))
    path = write(tmp_path, "z.concept", "1||0|5||Disease||fever||D1\n ||0|5||Disease||fever||D1\n")
    with pytest.raises(VocabularyFormatError, match=r"z.concept, line 2: empty PMID"):
        list(read_biosyn_concepts(path))
    path = write(tmp_path, "y.concept", "1||0|5||Disease||fever\n1||0|5||Disease||fever||D1\n")
    with pytest.warns(CorpusWarning, match="line 1"):
        assert len(list(read_biosyn_concepts(path, strict=False))) == 1
    # offsets that do not span the mention (a column out of place) were read as they came; 0|0 means none given
    path = write(tmp_path, "w.concept", "1||0|0||Chemical||DMC||MESH:C506698\n1||57|28||Disease||fever||D1\n1||0|5||Disease||D1||fever\n")
    with pytest.raises(VocabularyFormatError, match=r"w.concept, line 2: offsets '57\|28' span -29 characters, the mention 'fever' has 5"):
        list(read_biosyn_concepts(path))
    with pytest.warns(CorpusWarning, match=r"w.concept: skipped 2 .*line 2"):
        assert [q.mention for q in read_biosyn_concepts(path, strict=False)] == ["DMC"]


def test_xlbel_malformed(tmp_path):
    path = write(tmp_path, "q.txt", "C1||fever||a <tgt>fever</tgt> b\nC2||cough||no marker here\n")
    with pytest.raises(VocabularyFormatError, match=r"q.txt, line 2: .*<tgt>"):
        list(read_xlbel(path))
    path = write(tmp_path, "r.txt", "C1||fever\nC1\nC2||cough\n")
    with pytest.warns(CorpusWarning, match="line 2"):
        assert [q.mention for q in read_xlbel(path, strict=False)] == ["fever", "cough"]
    path = write(tmp_path, "s.txt", "C1||california quail||the <tgt>bobcat</tgt> ran\nC2||||an <tgt>owl</tgt>\n")
    with pytest.raises(VocabularyFormatError, match=r"s.txt, line 1: the mention column 'california quail' is not the text marked"):
        list(read_xlbel(path))


def test_pubtator_non_integer_start_is_counted_not_dropped(tmp_path):
    bad = "1\tx18\t27\tclonidine\tChemical\tD003000"
    path = write(tmp_path, "bad.txt", GOOD_DOC.replace("\n1\tCID", f"\n{bad}\n1\tCID"))
    with pytest.raises(VocabularyFormatError, match=r"bad.txt, line 4: start offset 'x18' is not an integer"):
        list(read_pubtator(path))
    with pytest.warns(CorpusWarning, match=r"bad.txt: skipped 1 .*line 4"):
        docs = list(read_pubtator(path, strict=False))
    assert [m.text for d in docs for m in d.mentions] == ["Naloxone"]


def _line_kinds(path):
    """(text lines, mention lines, relation lines, other non-blank lines) counted with plain string tests."""
    text = mention = relation = other = 0
    for line in path.read_text(encoding="utf8").split("\n"):
        fields = line.split("\t")
        if not line.strip():
            continue
        if "|t|" in line.split("\t")[0] or "|a|" in line.split("\t")[0]:
            text += 1
        elif len(fields) in (6, 7) and fields[1].isdigit() and fields[2].isdigit():
            mention += 1
        elif len(fields) == 4 and fields[1] == "CID":
            relation += 1
        else:
            other += 1
    return text, mention, relation, other


@pytest.mark.parametrize(
    "folder, name, docs, mentions, relations",
    [
        ("ncbi-disease", "NCBItrainset_corpus.txt", 593, 5145, 0),
        ("ncbi-disease", "NCBIdevelopset_corpus.txt", 100, 787, 0),
        ("ncbi-disease", "NCBItestset_corpus.txt", 100, 960, 0),
        ("bc5cdr", "CDR_TrainingSet.PubTator.txt", 500, 9385, 1038),  # SOURCE.txt: 1038 / 1012 CID lines
        ("bc5cdr", "CDR_DevelopmentSet.PubTator.txt", 500, 9591, 1012),
        ("medmentions-sample", "scispacy_fixture_med_mentions.txt", 3, 115, 0),
    ],
)
def test_every_real_pubtator_line_is_read(folder, name, docs, mentions, relations):
    path = shared_file(folder, name)
    text, mention_lines, relation_lines, other = _line_kinds(path)
    assert (text, mention_lines, relation_lines, other) == (2 * docs, mentions, relations, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not one line or mention skipped, strict or not
        for strict in (True, False):
            read = list(read_pubtator(path, strict=strict))
            assert len(read) == docs and sum(len(d.mentions) for d in read) == mentions


@pytest.mark.parametrize(
    "parts, expected",
    [
        (("ncbi-disease", "NCBItestset_corpus.txt"), "pubtator"),
        (("bc5cdr", "CDR_DevelopmentSet.PubTator.txt"), "pubtator"),
        (("medmentions-sample", "scispacy_fixture_med_mentions.txt"), "pubtator"),
        (("biosyn-concept", "bc5cdr-chemical-cl_dev.concept"), "biosyn"),
        (("biosyn-concept", "nlm-chem_dev.concept"), "biosyn"),
        (("xl-bel", "xlbel_v0.0", "en_1k_test_query.txt"), "xlbel"),
        (("xl-bel", "xlbel_v0.0", "zh_1k_test_query.txt"), "xlbel"),
        (("xl-bel", "xlbel_v1.0", "ja_1k_test_query_with_context.txt"), "xlbel"),
    ],
)
def test_detect_corpus_format_by_content(tmp_path, parts, expected):
    source = shared_file(*parts)
    assert detect_corpus_format(source) == expected
    renamed = tmp_path / "corpus.txt"  # a name that says nothing
    with open(source, "rb") as handle:
        head = handle.read(50_000)
    renamed.write_bytes(head[: head.rindex(b"\n") + 1])
    assert detect_corpus_format(renamed) == expected


@pytest.mark.parametrize(
    "parts, seen",
    [
        (("medic", "medic_06Jul2012.txt"), "MEDIC-style vocabulary"),
        (("ontologies", "mondo.json"), "it is JSON"),
        (("ontologies", "hp.obo"), "an OBO ontology"),
        (("umls-rrf-samples", "MRCONSO.RRF"), "UMLS MRCONSO vocabulary"),
        (("mesh-2024", "mesh_id_label_mappings.tsv"), "MeSH descriptor"),
        (("medmentions-sample", "corpus_pubtator_pmids_dev.txt"), "no line fits"),
    ],
)
def test_detect_corpus_format_refuses_vocabularies(parts, seen):
    path = shared_file(*parts)
    with pytest.raises(FormatDetectionError) as info:
        detect_corpus_format(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and seen in message
    option = "--corpus-format, one of: pubtator, biosyn, xlbel"
    recognized = seen not in ("no line fits", "it is JSON")  # another kind of file: the file is the likely mistake
    assert message.endswith(f"give a corpus file here (if it is one after all, pass {option})" if recognized else f"pass it with {option}")


def test_corpus_readers_latin1_names_file_and_line(tmp_path):
    cases = [
        (read_xlbel, "C0000001||fever\nC0000002||Sj\u00f6gren\nC0000003||cough\n", 2),
        (read_biosyn_concepts, "1||0|5||Disease||fever||D1\n1||6|13||Disease||Sj\u00f6gren||D2\n1||14|19||Disease||cough||D3\n", 2),
        (read_pubtator, "1|t|Sj\u00f6gren syndrome\n1|a|x\n1\t0\t7\tSj\u00f6gren\tDisease\tD1\n", 1),
    ]
    for reader, text, kept in cases:
        path = write(tmp_path, "latin1.txt", text.encode("latin-1"), binary=True)
        with pytest.raises(VocabularyFormatError, match=r"latin1.txt, line [0-9]+: not valid UTF-8"):
            list(reader(path))
        with pytest.warns(CorpusWarning, match="skipped"):
            read = list(reader(path, strict=False))
        assert len(read) == (kept if reader is not read_pubtator else 0)
