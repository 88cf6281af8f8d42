"""Vocabulary readers: tiny fixture files written to tmp_path, plus the real files under ../shared/data."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import List

import pytest
from conftest import shared_file

from spacy_sapbert.errors import SapbertError, VocabularyFormatError
from spacy_sapbert.kb import Concept
from spacy_sapbert.readers import (
    VocabularyNotFoundError,
    VocabularyWarning,
    guess_format,
    read_dictionary,
    read_mesh_descriptors,
    read_mesh_supplementary,
    read_mrconso,
    read_mrrel_tradenames,
    read_mrsty,
    read_obo,
    read_obo_graph_json,
    read_spell_check,
    read_vocabulary,
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def by_id(concepts) -> dict:
    return {concept.id: concept for concept in concepts}


def read_with_warnings(reader, *args, **kwargs):
    """(concepts, warning messages) of a non-strict read."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        concepts = list(reader(*args, strict=False, **kwargs))
    return concepts, [str(w.message) for w in caught if issubclass(w.category, VocabularyWarning)]


def conso(cui: str, string: str, lat: str = "ENG", ts: str = "S", stt: str = "PF", ispref: str = "N",
          sab: str = "MSH", tty: str = "ET", suppress: str = "N") -> str:
    """One synthetic MRCONSO.RRF row (18 columns + trailing '|')."""
    fields = [cui, lat, ts, "L1", stt, "S1", ispref, "A1", "", "", "", sab, tty, "X1", string, "0", suppress, "256"]
    return "|".join(fields) + "|"


# --- dictionary / MEDIC ----------------------------------------------------------------------------


def test_dictionary_merges_repeated_ids_in_first_seen_order(tmp_path):
    path = write(tmp_path, "vocab_names.txt", "C2||beta\nC1||alpha\n\nC2||beta two\nC1||alpha\nC2||beta\n")
    concepts = list(read_dictionary(path))
    assert [c.id for c in concepts] == ["C2", "C1"]
    assert concepts[0].names == ["beta", "beta two"]
    assert concepts[1].names == ["alpha"]


def test_dictionary_medic_form_ids_and_names(tmp_path):
    path = write(
        tmp_path,
        "vocab_medic.txt",
        "270400|D019082||Smith-Lemli-Opitz Syndrome|SLOS|RSH Syndrome\r\n"
        "C567755|613097||Tooth Agenesis, Selective, 6|STHAG6\r\n"
        "MESH:D000001||Calcimycin\r\n"
        "C||Diseases\r\n"
        "umls:C0011849|MESH:D003920||Diabetes Mellitus\r\n",
    )
    concepts = by_id(read_dictionary(path))
    # MeSH and UMLS ids bare, as the corpora's gold ids are compared ("MESH:D000001" scored 0 against its own name)
    assert list(concepts) == ["OMIM:270400", "C567755", "D000001", "C", "C0011849"]
    assert concepts["C0011849"].alt_ids == ["D003920"]
    slos = concepts["OMIM:270400"]
    assert slos.alt_ids == ["D019082"]
    assert slos.name == "Smith-Lemli-Opitz Syndrome" and slos.synonyms == ["SLOS", "RSH Syndrome"]
    assert concepts["C567755"].alt_ids == ["OMIM:613097"]
    assert concepts["C567755"].names == ["Tooth Agenesis, Selective, 6", "STHAG6"]  # no "\r" left over


@pytest.mark.parametrize(
    "bad_line, problem",
    [
        ("D000001 Calcimycin", "no '||'"),
        ("||Calcimycin", "empty id"),
        ("D000001||", "no name"),
        ("D1||a||b", "more than one"),
    ],
)
def test_dictionary_malformed_line_names_file_and_line(tmp_path, bad_line, problem):
    path = write(tmp_path, "vocab_bad.txt", f"D000002||Temefos\n\n{bad_line}\nD000003||Abattoirs\n")
    with pytest.raises(VocabularyFormatError) as info:
        list(read_dictionary(path))
    message = str(info.value)
    assert "vocab_bad.txt" in message and "line 3" in message and problem in message
    assert info.value.line_no == 3
    assert bad_line[:10] in message  # the start of the offending line is quoted


def test_dictionary_not_strict_skips_counts_and_warns_once(tmp_path):
    path = write(tmp_path, "vocab_bad.txt", "D1||a\nno separator\nD2||b\n||x\nD3||c\n")
    concepts, messages = read_with_warnings(read_dictionary, path)
    assert [c.id for c in concepts] == ["D1", "D2", "D3"]
    assert len(messages) == 1
    assert "vocab_bad.txt" in messages[0] and "skipped 2 " in messages[0] and "line 2" in messages[0]


def test_dictionary_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "vocab_latin1.txt"
    path.write_bytes("D1||fever\nD2||Sjögren syndrome\n".encode("latin-1"))
    with pytest.raises(VocabularyFormatError) as info:
        list(read_dictionary(path))
    assert "vocab_latin1.txt, line 2" in str(info.value) and "UTF-8" in str(info.value)
    concepts, messages = read_with_warnings(read_dictionary, path)
    assert [c.id for c in concepts] == ["D1"]
    assert "skipped 1 " in messages[0] and "line 2" in messages[0]


def test_clean_files_do_not_warn(tmp_path):
    path = write(tmp_path, "vocab_ok.txt", "\ufeffD1||a\nD2||b")  # BOM, no trailing newline
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [c.id for c in read_dictionary(path, strict=False)] == ["D1", "D2"]


def test_missing_file_raises_at_call_time(tmp_path):
    missing = tmp_path / "nope.txt"
    for reader in (read_dictionary, read_mrconso, read_obo, read_obo_graph_json, read_mesh_descriptors):
        with pytest.raises(FileNotFoundError) as info:
            reader(missing)  # not iterated: the check is eager
        assert isinstance(info.value, VocabularyFormatError) and "nope.txt" in str(info.value)
    with pytest.raises(VocabularyNotFoundError):
        read_mrsty(missing)


def test_spell_check(tmp_path):
    path = write(tmp_path, "vocab_spell.txt", "hemmorhage||haemorrhage\nfist||first\n")
    assert read_spell_check(path) == {"hemmorhage": "haemorrhage", "fist": "first"}
    bad = write(tmp_path, "vocab_spell_bad.txt", "hemmorhage haemorrhage\n")
    with pytest.raises(VocabularyFormatError, match="line 1"):
        read_spell_check(bad)
    # a misspelling corrected two ways: the last one won without a word; the same pair twice is fine
    twice = write(tmp_path, "vocab_spell_twice.txt", "fist||first\nfist||first\nhemmorhage||haemorrhage\nfist||fist-degree\n")
    with pytest.raises(VocabularyFormatError, match=r"line 4: 'fist' was corrected to 'first' at line 1, here to 'fist-degree'"):
        read_spell_check(twice)
    with pytest.warns(VocabularyWarning, match="skipped 1"):
        assert read_spell_check(twice, strict=False) == {"fist": "first", "hemmorhage": "haemorrhage"}


def test_real_medic_counts_match_source_txt():
    concepts = list(read_dictionary(shared_file("medic", "medic_06Jul2012.txt")))
    # SOURCE.txt: 11,915 concept lines; 14,942 distinct ids (MeSH + OMIM); 76,237 names. All three match.
    assert len(concepts) == 11915
    assert len({i for c in concepts for i in c.all_ids}) == 14942
    assert sum(len(c.names) for c in concepts) == 76237
    slos = by_id(concepts)["OMIM:270400"]
    assert slos.alt_ids == ["D019082"] and slos.name == "Smith-Lemli-Opitz Syndrome"
    assert "C" in by_id(concepts)  # the root "C||Diseases"
    assert not any(c.id.isdigit() or any(a.isdigit() for a in c.alt_ids) for c in concepts)  # no bare OMIM ids


def test_real_spell_check():
    corrections = read_spell_check(shared_file("medic", "ncbi-spell-check.txt"))
    assert corrections["hepatosplenomegally"] == "hepatosplenomegaly"
    assert len(corrections) > 30


