"""Merging open vocabularies into SAP classes by shared ids, with the one-concept-per-namespace cut."""
from __future__ import annotations

from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.kb import Concept
from spacy_sapbert.training.merge import id_namespace, merge_by_xrefs


def test_concepts_sharing_ids_become_one_class_named_after_the_first_file():
    concepts = [
        Concept("D003920", "Diabetes Mellitus", ["DM"], alt_ids=["OMIM:222100"]),                     # MEDIC
        Concept("MONDO:0005015", "diabetes mellitus", ["diabetes"], xrefs=["MESH:D003920", "UMLS:C0011849", "ICD10:E10"]),
        Concept("HP:0000819", "Diabetes mellitus", ["Diabetes"], xrefs=["UMLS:C0011849"]),
        Concept("DOID:9351", "diabetes mellitus", xrefs=["UMLS_CUI:C0011849", "NCI:C2985"]),
        Concept("HP:0000001", "All"),
        Concept("MONDO:0000001", "disease", xrefs=["ICD10:E10"]),  # shares only a loose ICD code: not joined
    ]
    merged, report = merge_by_xrefs(concepts)
    first = merged[0]
    assert first.id == "D003920" and first.name == "Diabetes Mellitus"
    assert set(first.xrefs) >= {"MONDO:0005015", "HP:0000819", "DOID:9351"}
    assert first.synonyms[:3] == ["DM", "diabetes mellitus", "diabetes"]
    assert [c.id for c in merged] == ["D003920", "HP:0000001", "MONDO:0000001"]
    assert (report.concepts, report.classes, report.joins, report.refused) == (6, 3, 3, 0)
    assert report.class_sizes == {1: 2, 4: 1} and report.largest[:2] == ("D003920", 4)


def test_a_loose_cross_reference_is_refused_and_specific_ids_are_joined_first():
    concepts = [
        Concept("D000001", "a disease"),
        Concept("D000002", "b disease"),
        Concept("MONDO:1", "a or b", xrefs=["MESH:D000001", "MESH:D000002"]),  # a grouping term pointing at both
        Concept("MONDO:2", "b disorder", xrefs=["MESH:D000002"]),
    ]
    merged, report = merge_by_xrefs(concepts)
    classes = {c.id: {c.id, *c.xrefs} & {"D000001", "D000002", "MONDO:1", "MONDO:2"} for c in merged}
    assert classes == {"D000001": {"D000001", "MONDO:1"}, "D000002": {"D000002", "MONDO:2"}}
    assert report.refused == 1 and report.refused_examples == [("D000002", "D000002", "D000001")]
    # a chain D0 - MONDO:0 - D1 - MONDO:1 - ... - D5: D0 and D5 are taken first (two holders each), then
    # each Di joins the first MONDO term that has no MeSH id yet; D4 finds none: 5 pairs, D4 alone, 5 refusals
    chain = [Concept(f"MONDO:{i}", f"t{i}", xrefs=[f"MESH:D00000{i}", f"MESH:D00000{i + 1}"]) for i in range(5)]
    chain += [Concept(f"D00000{i}", f"m{i}") for i in range(6)]
    _, report = merge_by_xrefs(chain)
    assert report.class_sizes == {1: 1, 2: 5} and report.refused == 5


def test_id_namespaces():
    assert [id_namespace(i) for i in ("C0011849", "C000002", "D000095662", "OMIM:1", "HP:0000001", "x")] == [
        "UMLS", "MESH", "MESH", "OMIM", "HP", ""]


def test_extract_merge_xrefs(tmp_path):
    (tmp_path / "medic.txt").write_text("D1||Heart failure|cardiac failure\nD2||Hepatoma\n", encoding="utf8")
    (tmp_path / "hp.obo").write_text(
        "format-version: 1.2\n\n[Term]\nid: HP:0001635\nname: Congestive heart failure\nxref: MSH:D1\n", encoding="utf8")
    runner = CliRunner()
    result = runner.invoke(app, ["extract", str(tmp_path / "medic.txt"), str(tmp_path / "hp.obo"), "-o", str(tmp_path / "syn.txt"),
                                 "--merge-xrefs"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "syn.txt").read_text() == "D1||heart failure|cardiac failure|congestive heart failure\nD2||hepatoma\n"
    assert "3 concepts -> 2 classes (1 joins, 0 refused" in result.output
    result = runner.invoke(app, ["extract", "--mrconso", str(tmp_path / "x.RRF"), "-o", str(tmp_path / "u.txt"), "--merge-xrefs"])
    assert result.exit_code == 1 and "--merge-xrefs goes with vocabulary files" in result.output


def test_extract_joins_a_concept_to_the_one_its_alternative_id_names(tmp_path):
    """Without --merge-xrefs, MEDIC's OMIM:211980 (alternative id D008175) and MeSH's D008175 were two classes
    holding the same names, so SAP trained "lung neoplasms" away from itself; 213 such pairs in the project's
    MEDIC + MeSH C and D. An id spelled MESH:D... is the same id."""
    (tmp_path / "medic.txt").write_text(
        "OMIM:211980|D008175||Lung Neoplasms|Lung cancer\nMESH:D000006||Abdomen, Acute\n", encoding="utf8")
    (tmp_path / "mesh_id_label_mappings.tsv").write_text(
        "D008175\tLung Neoplasms\tNeoplasm, Lung\tC04.588.894.797.520\t\nD000006\tAbdomen, Acute\tAcute Abdomen\tC23.888.592.612.054.200\t\n",
        encoding="utf8")
    result = CliRunner().invoke(app, ["extract", str(tmp_path / "medic.txt"), str(tmp_path / "mesh_id_label_mappings.tsv"), "-o", str(tmp_path / "syn.txt")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "syn.txt").read_text() == (
        "OMIM:211980||lung neoplasms|lung cancer|neoplasm, lung\nD000006||abdomen, acute|acute abdomen\n")  # read bare
    # MESH:D000006 and D000006 are one concept as read; OMIM:211980 joins D008175 by its alternative id
    assert "merged by ids and alternative ids: 3 concepts -> 2 classes (1 joins" in result.output
