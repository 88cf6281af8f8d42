"""Vocabulary readers: tiny fixture files written to tmp_path, plus the real files under ../shared/data."""
from __future__ import annotations

import json
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
        "C||Diseases\r\n",
    )
    concepts = by_id(read_dictionary(path))
    assert list(concepts) == ["OMIM:270400", "C567755", "MESH:D000001", "C"]
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
    assert concepts["TO:0000003"].types == ["other_ns"] and concepts["TO:0000003"].xrefs == ["MESH:C000002"]
    with_obsolete = by_id(read_obo(write(tmp_path, "test.obo", OBO_TEXT), include_obsolete=True))
    assert "TO:0000002" in with_obsolete


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
    with pytest.raises(VocabularyFormatError, match="terms.json: term 5: term without an 'id'"):
        list(read_obo_graph_json(path))
    concepts, messages = read_with_warnings(read_obo_graph_json, path)
    assert [c.id for c in concepts] == ["MONDO:0000004"]
    assert concepts[0].xrefs == ["UMLS:C0001623", "MESH:D000309", "UMLS:C0405580", "MESH:D1"]
    assert concepts[0].alt_ids == ["MONDO:0000099", "MONDO:0000098"]
    assert "skipped 1 malformed term" in messages[0]
    with pytest.warns(VocabularyWarning, match="skipped 1 malformed term"):
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
    with pytest.raises(VocabularyFormatError, match=r"mesh_desc.tsv, line 3: expected at least 4"):
        list(read_mesh_descriptors(desc))
    concepts, messages = read_with_warnings(read_mesh_descriptors, desc, trees=["C"])
    assert [c.id for c in concepts] == ["D000006"]
    assert concepts[0].types == ["C23.888.592", "C23.888.821"]
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
    rrf = write(tmp_path, "MRCONSO.RRF", conso("C1", "Fever", ts="P", ispref="Y"))
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