# --- UMLS RRF ------------------------------------------------------------------------------------


def test_real_mrconso_and_mrsty():
    types = read_mrsty(shared_file("umls-rrf-samples", "MRSTY.RRF"))
    assert types == {"C0000005": ["T116"], "C0000039": ["T109", "T121"]}
    concepts = list(read_mrconso(shared_file("umls-rrf-samples", "MRCONSO.RRF"), semantic_types=types))
    assert [c.id for c in concepts] == ["C0000005", "C0000039"]
    assert concepts[0].names == ["(131)I-Macroaggregated Albumin", "(131)I-MAA"]
    assert concepts[0].types == ["T116"]
    # C0000039's only row has ISPREF=N: no preferred row, so the first row gives the name
    assert concepts[1].name == "1,2-Dipalmitoylphosphatidylcholine" and concepts[1].types == ["T109", "T121"]
    assert [c.sources for c in concepts] == [["MSH"], ["MSH"]]  # the rows' SAB column


def test_mrconso_filters_and_canonical_name(tmp_path):
    path = write(
        tmp_path,
        "MRCONSO.RRF",
        "\n".join(
            [
                conso("C1", "heart attack", ts="S"),
                conso("C1", "Myocardial Infarction", ts="P", ispref="Y", tty="MH"),
                conso("C1", "old heart name", suppress="O"),
                conso("C1", "infarctus du myocarde", lat="FRE", ts="P", ispref="Y"),
                conso("C1", "MI", sab="SNOMEDCT_US"),
                conso("C2", "Fever", ts="P", ispref="Y", sab="MSH"),
                conso("C3", "only suppressed", suppress="E"),
            ]
        ),
    )
    default = by_id(read_mrconso(path))
    assert list(default) == ["C1", "C2"]  # C3 has only a suppressed row
    assert default["C1"].name == "Myocardial Infarction"  # TS=P, STT=PF, ISPREF=Y, not the first row
    assert default["C1"].synonyms == ["heart attack", "MI"]  # no FRE row, no SUPPRESS=O row
    assert default["C1"].sources == ["MSH", "SNOMEDCT_US"]  # the SABs of the rows kept, once each

    all_languages = by_id(read_mrconso(path, languages=None))
    assert "infarctus du myocarde" in all_languages["C1"].synonyms
    assert all_languages["C1"].name == "Myocardial Infarction"  # the English preferred name still wins
    assert by_id(read_mrconso(path, languages=["FRE"]))["C1"].name == "infarctus du myocarde"

    assert "MI" not in by_id(read_mrconso(path, sources=["MSH"]))["C1"].names
    assert by_id(read_mrconso(path, exclude_sources=["MSH"]))["C1"].names == ["MI"]
    assert list(by_id(read_mrconso(path, sources=["SNOMEDCT_US"]))) == ["C1"]

    kept = by_id(read_mrconso(path, keep_suppressed=True))
    assert "old heart name" in kept["C1"].synonyms and kept["C3"].name == "only suppressed"


def test_mrconso_streams_concepts_before_reading_the_rest(tmp_path):
    path = write(tmp_path, "MRCONSO.RRF", "\n".join([conso("C1", "a"), conso("C2", "b"), "C3|ENG|broken|"]))
    concepts = read_mrconso(path)
    assert next(concepts).id == "C1"  # yielded as soon as C2 starts, before line 3 is read
    with pytest.raises(VocabularyFormatError) as info:
        next(concepts)  # C2 is still open when the bad line 3 comes
    assert "MRCONSO.RRF, line 3" in str(info.value) and "expected 18" in str(info.value)


def test_mrconso_wrong_field_count(tmp_path):
    good = conso("C1", "a")
    path = write(tmp_path, "MRCONSO.RRF", "\n".join([good, good[:-1], good + "extra|", conso("C2", "b")]))
    with pytest.raises(VocabularyFormatError, match=r"MRCONSO\.RRF, line 2"):
        list(read_mrconso(path))
    concepts, messages = read_with_warnings(read_mrconso, path)
    assert [c.id for c in concepts] == ["C1", "C2"]
    assert len(messages) == 1 and "skipped 2 " in messages[0] and "line 2" in messages[0]


def test_mrsty_and_mrrel_tradenames(tmp_path):
    sty = write(
        tmp_path,
        "MRSTY.RRF",
        "C1|T047|B2.2.1.2.1|Disease or Syndrome|AT1|256|\nC1|T047|x|y|AT2|256|\nC2|T121|x|y|AT3|256|",
    )
    assert read_mrsty(sty) == {"C1": ["T047"], "C2": ["T121"]}
    bad_sty = write(tmp_path, "MRSTY_bad.RRF", "C1|T047|\n")
    with pytest.raises(VocabularyFormatError, match="MRSTY_bad.RRF, line 1"):
        read_mrsty(bad_sty)

    def rel(cui1: str, rela: str, cui2: str) -> str:
        fields = [cui1, "A1", "SCUI", "RO", cui2, "A2", "SCUI", rela, "R1", "", "RXNORM", "RXNORM", "", "", "N", ""]
        return "|".join(fields) + "|"  # 16 columns + trailing "|"

    mrrel = write(
        tmp_path,
        "MRREL.RRF",
        "\n".join(
            [rel("C1", "has_tradename", "C9"), rel("C1", "isa", "C5"), rel("C9", "tradename_of", "C1"), "C1|A1|broken|"]
        ),
    )
    with pytest.raises(VocabularyFormatError, match="MRREL.RRF, line 4"):
        list(read_mrrel_tradenames(mrrel))
    pairs, messages = read_with_warnings(read_mrrel_tradenames, mrrel)
    assert pairs == [("C1", "C9"), ("C9", "C1")]
    assert "skipped 1 " in messages[0]


# --- OBO -----------------------------------------------------------------------------------------

OBO_TEXT = r"""format-version: 1.2
default-namespace: test_ontology
! a comment line

[Term]
id: TO:0000001
name: Abnormal "thing"
synonym: "The \"quoted\" thing" EXACT layperson []
synonym: "other thing" RELATED [PMID:1]
xref: UMLS:C0000001
xref: MSH:D000001
xref: MEDDRA:10022016 "Inguinal hernia"
alt_id: TO:0000099
is_a: TO:0000000 ! root

[Term]
id: TO:0000002
name: obsolete old thing
is_obsolete: true

[Term]
id: TO:0000003
name: Other
namespace: other_ns
xref: MESH:C000002 {source="x"}

[Typedef]
id: part_of
name: part of
"""


def test_obo_terms_synonyms_xrefs(tmp_path):
    concepts = by_id(read_obo(write(tmp_path, "test.obo", OBO_TEXT)))
    assert list(concepts) == ["TO:0000001", "TO:0000003"]  # obsolete term and Typedef left out
    first = concepts["TO:0000001"]
    assert first.name == 'Abnormal "thing"'
    assert first.synonyms == ['The "quoted" thing', "other thing"]
    assert first.xrefs == ["UMLS:C0000001", "MESH:D000001", "MEDDRA:10022016"]
    assert first.alt_ids == ["TO:0000099"]
    assert first.types == ["test_ontology"]  # default-namespace from the header
    assert first.sources == ["TO"]  # the id's prefix
    assert concepts["TO:0000003"].types == ["other_ns"] and concepts["TO:0000003"].xrefs == ["MESH:C000002"]
    with_obsolete = by_id(read_obo(write(tmp_path, "test.obo", OBO_TEXT), include_obsolete=True))
    assert "TO:0000002" in with_obsolete


def test_an_obo_names_trailing_comment_is_not_part_of_it(tmp_path):
    """OBO: an unescaped "!" after a space starts a comment; it was kept in the name (found by an audit)."""
    text = "format-version: 1.2\n\n[Term]\nid: X:1\nname: alpha ! a comment\n\n[Term]\nid: X:2\nname: beta \\! gamma\n"
    concepts = by_id(read_obo(write(tmp_path, "c.obo", text)))
    assert concepts["X:1"].name == "alpha" and concepts["X:2"].name == "beta ! gamma"


def test_obo_malformed_lines(tmp_path):
    text = OBO_TEXT.replace('synonym: "other thing" RELATED [PMID:1]', "synonym: other thing RELATED").replace(
        "name: Other", "this line has no tag"
    )
    path = write(tmp_path, "bad.obo", text)
    with pytest.raises(VocabularyFormatError) as info:
        list(read_obo(path))
    assert "bad.obo, line 9" in str(info.value) and "quoted" in str(info.value)
    concepts, messages = read_with_warnings(read_obo, path)
    assert [c.id for c in concepts] == ["TO:0000001"]  # TO:0000003 lost its name line, so it is skipped
    assert concepts[0].synonyms == ['The "quoted" thing']
    assert len(messages) == 1 and "skipped 2 " in messages[0] and "line 9" in messages[0]

    no_id = write(tmp_path, "noid.obo", "[Term]\nname: nameless id\n")
    with pytest.raises(VocabularyFormatError, match="noid.obo, line 1.*without an 'id'"):
        list(read_obo(no_id))


@pytest.fixture(scope="module")
def hpo() -> List[Concept]:
    return list(read_obo(shared_file("ontologies", "hp.obo"), include_obsolete=True))


def test_real_hp_obo(hpo):
    # SOURCE.txt: 19,484 [Term] stanzas incl. obsolete; hp.obo has 450 "is_obsolete: true" lines (checked with grep).
    assert len(hpo) == 19484
    current = by_id(read_obo(shared_file("ontologies", "hp.obo")))
    assert len(current) == 19484 - 450
    term = current["HP:0000002"]
    assert term.name == "Abnormality of body height" and "UMLS:C4025901" in term.xrefs
    assert current["HP:0000003"].alt_ids == ["HP:0004715"]
    # SOURCE.txt: 12,925 "xref: UMLS:" lines (obsolete terms included)
    assert sum(x.startswith("UMLS:") for c in hpo for x in c.xrefs) == 12925
    assert all(":" in x and " " not in x for c in hpo for x in c.xrefs)


def test_obo_json_synthetic(tmp_path):
    terms = [
        {"id": "0000004", "name": "adrenal insufficiency", "namespace": "mondo", "synonyms": ["hypoadrenalism"],
         "xrefs": [{"id": "C0001623", "namespace": "UMLS"}, {"id": "D000309", "namespace": "MESH"},
                   {"id": "C0405580", "namespace": "UMLS_CUI"}, {"id": "D1", "namespace": "MSH"}],
         "alt_ids": ["0000099", "MONDO:0000098"]},
        {"id": "0000005", "name": "gone", "namespace": "mondo", "deprecated": True},
        {"id": "0000006", "name": "obsolete old disease", "namespace": "mondo"},
        {"id": "0000007", "namespace": "mondo"},
        {"name": "no id"},
    ]
    path = write(tmp_path, "terms.json", json.dumps(terms))
    with pytest.raises(VocabularyFormatError, match=r"terms.json: \[3\]: term 0000007 without a 'name'"):
        list(read_obo_graph_json(path))
    concepts, messages = read_with_warnings(read_obo_graph_json, path)
    assert [c.id for c in concepts] == ["MONDO:0000004"]
    assert concepts[0].xrefs == ["UMLS:C0001623", "MESH:D000309", "UMLS:C0405580", "MESH:D1"]
    assert concepts[0].alt_ids == ["MONDO:0000099", "MONDO:0000098"]
    assert len(messages) == 1 and "skipped 2 malformed term" in messages[0]  # [3] without a name, [4] without an id
    with pytest.warns(VocabularyWarning, match="skipped 2 malformed term"):
        kept = by_id(read_obo_graph_json(path, include_obsolete=True, strict=False))
    assert {"MONDO:0000005", "MONDO:0000006"} <= set(kept)
    assert next(read_obo_graph_json(path, prefix="X", strict=False)).id == "X:0000004"  # not exhausted: no warning

    broken = write(tmp_path, "broken.json", '[\n {"id": "1",\n')
    with pytest.raises(VocabularyFormatError, match="broken.json, line 3: not valid JSON"):
        list(read_obo_graph_json(broken))


def test_real_mondo_json():
    concepts = list(read_obo_graph_json(shared_file("ontologies", "mondo.json")))
    assert len(concepts) == 23964  # SOURCE.txt: 23,964 terms (none marked obsolete)
    assert all(c.id.startswith("MONDO:") for c in concepts)
    assert all(a.startswith("MONDO:") for c in concepts for a in c.alt_ids)
    mondo = by_id(concepts)
    assert "UMLS:C0405580" in mondo["MONDO:0000004"].xrefs and "MESH:D000309" in mondo["MONDO:0000004"].xrefs
    # SOURCE.txt: 14,994 UMLS / 8,237 MESH / 9,506 OMIM xrefs
    assert sum(x.startswith("UMLS:") for c in concepts for x in c.xrefs) == 14994
    assert sum(x.startswith("MESH:") for c in concepts for x in c.xrefs) == 8237
    assert sum(x.startswith("OMIM:") for c in concepts for x in c.xrefs) == 9506


def test_real_doid_json():
    concepts = list(read_obo_graph_json(shared_file("ontologies", "doid.json")))
    assert len(concepts) == 11454
    doid = by_id(concepts)
    assert "UMLS:C0012634" in doid["DOID:4"].xrefs  # namespace UMLS_CUI -> UMLS
    assert doid["DOID:7"].alt_ids == ["DOID:1", "DOID:2", "DOID:5", "DOID:71", "DOID:72", "DOID:8"]
    assert not any(x.startswith("UMLS_CUI:") for c in concepts for x in c.xrefs)
    assert sum(x.startswith("UMLS:") for c in concepts for x in c.xrefs) == 6930  # SOURCE.txt: 6,930


# --- MeSH TSV ------------------------------------------------------------------------------------


def test_mesh_synthetic(tmp_path):
    desc = write(
        tmp_path,
        "mesh_desc.tsv",
        "D000006\tAbdomen, Acute\tAcute Abdomen|Acute Abdomens\tC23.888.592|C23.888.821\t\n"
        "D000001\tCalcimycin\t\tD02.355|D03.633\t\n"
        "D000007\tOnly three\tcolumns\n",
    )
    with pytest.raises(VocabularyFormatError, match=r"mesh_desc.tsv, line 3: expected 4 to 5 tab-separated columns"):
        list(read_mesh_descriptors(desc))
    concepts, messages = read_with_warnings(read_mesh_descriptors, desc, trees=["C"])
    assert [c.id for c in concepts] == ["D000006"]
    assert concepts[0].types == ["C23.888.592", "C23.888.821", "C"]  # tree numbers, then their category
    assert concepts[0].sources == ["MSH"]
    assert concepts[0].synonyms == ["Acute Abdomen", "Acute Abdomens"]
    assert "skipped 1 " in messages[0]
    with pytest.warns(VocabularyWarning, match="line 3"):
        assert [c.id for c in read_mesh_descriptors(desc, trees=["D03"], strict=False)] == ["D000001"]

    supp = write(
        tmp_path,
        "mesh_supp.tsv",
        'C000002\tbevonium\tpiperidinium benzilate\tD001561\n'
        'C483025\tAckr1 protein mouse\t"Dfy protein, mouse|a\tb|FY protein, mouse"\tD004375,D011956\n',
    )
    scr = by_id(read_mesh_supplementary(supp))
    assert scr["C000002"].xrefs == ["MESH:D001561"]
    assert scr["C483025"].synonyms == ["Dfy protein, mouse", "a\tb", "FY protein, mouse"]
    assert scr["C483025"].xrefs == ["MESH:D004375", "MESH:D011956"]


def test_real_mesh_descriptors():
    path = shared_file("mesh-2024", "mesh_id_label_mappings.tsv")
    diseases = list(read_mesh_descriptors(path, trees=["C"]))
    assert len(diseases) == 5032  # SOURCE.txt: 5,032 descriptors with a C-tree number
    assert all(any(t.startswith("C") for t in c.types) for c in diseases)
    everything = list(read_mesh_descriptors(path))
    assert len(everything) == 30764
    assert sum(any(t.startswith("D") for t in c.types) for c in everything) == 10541
    # SOURCE.txt: 137,409 descriptor synonyms, counted raw. Concept drops repeats: D005175, D006319 and
    # D008872 each list one entry term twice, so the concepts hold 137,406.
    assert sum(len(c.synonyms) for c in everything) == 137409 - 3


def test_real_mesh_supplementary_quoted_tab_row():
    count = synonyms = 0
    ackr1 = None
    for concept in read_mesh_supplementary(shared_file("mesh-2024", "mesh_supp_id_label_mappings.tsv")):
        count += 1
        synonyms += len(concept.synonyms)
        if concept.id == "C483025":
            ackr1 = concept
    assert count == 323304
    assert ackr1 is not None
    assert ackr1.name == "Ackr1 protein mouse"
    assert ackr1.xrefs == ["MESH:D004375", "MESH:D011956"]
    assert "FY protein, mouse" in ackr1.synonyms and len(ackr1.synonyms) == 12
    # SOURCE.txt says 292,493 SCR synonyms, but that figure is what a naive split("\t") gives: it cuts the
    # quoted-tab row (C483025) after 2 of its 12 synonyms. Parsed as CSV the file has 292,503.
    assert synonyms == 292503


# --- dispatch ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        ("hp.obo", "obo"),
        ("mondo.json", "obo-json"),
        ("MRCONSO.RRF", "umls"),
        ("mesh_supp_id_label_mappings.tsv", "mesh-supp"),
        ("mesh_id_label_mappings.tsv", "mesh"),
        ("medic_06Jul2012.txt", "dictionary"),
        ("train_dictionary.txt", "dictionary"),
    ],
)
def test_guess_format(name, expected):
    assert guess_format(Path("/some/dir") / name) == expected


def test_read_vocabulary_auto_picks_the_reader(tmp_path):
    obo = write(tmp_path, "x.obo", OBO_TEXT)
    assert [c.id for c in read_vocabulary(obo, "auto")] == ["TO:0000001", "TO:0000003"]
    rrf = write(tmp_path, "concepts.txt", conso("C1", "Fever", ts="P", ispref="Y"))  # content, not name, says umls
    sty = write(tmp_path, "MRSTY.RRF", "C1|T184|x|Sign or Symptom|AT1|256|")
    assert read_vocabulary(rrf, "auto", mrsty=str(sty)).__next__().types == ["T184"]
    json_path = write(tmp_path, "doid.json", json.dumps([{"id": "DOID:4", "name": "disease", "namespace": "doid"}]))
    assert [c.id for c in read_vocabulary(json_path, "auto", strict=True)] == ["DOID:4"]
    tsv = write(tmp_path, "mesh_supp_x.tsv", "C000002\tbevonium\t\tD001561\n")
    assert next(read_vocabulary(tsv, "auto")).xrefs == ["MESH:D001561"]
    dictionary = write(tmp_path, "vocab.txt", "145250||Hyperkalemic periodic paralysis\n")
    assert next(read_vocabulary(dictionary, "auto")).id == "OMIM:145250"
    as_medic = [c.to_dict() for c in read_vocabulary(dictionary, "medic")]
    assert as_medic == [c.to_dict() for c in read_dictionary(dictionary)]


def test_read_vocabulary_rejects_unknown_format_and_options(tmp_path):
    path = write(tmp_path, "vocab.txt", "D1||a\n")
    with pytest.raises(SapbertError) as info:
        read_vocabulary(path, "csv")
    assert "'csv'" in str(info.value) and "obo-json" in str(info.value) and "mesh-supp" in str(info.value)
    with pytest.raises(SapbertError, match="'trees'.*dictionary"):
        read_vocabulary(path, "dictionary", trees=["C"])
    with pytest.raises(SapbertError, match="mrsty"):
        read_vocabulary(path, "dictionary", mrsty="MRSTY.RRF")


# --- format detection by content ---------------------------------------------------------------------

from spacy_sapbert.readers import FormatDetectionError, detect_format, vocabulary_specs  # noqa: E402

VOCABULARY_FORMAT_LIST = "dictionary, medic, umls, obo, obo-json, mesh, mesh-supp, scispacy"


@pytest.mark.parametrize(
    "parts, expected",
    [
        (("ontologies", "hp.obo"), "obo"),
        (("ontologies", "mondo.json"), "obo-json"),
        (("ontologies", "doid.json"), "obo-json"),
        (("umls-rrf-samples", "MRCONSO.RRF"), "umls"),
        (("medic", "medic_06Jul2012.txt"), "medic"),
        (("medic", "ncbi-spell-check.txt"), "dictionary"),
        (("mesh-2024", "mesh_id_label_mappings.tsv"), "mesh"),
        (("mesh-2024", "mesh_supp_id_label_mappings.tsv"), "mesh-supp"),
    ],
)
def test_detect_format_of_real_files(parts, expected):
    assert detect_format(shared_file(*parts)) == expected


@pytest.mark.parametrize(
    "parts, expected",
    [
        (("ontologies", "hp.obo"), "obo"),
        (("ontologies", "doid.json"), "obo-json"),
        (("umls-rrf-samples", "MRCONSO.RRF"), "umls"),
        (("mesh-2024", "mesh_id_label_mappings.tsv"), "mesh"),
    ],
)
def test_detect_format_ignores_a_misleading_name(tmp_path, parts, expected):
    source = shared_file(*parts)
    with open(source, "rb") as handle:
        head = handle.read(200_000)
    if expected != "obo-json":  # JSON cut in the middle is still told by its start
        head = head[: head.rindex(b"\n") + 1]
    renamed = tmp_path / "vocabulary.txt"  # the old name-based guess said "dictionary" for this
    renamed.write_bytes(head)
    assert detect_format(renamed) == expected


def test_renamed_mrconso_is_read_as_umls_not_as_a_dictionary(tmp_path):
    renamed = tmp_path / "umls_subset.txt"
    renamed.write_bytes(shared_file("umls-rrf-samples", "MRCONSO.RRF").read_bytes())
    concepts = list(read_vocabulary(renamed, "auto"))
    assert [c.id for c in concepts] == ["C0000005", "C0000039"]
    assert concepts[0].names == ["(131)I-Macroaggregated Albumin", "(131)I-MAA"]
    # the same with a BOM, CRLF line ends and a name that suggests a dictionary
    crlf = tmp_path / "dictionary.txt"
    crlf.write_bytes(b"\xef\xbb\xbf" + renamed.read_bytes().replace(b"\n", b"\r\n"))
    assert [c.to_dict() for c in read_vocabulary(crlf, "auto")] == [c.to_dict() for c in concepts]
    assert [fmt for _, fmt, _ in vocabulary_specs([renamed, crlf])] == ["umls", "umls"]


@pytest.mark.parametrize(
    "parts, seen",
    [
        (("umls-rrf-samples", "MRSTY.RRF"), "UMLS RRF file other than MRCONSO"),
        (("umls-rrf-samples", "MRFILES.RRF"), "no line fits a known format"),
        (("ncbi-disease", "NCBItestset_corpus.txt"), "PubTator corpus"),
        (("bc5cdr", "CDR_TrainingSet.PubTator.txt"), "PubTator corpus"),
        (("biosyn-concept", "nlm-chem_dev.concept"), "BioSyn .concept"),
        (("xl-bel", "xlbel_v1.0", "en_1k_test_query_with_context.txt"), "XL-BEL query file with context"),
        (("medmentions-sample", "corpus_pubtator_pmids_dev.txt"), "no line fits a known format"),
    ],
)
def test_detect_format_refuses_what_is_not_a_vocabulary(parts, seen):
    path = shared_file(*parts)
    with pytest.raises(FormatDetectionError) as info:
        detect_format(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and seen in message
    option = f"--format (--vocab-format), one of: {VOCABULARY_FORMAT_LIST}"
    if "no line fits" in seen:
        expected = f"pass it with {option}"
    else:  # recognized as another kind of file: the file is the likely mistake, not a missing --format
        expected = f"give a vocabulary file here (if it is one after all, pass {option})"
    assert message.endswith(expected)
    with pytest.raises(SapbertError, match=re.escape(expected)):
        read_vocabulary(path, "auto")
    with pytest.raises(SapbertError, match=re.escape(expected)):
        vocabulary_specs([path])


@pytest.mark.parametrize(
    "content, seen",
    [
        (b"", "no non-blank line"),
        (b"\n  \n", "no non-blank line"),
        (b"just some words\nand more words\n", "no line fits"),
        (b'{"terms": []}', "JSON that is neither"),
        (b'["a", "b"]', "JSON that is neither"),
        (b"\xff\xfeD\x001\x00|\x00|\x00a\x00", "UTF-16 text; convert it to UTF-8"),
        (b"\x1f\x8b\x08\x00PK\x00\x00", "a binary file (it holds NUL bytes)"),
        (b"D1||a\nD2||b\njunk\njunk\njunk\njunk\njunk\n", "only 2 of the first 7 lines fit one format"),
    ],
)
def test_detect_format_refuses_with_one_line(tmp_path, content, seen):
    path = tmp_path / "unknown.dat"
    path.write_bytes(content)
    with pytest.raises(FormatDetectionError) as info:
        detect_format(path)
    assert "\n" not in str(info.value) and "unknown.dat" in str(info.value) and seen in str(info.value)


def test_detect_format_majority_and_name_tie_break(tmp_path):
    # one damaged line among real-looking ones does not change the answer
    path = write(tmp_path, "a.dat", conso("C0000001", "fever") + "\nbroken line\n" + conso("C0000002", "cough") + "\n")
    assert detect_format(path) == "umls"
    with pytest.raises(VocabularyFormatError, match="a.dat, line 2"):
        list(read_vocabulary(path, "auto"))  # and the reader names the damaged line
    # a descriptor row and an SCR row fit mesh and mesh-supp equally: the file name decides, or nothing does
    rows = "D000001\tCalcimycin\t\tD02.355\t\nC000002\tbevonium\t\tD001561\n"
    assert detect_format(write(tmp_path, "mesh_supp_2024.tsv", rows)) == "mesh-supp"
    assert detect_format(write(tmp_path, "mesh_2024.tsv", rows)) == "mesh"
    with pytest.raises(FormatDetectionError, match="fit mesh and mesh-supp equally"):
        detect_format(write(tmp_path, "rows.txt", rows))
    # an empty file: only the name can say
    assert detect_format(write(tmp_path, "empty.obo", "")) == "obo"
    # a BOM before JSON or OBO
    assert detect_format(write(tmp_path, "t.txt", '\ufeff[{"id": "X:1", "name": "x"}]')) == "obo-json"
    assert detect_format(write(tmp_path, "o.txt", "\ufeff! comment\n[Term]\nid: X:1\nname: x\n")) == "obo"
    assert [c.id for c in read_vocabulary(tmp_path / "t.txt", "auto")] == ["X:1"]


# --- wrong types in JSON -------------------------------------------------------------------------

GOOD_TERM = {"id": "0000004", "name": "adrenal insufficiency", "namespace": "mondo", "synonyms": ["hypoadrenalism"],
             "xrefs": [{"id": "C0001623", "namespace": "UMLS"}], "alt_ids": ["0000099"]}


@pytest.mark.parametrize(
    "change, where, problem",
    [
        ({"synonyms": "hypoadrenalism"}, "[1].synonyms", "expected an array, got string 'hypoadrenalism'"),
        ({"synonyms": 3}, "[1].synonyms", "expected an array, got number 3"),
        ({"synonyms": ["a", 7]}, "[1].synonyms[1]", "expected a string, got number 7"),
        ({"synonyms": [{"value": ["x"]}]}, "[1].synonyms[0].value", "expected a string, got array"),
        ({"id": 4}, "[1].id", "expected a string, got number 4"),
        ({"id": ""}, "[1]", "term without an 'id'"),
        ({"name": {"en": "x"}}, "[1].name", "expected a string, got object"),
        ({"name": ""}, "[1]", "term 0000005 without a 'name'"),
        ({"namespace": ["mondo"]}, "[1].namespace", "expected a string, got array"),
        ({"xrefs": {"id": "C1", "namespace": "UMLS"}}, "[1].xrefs", "expected an array, got object"),
        ({"xrefs": [{"id": 1, "namespace": "UMLS"}]}, "[1].xrefs[0].id", "expected a string, got number 1"),
        ({"xrefs": [{"namespace": "UMLS"}]}, "[1].xrefs[0]", "xref without an 'id' or a 'namespace'"),
        ({"xrefs": [5]}, "[1].xrefs[0]", "expected an object, got number 5"),
        ({"alt_ids": "0000099"}, "[1].alt_ids", "expected an array, got string '0000099'"),
        ({"alt_ids": [99]}, "[1].alt_ids[0]", "expected a string, got number 99"),
        ({"deprecated": "yes"}, "[1].deprecated", "expected true or false, got string 'yes'"),
    ],
)
def test_obo_json_wrong_types_name_the_json_path(tmp_path, change, where, problem):
    bad = {**GOOD_TERM, "id": "0000005", **change}
    path = write(tmp_path, "terms.json", json.dumps([GOOD_TERM, bad, {**GOOD_TERM, "id": "0000006"}]))
    with pytest.raises(VocabularyFormatError) as info:
        list(read_obo_graph_json(path))
    assert str(info.value) == f"{path}: {where}: {problem}"
    concepts, messages = read_with_warnings(read_obo_graph_json, path)
    assert [c.id for c in concepts] == ["MONDO:0000004", "MONDO:0000006"]
    assert len(messages) == 1 and "skipped 1 malformed term" in messages[0] and where in messages[0]


def test_obo_json_not_strict_counts_every_skipped_term(tmp_path):
    terms = [GOOD_TERM, {**GOOD_TERM, "id": 5}, "a string", {**GOOD_TERM, "id": "7", "synonyms": "x"}, {**GOOD_TERM, "id": "8"}, None]
    path = write(tmp_path, "terms.json", json.dumps(terms))
    concepts, messages = read_with_warnings(read_obo_graph_json, path)
    assert [c.id for c in concepts] == ["MONDO:0000004", "MONDO:8"]
    assert len(messages) == 1 and "skipped 4 malformed term(s)" in messages[0] and "[1].id" in messages[0]


def test_obo_json_top_level_and_encoding_errors(tmp_path):
    for content, problem in [
        (b'{"terms": []}', "got object without 'graphs'"),
        (b"42", "got number"),
        (b'{"graphs": {"nodes": []}}', "graphs: expected an array, got object"),
        (b'[\n {"id": "X:1",\n  "name": "caf\xe9"}]', "line 3: not valid UTF-8"),
        (b"[" * 100000, "not valid JSON"),
    ]:
        path = tmp_path / "x.json"
        path.write_bytes(content)
        for strict in (True, False):
            with pytest.raises(VocabularyFormatError, match=problem) as info:
                list(read_obo_graph_json(path, strict=strict))
            assert "\n" not in str(info.value) and "x.json" in str(info.value)


# --- OBO-graph JSON --------------------------------------------------------------------------------

OBO_NS = "http://www.geneontology.org/formats/oboInOwl#"
GRAPH = {
    "graphs": [{
        "id": "http://purl.obolibrary.org/obo/hp.json",
        "nodes": [
            {"id": "http://purl.obolibrary.org/obo/HP_0000002", "lbl": "Abnormality of body height", "type": "CLASS",
             "meta": {"synonyms": [{"pred": "hasExactSynonym", "val": "Abnormality of body height"},
                                   {"pred": "hasRelatedSynonym", "val": "Height abnormality"}],
                      "xrefs": [{"val": "UMLS:C4025901"}, {"val": "MSH:D001836"}],
                      "basicPropertyValues": [{"pred": OBO_NS + "hasOBONamespace", "val": "human_phenotype"},
                                              {"pred": OBO_NS + "hasAlternativeId", "val": "HP:0000001"}]}},
            {"id": "http://purl.obolibrary.org/obo/HP_0000003", "lbl": "Multicystic kidney dysplasia", "type": "CLASS"},
            {"id": "http://purl.obolibrary.org/obo/HP_0000004", "lbl": "obsolete thing", "type": "CLASS",
             "meta": {"deprecated": True}},
            {"id": "http://purl.obolibrary.org/obo/UBERON_0000001"},
            {"id": "http://purl.obolibrary.org/obo/BFO_0000050", "lbl": "part of", "type": "PROPERTY"},
        ],
        "edges": [],
    }]
}


def test_obo_graph_json_nodes(tmp_path):
    path = write(tmp_path, "hp-graph.json", json.dumps(GRAPH))
    concepts = list(read_obo_graph_json(path))
    assert [c.id for c in concepts] == ["HP:0000002", "HP:0000003"]  # no deprecated, reference or property node
    first = concepts[0]
    assert first.synonyms == ["Height abnormality"] and first.types == ["human_phenotype"]
    assert first.xrefs == ["UMLS:C4025901", "MESH:D001836"] and first.alt_ids == ["HP:0000001"]
    assert first.sources == ["HP"]
    assert "HP:0000004" in by_id(read_obo_graph_json(path, include_obsolete=True))
    assert detect_format(path) == "obo-json"


def test_synonym_scopes_keep_the_synonyms_that_name_the_term(tmp_path):
    """extract gave every synonym of an OBO term as its name: a BROAD "Kidney disease" of Nephropathy became a SAP
    positive of it (2,433 non-exact synonyms in hp.obo). Readers keep all unless told; extract keeps EXACT."""
    obo = write(tmp_path, "hp.obo", "format-version: 1.2\n\n[Term]\nid: HP:0000112\nname: Nephropathy\n"
                'synonym: "Kidney disease" BROAD []\nsynonym: "Renal disease" EXACT []\nsynonym: "kidney problem" EXACT layperson []\n'
                'synonym: "nephrosis" []\nnarrow_synonym: "Nephritis" []\n')
    assert read_obo(obo).__next__().synonyms == ["Kidney disease", "Renal disease", "kidney problem", "nephrosis", "Nephritis"]
    assert next(read_obo(obo, synonym_scopes=["EXACT"])).synonyms == ["Renal disease", "kidney problem"]
    assert next(read_obo(obo, synonym_scopes=["related", "NARROW"])).synonyms == ["nephrosis", "Nephritis"]  # no scope: RELATED
    graph = write(tmp_path, "hp-graph.json", json.dumps(GRAPH))
    assert next(read_obo_graph_json(graph, synonym_scopes=["EXACT"])).synonyms == []
    with pytest.raises(SapbertError, match="synonym scopes must be some of EXACT, NARROW, BROAD, RELATED, got WIDE"):
        next(read_obo(obo, synonym_scopes=["wide"]))
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["extract", str(obo), "-o", str(tmp_path / "exact.txt")])
    assert result.exit_code == 0 and (tmp_path / "exact.txt").read_text() == "HP:0000112||nephropathy|renal disease|kidney problem\n"
    result = runner.invoke(app, ["extract", str(obo), "-o", str(tmp_path / "all.txt"), "--synonym-scopes", "all"])
    assert result.exit_code == 0 and (tmp_path / "all.txt").read_text().count("|") == 7


@pytest.mark.parametrize(
    "node_change, where",
    [
        ({"meta": {"synonyms": "x"}}, "graphs[0].nodes[1].meta.synonyms: expected an array, got string"),
        ({"meta": {"synonyms": [{"val": 3}]}}, "graphs[0].nodes[1].meta.synonyms[0].val: expected a string, got number 3"),
        ({"meta": {"xrefs": ["UMLS:C1"]}}, "graphs[0].nodes[1].meta.xrefs[0]: expected an object, got string"),
        ({"meta": "x"}, "graphs[0].nodes[1].meta: expected an object, got string"),
        ({"lbl": 12}, "graphs[0].nodes[1].lbl: expected a string, got number 12"),
        ({"lbl": ""}, "graphs[0].nodes[1].lbl: empty label"),
        ({"id": ["HP:1"]}, "graphs[0].nodes[1].id: expected a string, got array"),
        ({"type": "KLASS"}, "graphs[0].nodes[1].type: expected CLASS, INDIVIDUAL or PROPERTY"),
        ({"meta": {"deprecated": "true"}}, "graphs[0].nodes[1].meta.deprecated: expected true or false"),
    ],
)
def test_obo_graph_json_wrong_types(tmp_path, node_change, where):
    graph = json.loads(json.dumps(GRAPH))
    graph["graphs"][0]["nodes"][1].update(node_change)
    path = write(tmp_path, "g.json", json.dumps(graph))
    with pytest.raises(VocabularyFormatError, match=re.escape(f"g.json: {where}")):
        list(read_obo_graph_json(path))
    concepts, messages = read_with_warnings(read_obo_graph_json, path)
    assert [c.id for c in concepts] == ["HP:0000002"]
    assert len(messages) == 1 and "skipped 1 malformed term" in messages[0]


def test_obo_graph_json_bad_graph_is_one_skip(tmp_path):
    graph = {"graphs": [GRAPH["graphs"][0], {"nodes": "none"}, 7]}
    path = write(tmp_path, "g.json", json.dumps(graph))
    with pytest.raises(VocabularyFormatError, match=r"graphs\[1\]\.nodes: expected an array"):
        list(read_obo_graph_json(path))
    concepts, messages = read_with_warnings(read_obo_graph_json, path)
    assert [c.id for c in concepts] == ["HP:0000002", "HP:0000003"]
    assert "skipped 2 malformed term" in messages[0]


# --- strictness of the line readers -----------------------------------------------------------------


def test_obo_empty_values_nameless_terms_and_broken_headers(tmp_path):
    text = (
        "format-version: 1.2\n\n"
        "[Term]\nid: X:1\nname: one\n\n"
        "[Term]\nid: X:2\nname:\n\n"           # empty name line: the line is malformed, the term lost (counted once)
        "[Term]\nid: X:3\n\n"                  # no name at all: the stanza is malformed
        "[Term\nid: X:4\nname: four\n\n"       # broken header: the whole stanza is skipped, counted once
        "[Term]\nid: X:5\nname: five\nis_obsolete: maybe\n\n"
        "[Term]\nid: X:6\nname: six\n"
    )
    path = write(tmp_path, "t.obo", text)
    with pytest.raises(VocabularyFormatError, match=r"t.obo, line 9: empty 'name'"):
        list(read_obo(path))
    concepts, messages = read_with_warnings(read_obo, path)
    assert [c.id for c in concepts] == ["X:1", "X:5", "X:6"]
    assert len(messages) == 1 and "skipped 4 " in messages[0]
    for broken, problem in [("[Term]\nid: X:3\n", "line 1: \\[Term\\] X:3 without a 'name'"),
                            ("[Term\nid: X:4\nname: four\n", "line 1: stanza header without"),
                            ("[Term]\nid:\nname: x\n", "line 2: empty 'id'"),
                            ("[Term]\nid: X:1\nname: x\nis_obsolete: maybe\n", "line 4: is_obsolete must be"),
                            ('[\n  {"id": "X:1"}\n]\n', "line 1: stanza header without '\\]'; a JSON file \\(OBO graphs\\) is read with --format obo-json")]:
        with pytest.raises(VocabularyFormatError, match=problem) as info:
            list(read_obo(write(tmp_path, "b.obo", broken)))
        assert "skipped" not in str(info.value)  # strict: nothing was skipped, the read stopped


def test_mesh_field_counts_and_unbalanced_quotes(tmp_path):
    path = write(
        tmp_path,
        "mesh_supp.tsv",
        "C000002\tbevonium\t\tD001561\n"
        'C000003\t"unbalanced\tname\t\tD000001\n'     # an open quote costs this line only
        "C000004\tfive\tcolumns\tD000002\textra\n"     # SCR rows have 4 columns
        "C000005\t\t\tD000003\n"                        # empty name
        "C000006\tkept\t\tD000004\n",
    )
    with pytest.raises(VocabularyFormatError, match=r"mesh_supp.tsv, line 2: not valid TSV"):
        list(read_mesh_supplementary(path))
    concepts, messages = read_with_warnings(read_mesh_supplementary, path)
    assert [c.id for c in concepts] == ["C000002", "C000006"]
    assert len(messages) == 1 and "skipped 3 " in messages[0] and "first at line 2" in messages[0]
    with pytest.raises(VocabularyFormatError, match=r"line 3: expected 4 tab-separated columns"):
        list(read_mesh_supplementary(write(tmp_path, "s.tsv", "C000002\tbevonium\t\tD001561\n" * 2 + "C1\tx\t\tD1\textra\n")))


def test_bom_at_the_start_of_any_line_is_ignored(tmp_path):
    # files concatenated with `cat` keep each part's byte-order mark
    path = write(tmp_path, "cat.txt", "\ufeffD1||a\n\ufeffD2||b\n")
    assert [c.id for c in read_dictionary(path)] == ["D1", "D2"]


LATIN1_CASES = [
    (read_dictionary, "D1||fever\nD2||Sj\u00f6gren syndrome\nD3||cough\n", ["D1", "D3"]),
    (read_mrconso, conso("C0000001", "fever") + "\n" + conso("C0000002", "Sj\u00f6gren") + "\n" + conso("C0000003", "cough") + "\n",
     ["C0000001", "C0000003"]),
    (read_obo, "[Term]\nid: X:1\nname: fever\nsynonym: \"Sj\u00f6gren\" EXACT []\n", ["X:1"]),
    (read_mesh_descriptors, "D000001\tfever\t\tC01\t\nD000002\tSj\u00f6gren\t\tC02\t\nD000003\tcough\t\tC03\t\n", ["D000001", "D000003"]),
]


@pytest.mark.parametrize("reader, text, kept", LATIN1_CASES, ids=lambda value: getattr(value, "__name__", ""))
def test_latin1_files_name_file_and_line(tmp_path, reader, text, kept):
    path = tmp_path / "latin1.txt"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(VocabularyFormatError) as info:
        list(reader(path))
    message = str(info.value)
    assert "latin1.txt, line " in message and "not valid UTF-8" in message and "\n" not in message
    concepts, messages = read_with_warnings(reader, path)
    assert [c.id for c in concepts] == kept
    assert len(messages) == 1 and "skipped 1 " in messages[0]


SCISPACY_KB = (
    '{"concept_id": "C0011849", "canonical_name": "Diabetes Mellitus", "aliases": ["DM", "diabetes"], '
    '"types": ["T047"], "definition": "A heterogeneous group of disorders."}\n'
    '{"concept_id": "C0018801", "canonical_name": "", "aliases": ["cardiac failure", "heart failure"], "types": []}\n'
    '\n'
    '{"concept_id": "C0011849", "canonical_name": "Diabetes Mellitus", "aliases": ["sugar diabetes"]}\n'
)


def test_scispacy_kb_lines_become_concepts_merged_by_id(tmp_path):
    from spacy_sapbert.readers import read_vocabularies, read_vocabulary, vocabulary_specs

    path = write(tmp_path, "umls_2022_ab_cat0129.jsonl", SCISPACY_KB)
    concepts = list(read_vocabulary(path, "scispacy"))
    assert [(c.id, c.name, c.synonyms, c.types) for c in concepts[:2]] == [
        ("C0011849", "Diabetes Mellitus", ["DM", "diabetes"], ["T047"]),
        ("C0018801", "cardiac failure", ["heart failure"], []),  # no canonical name: the first alias
    ]
    merged = {c.id: c for c in read_vocabularies(vocabulary_specs([path], "auto"))}
    assert merged["C0011849"].synonyms == ["DM", "diabetes", "sugar diabetes"]


def test_scispacy_kb_is_told_by_auto_from_its_content(tmp_path):
    assert detect_format(write(tmp_path, "kb.txt", SCISPACY_KB)) == "scispacy"
    assert detect_format(write(tmp_path, "graph.txt", '{"graphs": [{"nodes": []}]}\n')) == "obo-json"
    with pytest.raises(FormatDetectionError, match="scispaCy KB lines"):
        detect_format(write(tmp_path, "other.txt", '{"id": 1}\n{"id": 2}\n'))


@pytest.mark.parametrize(
    "line, problem",
    [
        ('{"canonical_name": "x"}', "no 'concept_id'"),
        ('{"concept_id": "C1", "canonical_name": "x", "aliases": "y"}', "'aliases' must be a list of strings"),
        ('{"concept_id": "C1", "canonical_name": "", "aliases": []}', "neither a canonical name nor aliases"),
        ('["C1", "x"]', "not an object"),
        ('{"concept_id": "C1", "canonical_name": "x"', "not a JSON object"),
    ],
)
def test_a_bad_scispacy_kb_line_is_an_error_naming_file_and_line(tmp_path, line, problem):
    from spacy_sapbert.readers import read_vocabulary

    path = write(tmp_path, "kb.jsonl", SCISPACY_KB.splitlines()[0] + "\n" + line + "\n")
    with pytest.raises(VocabularyFormatError, match=problem) as info:
        list(read_vocabulary(path, "scispacy"))
    assert "kb.jsonl" in str(info.value) and "line 2" in str(info.value)
    with pytest.warns(VocabularyWarning, match="skipped 1"):
        assert [c.id for c in read_vocabulary(path, "scispacy", strict=False)] == ["C0011849"]


def test_definitions_come_from_obo_obo_graph_scispacy_and_mrdef(tmp_path):
    from spacy_sapbert.readers import read_vocabulary
    from spacy_sapbert.readers.umls import read_mrdef

    obo = write(tmp_path, "t.obo", '[Term]\nid: HP:1\nname: Short stature\ndef: "A height below the \\"norm\\"." [PMID:1]\n')
    assert next(read_vocabulary(obo, "obo")).definition == 'A height below the "norm".'
    graph = {"graphs": [{"nodes": [{"id": "http://purl.obolibrary.org/obo/HP_1", "type": "CLASS", "lbl": "Short stature",
                                    "meta": {"definition": {"val": "A height below the norm."}}}]}]}
    assert next(read_vocabulary(write(tmp_path, "g.json", json.dumps(graph)), "obo-json")).definition == "A height below the norm."
    kb = write(tmp_path, "kb.jsonl", '{"concept_id": "C1", "canonical_name": "x", "definition": " An x. "}\n')
    assert next(read_vocabulary(kb, "scispacy")).definition == "An x."
    mrdef = write(tmp_path, "MRDEF.RRF", (
        "C1|A1|AT1||NCI|NCI's definition.|N||\n"
        "C1|A2|AT2||MSH|MeSH's definition.|N||\n"
        "C2|A3|AT3||MSH|Suppressed.|O||\n"
        "C3|A4|AT4||CSP|Only CSP.|N||\n"
    ))
    assert read_mrdef(mrdef) == {"C1": "NCI's definition.", "C3": "Only CSP."}
    assert read_mrdef(mrdef, sources=["MSH", "NCI"]) == {"C1": "MeSH's definition."}
    with pytest.raises(VocabularyFormatError, match="line 1"):
        read_mrdef(write(tmp_path, "BAD.RRF", "C1|A1|NCI|x|\n"))


def test_the_umls_reader_takes_definitions_from_the_real_mrdef_sample():
    from spacy_sapbert.readers import read_vocabulary

    folder = shared_file("umls-rrf-samples", "MRDEF.RRF").parent
    concepts = {c.id: c for c in read_vocabulary(folder / "MRCONSO.RRF", "umls", mrdef=str(folder / "MRDEF.RRF"), languages=None)}
    assert concepts["C0000039"].definition.startswith("Synthetic phospholipid used in liposomes")
    assert sum(1 for c in concepts.values() if c.definition) == 1


def test_a_file_with_cr_line_ends_is_an_error_and_a_stray_cr_a_bad_line(tmp_path):
    """Lines were split at \\n only: a file with old Mac (CR) line ends was one line, and an OBO or PubTator file
    read as one gave no concept or mention, without a word. Not strict, such a file is one skipped line, counted."""
    import warnings

    from spacy_sapbert.readers import read_obo, read_dictionary
    from spacy_sapbert.readers.corpora import read_pubtator

    obo = tmp_path / "hp.obo"
    obo.write_bytes(b"format-version: 1.2\r\r[Term]\rid: HP:0000001\rname: All\r")
    pubtator = tmp_path / "corpus.txt"
    pubtator.write_bytes(b"1|t|Hepatoma.\r1|a|x\r1\t0\t8\tHepatoma\tDisease\tD1\r\r")
    for read in (lambda: list(read_obo(obo)), lambda: list(read_pubtator(pubtator))):
        with pytest.raises(VocabularyFormatError, match=r", line 1: a carriage return \(\\r\) inside the line: the file has CR line ends"):
            read()
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"D1||heart failure\nD2||liver\rcancer\nD3||hepatoma\r\n")
    with pytest.raises(VocabularyFormatError, match=r"vocab.txt, line 2: a carriage return"):
        list(read_dictionary(vocab))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        concepts = list(read_dictionary(vocab, strict=False))
    assert [c.id for c in concepts] == ["D1", "D3"] and concepts[1].name == "hepatoma"
    assert any("skipped 1 malformed line" in str(w.message) for w in caught)


def test_a_mesh_file_read_as_the_other_kind_is_refused_not_misread(tmp_path):
    """A supplementary file read as descriptors took its mapped-to descriptors for tree numbers (types 'D001561'
    and 'D': kept by --mesh-trees D, dropped by C) and lost its xrefs, without a word."""
    from spacy_sapbert.readers import read_mesh_descriptors, read_mesh_supplementary

    supplementary = tmp_path / "supp.tsv"
    supplementary.write_text("C000002\tbevonium\tbevonium benzilate\tD001561\n", encoding="utf8")
    descriptors = tmp_path / "desc.tsv"
    descriptors.write_text("D000002\tTemefos\tTemephos\tD02.705.400.625.800\n", encoding="utf8")  # no taxon column
    with pytest.raises(VocabularyFormatError, match=r"supp.tsv, line 1: 'C000002' is not a MeSH descriptor id .* read as mesh-supp"):
        list(read_mesh_descriptors(supplementary))
    with pytest.raises(VocabularyFormatError, match=r"desc.tsv, line 1: 'D000002' is not a MeSH supplementary record id"):
        list(read_mesh_supplementary(descriptors))
    assert [c.types for c in read_mesh_descriptors(descriptors)] == [["D02.705.400.625.800", "D"]]
    assert [c.xrefs for c in read_mesh_supplementary(supplementary)] == [["MESH:D001561"]]
    descriptors.write_text("D000002\tTemefos\tTemephos\tD02.705|chemicals\t\n", encoding="utf8")
    with pytest.raises(VocabularyFormatError, match=r"'chemicals' is not a MeSH tree number"):
        list(read_mesh_descriptors(descriptors))


def test_a_second_name_or_def_in_one_obo_stanza_is_a_bad_line_not_a_replacement(tmp_path):
    """The second 'name' line of a stanza replaced the first (so did 'def' and 'namespace'), without a word."""
    obo = tmp_path / "hp.obo"
    obo.write_text(
        "format-version: 1.2\n\n[Term]\nid: HP:0000002\nname: Abnormality of body height\nname: Body height\n"
        "\n[Term]\nid: HP:0000003\nname: Multicystic kidney dysplasia\ndef: \"one\" []\ndef: \"two\" []\n",
        encoding="utf8",
    )
    with pytest.raises(VocabularyFormatError, match=r"hp.obo, line 6: second 'name' in one stanza"):
        list(read_obo(obo))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        concepts = list(read_obo(obo, strict=False))
    assert [(c.id, c.name, c.definition) for c in concepts] == [
        ("HP:0000002", "Abnormality of body height", ""), ("HP:0000003", "Multicystic kidney dysplasia", "one")
    ]
    assert any("skipped 2 malformed line" in str(w.message) for w in caught)


def test_an_rrf_row_without_its_last_bar_says_so():
    """'expected 18 ... fields ending in '|', got 18 items' read as a contradiction."""
    from spacy_sapbert.readers import MalformedLine
    from spacy_sapbert.readers.umls import MRCONSO_COLUMNS, split_rrf

    row = "|".join(["C0000005", "ENG", "P"] + [""] * (len(MRCONSO_COLUMNS) - 4) + ["256"])  # CVF, the last column, given
    assert len(split_rrf(row + "|", MRCONSO_COLUMNS)) == len(MRCONSO_COLUMNS)
    with pytest.raises(MalformedLine, match=rf"expected {len(MRCONSO_COLUMNS)} fields, each followed by '\|', got {len(MRCONSO_COLUMNS)} fields and no '\|' at the end"):
        split_rrf(row, MRCONSO_COLUMNS)
    with pytest.raises(MalformedLine, match=rf"got {len(MRCONSO_COLUMNS) - 1} fields$"):
        split_rrf(row.rsplit("|", 1)[0] + "|", MRCONSO_COLUMNS)


def test_a_concept_in_many_pieces_merges_as_concept_merged_does_and_leaves_the_pieces_alone():
    """KnowledgeBase and same_ids_merged extend one owned copy in place (a new `merged` concept per piece cost n^2
    for a CUI in n runs of an unsorted MRCONSO); the result is the left fold of Concept.merged, and no piece changes."""
    import copy
    import functools
    import random

    from spacy_sapbert.kb import KnowledgeBase
    from spacy_sapbert.training.merge import same_ids_merged

    rng = random.Random(7)
    words = ["fever", "Fever", "pyrexia", "", "ague", "heat", "chill"]

    def piece(concept_id):
        pick = lambda pool, n: [rng.choice(pool) for _ in range(n)]  # noqa: E731
        return Concept(
            concept_id, rng.choice(words), pick(words, 3), pick(["T1", "T2", ""], 2), pick(["UMLS:C1", "MESH:D1"], 1),
            pick([concept_id, "A1", "A2"], 2), rng.choice(["", "", "a definition", "another"]), pick(["MSH", "HPO"], 1),
        )

    for _ in range(200):
        pieces = [piece(rng.choice(["C1", "C2"])) for _ in range(rng.randint(1, 6))]
        before = copy.deepcopy(pieces)
        expected = {}
        for concept in before:
            expected[concept.id] = expected[concept.id].merged(concept) if concept.id in expected else concept
        assert [c.to_dict() for c in KnowledgeBase(pieces)] == [c.to_dict() for c in expected.values()]
        assert [c.to_dict() for c in pieces] == [c.to_dict() for c in before]
        spelled = [Concept(("MESH:" if i % 2 else "") + "D1", c.name, c.synonyms, c.types) for i, c in enumerate(before)]
        fold = functools.reduce(lambda a, b: a.merged(b), copy.deepcopy(spelled))
        assert [c.to_dict() for c in same_ids_merged(spelled)] == [fold.to_dict()]
