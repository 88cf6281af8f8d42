import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app

runner = CliRunner()


@pytest.mark.parametrize("command", ["build-index", "link", "demo"])
def test_every_command_has_help(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output and ("--pipeline" in result.output or "--model" in result.output)


def test_every_registered_command_answers_help():
    names = [command.name for command in app.registered_commands]
    assert {"build-index", "link", "demo", "evaluate", "assemble", "add-memory", "extract", "pairs", "train", "train-dhns"} <= set(names)
    for name in names:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output, name


def test_module_entry_lists_the_commands():
    out = subprocess.run([sys.executable, "-m", "spacy_sapbert", "--help"], capture_output=True, text=True, check=True)
    for command in ("build-index", "link", "demo"):
        assert command in out.stdout


@pytest.fixture
def built_pipeline(tmp_path, tiny_bert):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "D1||Heart failure|cardiac failure\nD2||Liver cancer|hepatoma\nOMIM:3||Kidney disease|nephropathy\n",
        encoding="utf8",
    )
    result = runner.invoke(
        app, ["build-index", str(vocab), str(tmp_path / "pipe"), "--model", tiny_bert, "--label", "DISEASE"]
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "pipe"


def test_build_index_then_link_from_stdin_gives_json_lines(built_pipeline):
    text = "Hepatoma with cardiac failure.\r\n\r\nNo finding here.\n"  # output line N is input line N, blank ones too
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline)], input=text)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [r["text"] for r in rows] == ["Hepatoma with cardiac failure.", "", "No finding here."]
    assert rows[1]["ents"] == []
    rows = [rows[0], rows[2]]
    ents = rows[0]["ents"]
    assert [(e["text"], e["label"], e["kb_id"], e["name"]) for e in ents] == [
        ("Hepatoma", "DISEASE", "D2", "Liver cancer"),
        ("cardiac failure", "DISEASE", "D1", "Heart failure"),
    ]
    assert ents[0]["score"] == pytest.approx(1.0, abs=1e-3) and ents[0]["candidates"][0][0] == "D2"
    assert rows[1]["ents"] == []


def test_link_reads_a_file(built_pipeline, tmp_path):
    doc = tmp_path / "in.txt"
    doc.write_text("nephropathy\n", encoding="utf8")
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline), "--file", str(doc)])
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert row["ents"][0]["kb_id"] == "OMIM:3"


def test_link_loads_an_installed_pipeline_package_by_name(built_pipeline, tmp_path, monkeypatch):
    """--pipeline NAME reached spacy.load as Path("NAME"), which spaCy reads as a folder only: an installed package
    (a wheel of `spacy package`) could not be named (found by an audit)."""
    import spacy

    loaded = spacy.load(built_pipeline)
    asked = []
    monkeypatch.setattr(spacy, "load", lambda name, *args, **kwargs: asked.append(name) or loaded)
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    result = runner.invoke(app, ["link", "nephropathy", "--pipeline", "en_sapbert_medic"])
    assert result.exit_code == 0, result.output
    assert asked == ["en_sapbert_medic"] and isinstance(asked[0], str)
    assert json.loads(result.stdout.splitlines()[-1])["ents"][0]["kb_id"] == "OMIM:3"


def test_build_index_reports_a_malformed_vocabulary_line(tmp_path, tiny_bert):
    vocab = tmp_path / "bad.txt"
    vocab.write_text("D1||Heart failure\nthis line has no separator\n", encoding="utf8")
    result = runner.invoke(app, ["build-index", str(vocab), str(tmp_path / "pipe"), "--model", tiny_bert])
    assert result.exit_code == 1
    [line] = [l for l in result.output.splitlines() if l.startswith("error:")]
    assert "bad.txt" in line and "line 2" in line
    assert not (tmp_path / "pipe").exists()


def test_a_max_length_beyond_the_models_positions_is_said_before_the_vocabulary_or_pairs_are_read(tmp_path, tiny_bert):
    bad = tmp_path / "bad.txt"  # a malformed line: read first, it would be the error
    bad.write_text("D1||Heart failure\nthis line has no separator\n", encoding="utf8")
    for args in (["build-index", str(bad), str(tmp_path / "pipe"), "--model", tiny_bert, "--max-length", "129"],
                 ["train", str(bad), "--model", tiny_bert, "--output", str(tmp_path / "run"), "--max-length", "129"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and "max_length=129 is more word pieces than" in error_line(result) and "(128 positions)" in error_line(result), args
    assert not (tmp_path / "pipe").exists() and not (tmp_path / "run").exists()


def test_add_memory_stores_corpus_mentions_and_settings_in_the_pipeline(built_pipeline, tmp_path):
    import spacy

    corpus = tmp_path / "train.txt"
    corpus.write_text(
        "7|t|Renal trouble (RT) again.\n7|a|Liver mass seen; RT persists.\n"
        "7\t0\t13\tRenal trouble\tDisease\tOMIM:3\n7\t15\t17\tRT\tDisease\tOMIM:3\n"
        "7\t26\t36\tLiver mass\tDisease\tD2\n7\t26\t36\tLiver mass\tChemical\tD1\n\n",
        encoding="utf8",
    )
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"memory_k": 1, "memory_weight": 0.7}), encoding="utf8")  # srsly reads 0.7000000000000001
    args = ["add-memory", str(built_pipeline), str(corpus), "--label", "Disease", "--output", str(tmp_path / "out"), "--settings", str(settings)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    # an evaluate report that chose settings under biosyn only: a pipeline's index holds vocabulary names, as strict's
    report = tmp_path / "biosyn.json"
    report.write_text(json.dumps({"memory": {"settings": {"memory_k": 2}, "settings_by_protocol": {"biosyn": {"memory_k": 2}}}}), encoding="utf8")
    refused = runner.invoke(app, ["add-memory", str(built_pipeline), str(corpus), "--output", str(tmp_path / "b"), "--settings", str(report)])
    assert refused.exit_code == 1 and "chose memory settings under ['biosyn'] only, not under strict" in refused.output
    nlp = spacy.load(tmp_path / "out")
    linker = nlp.get_pipe("sapbert_linker")
    # no abbreviation detector in this pipeline: the linker searches "rt" as it is, so the memory holds "rt"
    assert sorted(zip(linker.memory.texts, linker.memory.ids)) == [("liver mass", "D2"), ("renal trouble", "OMIM:3"), ("rt", "OMIM:3")]
    assert nlp.config["components"]["sapbert_linker"]["memory_weight"] == 0.7
    assert linker.memory_settings.memory_k == 1
    doc = nlp.make_doc("liver mass")
    doc.ents = [doc.char_span(0, 10, label="DISEASE")]
    assert linker(doc).ents[0].kb_id_ == "D2"

    nlp = spacy.load(built_pipeline)
    nlp.add_pipe("sapbert_abbreviations", first=True)
    nlp.to_disk(tmp_path / "with-abbreviations")
    result = runner.invoke(app, ["add-memory", str(tmp_path / "with-abbreviations"), str(corpus), "--label", "Disease", "--output", str(tmp_path / "out2")])
    assert result.exit_code == 0, result.output
    memory = spacy.load(tmp_path / "out2").get_pipe("sapbert_linker").memory
    assert sorted(zip(memory.texts, memory.ids)) == [("liver mass", "D2"), ("renal trouble", "OMIM:3")]  # "RT" as its long form

    result = runner.invoke(app, ["add-memory", str(built_pipeline), str(corpus), "--label", "Gene", "--output", str(tmp_path / "out3")])
    assert result.exit_code != 0 and "'Chemical', 'Disease'" in result.output


def test_build_index_writes_no_machine_path_of_the_vocabulary_into_the_config(built_pipeline, tmp_path):
    config = (built_pipeline / "config.cfg").read_text(encoding="utf8")
    assert str(tmp_path) not in config and "vocab.txt" not in config
    assert "vocabulary" not in config


@pytest.fixture
def two_linker_pipeline(tmp_path, tiny_bert):
    """A saved pipeline: an entity ruler for Disease and Chemical names, then one linker per label."""
    import spacy

    from spacy_sapbert.kb import Concept

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"})
    ruler.add_patterns([{"label": "Disease", "pattern": "hepatoma"}, {"label": "Chemical", "pattern": "advil"}])
    vocabularies = {
        "Disease": [Concept("D1", "Heart failure"), Concept("D2", "Liver cancer", ["hepatoma"])],
        "Chemical": [Concept("C1", "Aspirin"), Concept("C2", "Ibuprofen", ["advil"])],
    }
    for label, concepts in vocabularies.items():
        linker = nlp.add_pipe("sapbert_linker", name=f"{label.lower()}_linker", config={"model": tiny_bert, "labels": [label]})
        linker.initialize(vocabulary=concepts)
    nlp.to_disk(tmp_path / "two")
    return tmp_path / "two"


def error_line(result) -> str:
    [line] = [l for l in result.output.splitlines() if l.startswith("error:")]
    return line


def test_link_names_each_id_from_the_linker_of_its_label(two_linker_pipeline):
    result = runner.invoke(app, ["link", "Hepatoma, then Advil.", "--pipeline", str(two_linker_pipeline)])
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(e["text"], e["kb_id"], e["name"]) for e in row["ents"]] == [("Hepatoma", "D2", "Liver cancer"), ("Advil", "C2", "Ibuprofen")]


def test_gold_short_forms_are_linked_and_remembered_though_the_detector_labels_short_forms(tmp_path, tiny_bert):
    """With label_short_forms (as assemble and the offline default set it), the detector dropped a gold "RT" whose
    long form is written but not annotated: add-memory left it out, and choose-pipeline and add-reranker's weight
    tuning, which link gold mentions through the pipeline, scored it a miss."""
    import spacy

    from spacy_sapbert.evaluation import evaluate_end_to_end
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline
    from spacy_sapbert.readers.corpora import read_pubtator

    nlp = build_pipeline([Concept("OMIM:3", "Renal trouble"), Concept("D2", "Liver mass")], tiny_bert, label=None)
    nlp.add_pipe("sapbert_abbreviations", before="sapbert_linker", config={"label_short_forms": True})
    nlp.to_disk(tmp_path / "pipe")
    corpus = tmp_path / "train.txt"
    corpus.write_text("7|t|Renal trouble (RT) again.\n7|a|Liver mass.\n7\t15\t17\tRT\tDisease\tOMIM:3\n\n", encoding="utf8")
    gold = evaluate_end_to_end(nlp, list(read_pubtator(corpus)), gold_mentions=True)
    assert (gold["tp"], gold["fn"]) == (1, 0)
    assert nlp.get_pipe("sapbert_abbreviations").label_short_forms  # as it was
    result = runner.invoke(app, ["add-memory", str(tmp_path / "pipe"), str(corpus), "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    memory = spacy.load(tmp_path / "out").get_pipe("sapbert_linker").memory
    assert list(zip(memory.texts, memory.ids)) == [("renal trouble", "OMIM:3")]


def test_add_memory_labels_mentions_as_the_ner_does_and_refuses_an_empty_memory(tmp_path, tiny_bert):
    """A linker restricted to the NER's label ("Disease") took none of NCBI-disease's SpecificDisease mentions, and
    add-memory saved the pipeline with an empty memory without a word."""
    import spacy

    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline

    corpus = tmp_path / "train.txt"
    corpus.write_text("7|t|Renal trouble.\n7|a|x\n7\t0\t13\tRenal trouble\tSpecificDisease\tOMIM:3\n\n", encoding="utf8")
    for labels, out in ((["Disease"], "disease"), (["Chemical"], "chemical")):
        nlp = build_pipeline([Concept("OMIM:3", "Kidney disease")], tiny_bert, label=None, linker_config={"labels": labels})
        nlp.to_disk(tmp_path / f"pipe-{out}")
        result = runner.invoke(app, ["add-memory", str(tmp_path / f"pipe-{out}"), str(corpus), "--output", str(tmp_path / out)])
        if labels == ["Disease"]:
            assert result.exit_code == 0, result.output
            memory = spacy.load(tmp_path / out).get_pipe("sapbert_linker").memory
            assert list(zip(memory.texts, memory.ids)) == [("renal trouble", "OMIM:3")]
        else:
            assert result.exit_code == 1 and "went into the memory (sapbert_linker links the labels ['Chemical']" in result.output
            assert not (tmp_path / out).exists()


def test_demo_and_add_memory_need_component_when_a_pipeline_has_two_linkers(two_linker_pipeline, tmp_path, monkeypatch):
    import spacy

    from spacy_sapbert.linker import SapbertLinker

    result = runner.invoke(app, ["demo", "--pipeline", str(two_linker_pipeline), "--mention", "advil"])
    assert result.exit_code == 1
    assert "['disease_linker', 'chemical_linker']; choose one with --component NAME" in error_line(result)
    result = runner.invoke(app, ["demo", "--pipeline", str(two_linker_pipeline), "--mention", "advil", "--component", "chemical_linker"])
    assert result.exit_code == 0, result.output
    assert "'advil'" in result.output and "C2" in result.output.split("Free-form")[1]
    assert "general-purpose MiniLM" not in result.output  # the offline default's caveat, not said of the user's pipeline
    searched = []
    monkeypatch.setattr(SapbertLinker, "search_texts", lambda self, texts, *a, **k: searched.extend(texts) or [[] for _ in texts])
    runner.invoke(app, ["demo", "--pipeline", str(two_linker_pipeline), "--mention", "Advil", "--component", "chemical_linker"])
    assert searched == ["Advil"]  # as written: the linker's own `lowercase` setting decides
    monkeypatch.undo()

    corpus = tmp_path / "train.txt"
    corpus.write_text("7|t|Liver mass seen.\n7|a|\n7\t0\t10\tLiver mass\tDisease\tD2\n\n", encoding="utf8")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"memory_weight": 0.9}), encoding="utf8")
    args = ["add-memory", str(two_linker_pipeline), str(corpus), "--settings", str(settings), "--output", str(tmp_path / "out")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "choose one with --component NAME" in error_line(result)
    result = runner.invoke(app, args + ["--component", "disease_linker"])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "out")
    assert nlp.config["components"]["disease_linker"]["memory_weight"] == 0.9
    assert nlp.config["components"]["chemical_linker"]["memory_weight"] != 0.9
    assert nlp.get_pipe("disease_linker").memory.ids == ["D2"] and nlp.get_pipe("chemical_linker").memory is None


def test_demo_links_free_form_mentions_within_the_linkers_types(tmp_path, tiny_bert):
    """demo searched its free-form mentions without the linker's `types`: a concept the pipeline never returns was
    printed (found by an audit). Without a NER or matcher it says so, not "the dictionary matcher"."""
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline

    concepts = [Concept("HP:1", "Seizure", types=["phenotype"]), Concept("MONDO:1", "Epilepsy", types=["disease"])]
    build_pipeline(concepts, tiny_bert, label=None, linker_config={"types": ["disease"]}).to_disk(tmp_path / "typed")
    result = runner.invoke(app, ["demo", "--pipeline", str(tmp_path / "typed"), "--text", "Seizure.", "--mention", "seizure"])
    assert result.exit_code == 0, result.output
    free_form = result.output.split("Free-form")[1]
    assert "MONDO:1" in free_form and "HP:1" not in free_form
    assert "(the pipeline has no NER or matcher)" in result.output


def test_commands_on_a_pipeline_without_linker_fail_in_one_line(tmp_path):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "plain")
    for command in (["link", "text", "--pipeline"], ["demo", "--pipeline"]):
        result = runner.invoke(app, command + [str(tmp_path / "plain")])
        assert result.exit_code == 1
        assert error_line(result) == "error: the pipeline has no sapbert_linker component; its components: ['sentencizer']"


def test_choose_pipeline_keeps_the_candidate_that_links_dev_best(tmp_path, tiny_bert):
    import json

    import spacy
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.kb import Concept
    from spacy_sapbert.pipeline import build_pipeline, save_pipeline

    text = "Hepatoma and heart failure."
    (tmp_path / "dev.txt").write_text(
        f"1|t|{text}\n1|a|\n1\t0\t8\tHepatoma\tDisease\tD2\n1\t13\t26\theart failure\tDisease\tD1\n\n", encoding="utf8")
    full = [Concept("D1", "heart failure"), Concept("D2", "hepatoma"), Concept("D3", "kidney disease")]
    lacking = [Concept("D1", "heart failure"), Concept("D3", "kidney disease")]  # cannot link hepatoma
    for name, concepts in (("lacking", lacking), ("full", full)):
        nlp = build_pipeline(concepts, tiny_bert, label=None, linker_config={"device": "cpu", "pooling": "mean"})
        save_pipeline(nlp, tmp_path / name)
    runner = CliRunner()
    result = runner.invoke(app, ["choose-pipeline", str(tmp_path / "dev.txt"), str(tmp_path / "lacking"), str(tmp_path / "full"),
                                 "--output", str(tmp_path / "best"), "--report", str(tmp_path / "best.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "best.json").read_text())
    assert [c["accuracy"] for c in report["candidates"]] == [0.5, 1.0] and report["chosen"] == str(tmp_path / "full")
    assert spacy.load(tmp_path / "best").get_pipe("sapbert_linker").concept("D2") is not None
    result = runner.invoke(app, ["choose-pipeline", str(tmp_path / "dev.txt"), str(tmp_path / "full"), str(tmp_path / "best"),
                                 "--output", str(tmp_path / "tie"), "--report", str(tmp_path / "tie.json")])
    assert result.exit_code == 0 and json.loads((tmp_path / "tie.json").read_text())["chosen"] == str(tmp_path / "full")
    result = runner.invoke(app, ["choose-pipeline", str(tmp_path / "dev.txt"), str(tmp_path / "full"), "--output", str(tmp_path / "best")])
    assert result.exit_code == 1 and "--overwrite" in result.output  # an existing output is never replaced silently


def test_an_output_that_is_an_input_or_named_twice_is_refused_and_the_input_kept(built_pipeline, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("1|t|Hepatoma.\n1|a|\n1\t0\t8\tHepatoma\tDisease\tD2\n\n", encoding="utf8")
    synonyms = tmp_path / "synonyms.txt"
    synonyms.write_text("D1||heart failure|cardiac failure\n", encoding="utf8")
    for args, kept in ((["convert", str(corpus), "-o", str(corpus)], corpus),
                       (["pairs", str(synonyms), str(synonyms)], synonyms),
                       (["evaluate", str(corpus), "--vocab", str(tmp_path / "vocab.txt"), "--output", str(tmp_path / "vocab.txt")], tmp_path / "vocab.txt")):
        before = kept.read_bytes()
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and "is also an input of this command" in error_line(result), args
        assert kept.read_bytes() == before
    result = runner.invoke(app, ["extract", str(tmp_path / "vocab.txt"), "-o", str(tmp_path / "x"), "--name-languages", str(tmp_path / "x")])
    assert result.exit_code == 1 and "named twice" in error_line(result)
    # a report over a file inside an input pipeline, over the dev corpus, or in the folder being written (found by an
    # audit: choose-pipeline's --report replaced the dev corpus, and a candidate's config.cfg)
    config = built_pipeline / "config.cfg"
    before = config.read_bytes(), corpus.read_bytes()
    for report, said in ((config, "is also an input of this command, or inside one"), (corpus, "is also an input"),
                         (tmp_path / "chosen" / "r.json", "is the folder this command writes, or inside it")):
        result = runner.invoke(app, ["choose-pipeline", str(corpus), str(built_pipeline), "--output", str(tmp_path / "chosen"),
                                     "--report", str(report)])
        assert result.exit_code == 1 and said in error_line(result), report
    assert (config.read_bytes(), corpus.read_bytes()) == before and not (tmp_path / "chosen").exists()
    # every folder a command reads is an input (found by an audit: these four wrote over the pipeline's config.cfg)
    for args in (["visualize", "Hepatoma", "--pipeline", str(built_pipeline), "-o", str(config)],
                 ["convert", str(corpus), "-o", str(tmp_path / "k.spacy"), "--kb-ids", str(built_pipeline), "--report", str(config)],
                 ["evaluate", str(corpus), "--vocab", str(tmp_path / "vocab.txt"), "--end-to-end", str(built_pipeline), "--output", str(config)],
                 ["evaluate", str(corpus), "--vocab", str(tmp_path / "vocab.txt"), "--model", str(built_pipeline), "--errors", str(config)],
                 ["evaluate", str(corpus), "--vocab", str(tmp_path / "vocab.txt"), "--reranker", str(built_pipeline), "--plot", str(config)],
                 ["plot-embeddings", str(tmp_path / "vocab.txt"), "--after", str(built_pipeline), "-o", str(config)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and "is also an input of this command, or inside one" in error_line(result), args
    assert config.read_bytes() == before[0]
    result = runner.invoke(app, ["convert", str(corpus), "-o", str(tmp_path / "cv" / "out.spacy"), "--report", str(tmp_path / "cv")])
    assert result.exit_code == 1 and "is the folder of another output" in error_line(result)
    for command in (["convert", str(corpus), "-o", str(tmp_path / "x.spacy")], ["build-index", str(tmp_path / "vocab.txt"), str(tmp_path / "b")]):
        result = runner.invoke(app, [*command, "--lang", "zz"])  # spaCy's ImportError, after the vocabulary was read
        assert result.exit_code == 1 and "--lang 'zz' is not a language code spaCy knows" in error_line(result), command
    result = runner.invoke(app, ["choose-pipeline", str(corpus), str(built_pipeline), str(tmp_path / "nope"), "--output", str(tmp_path / "c2")])
    assert result.exit_code == 1 and error_line(result) == f"error: {tmp_path / 'nope'}: not a saved pipeline (no config.cfg)"


def test_inputs_that_leave_nothing_are_errors_and_an_earlier_output_stays(built_pipeline, tmp_path):
    """0 of 0 mentions is no accuracy, and an empty synonyms or pairs file no result: each is refused in one line."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("1|t|Hepatoma.\n1|a|\n1\t0\t8\tHepatoma\tSpecificDisease\tD2\n\n", encoding="utf8")
    (tmp_path / "empty.obo").write_text("format-version: 1.2\n", encoding="utf8")
    earlier = tmp_path / "synonyms.txt"
    earlier.write_text("D1||heart failure\n", encoding="utf8")
    result = runner.invoke(app, ["extract", str(tmp_path / "empty.obo"), "-o", str(earlier)])
    assert result.exit_code == 1 and "no concept with a name to write" in error_line(result)
    assert earlier.read_text() == "D1||heart failure\n"
    result = runner.invoke(app, ["pairs", str(earlier), str(tmp_path / "pairs.txt")])  # one name: no pair
    assert result.exit_code == 1 and "no pair to write" in error_line(result) and not (tmp_path / "pairs.txt").exists()
    # options of the other mode were accepted and did nothing
    fine_tune = ["pairs", str(tmp_path / "pairs.txt"), "--corpus", str(corpus), "--vocab", str(tmp_path / "vocab.txt")]
    result = runner.invoke(app, fine_tune + ["--max-pairs", "5", "--seed", "7"])
    assert result.exit_code == 1 and error_line(result) == "error: --max-pairs, --seed do not apply with --corpus"
    result = runner.invoke(app, ["pairs", str(earlier), str(tmp_path / "pairs.txt"), "--labels", "Disease"])
    assert result.exit_code == 1 and error_line(result) == "error: --labels does not apply without --corpus"
    for args, said in ((["--sources", "MSH"], "--sources applies to --mrconso, not to vocabulary files"),
                       (["--languages", "SPA", "--exclude-sources", "X"], "--exclude-sources, --languages apply to --mrconso")):
        result = runner.invoke(app, ["extract", str(tmp_path / "empty.obo"), "-o", str(earlier), *args])
        assert result.exit_code == 1 and said in error_line(result)
    result = runner.invoke(app, ["extract", "--mrconso", str(tmp_path / "empty.obo"), "--mesh-trees", "C", "-o", str(earlier)])
    assert result.exit_code == 1 and "--mesh-trees applies to vocabulary files, not to --mrconso" in error_line(result)
    assert earlier.read_text() == "D1||heart failure\n"
    result = runner.invoke(app, ["pairs", str(earlier), str(tmp_path / "pairs.txt"), "--composites", "skip"])
    assert result.exit_code == 1 and error_line(result) == "error: --composites does not apply without --corpus"
    result = runner.invoke(app, fine_tune + ["--composites", "split"])
    assert result.exit_code == 1 and error_line(result) == "error: --composites is 'split'; use 'parts' or 'skip'"
    result = runner.invoke(app, ["pairs", str(earlier), str(tmp_path / "pairs.txt"), "--max-pairs", "-1"])
    assert result.exit_code == 1 and error_line(result) == "error: --max-pairs is -1; give 0 (every pair) or more"
    (tmp_path / "vocab.txt").write_text("D7||liver disease\n", encoding="utf8")
    result = runner.invoke(app, fine_tune)  # the one mention's gold is not in it: the counts say why nothing is written
    assert result.exit_code == 1 and "no fine-tuning pair from its 1 mentions" in error_line(result)
    assert "1 ids not in the vocabulary" in error_line(result)
    assert not (tmp_path / "pairs.txt").exists()
    vocab = str(tmp_path / "vocab.txt")
    for args in (["evaluate", str(corpus), "--vocab", vocab, "--label", "Disease"],
                 ["choose-pipeline", str(corpus), str(built_pipeline), "--output", str(tmp_path / "chosen"), "--label", "Disease"],
                 ["add-memory", str(built_pipeline), str(corpus), "--output", str(tmp_path / "with"), "--label", "Disease"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and "no gold mention with the labels ['Disease']" in error_line(result), args
    assert not (tmp_path / "chosen").exists() and not (tmp_path / "with").exists()


def test_link_names_the_line_of_a_file_that_is_not_utf8_and_refuses_batch_size_0(built_pipeline, tmp_path):
    (tmp_path / "in.txt").write_bytes(b"nephropathy\ncaf\xe9 au lait spots\n")
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline), "--file", str(tmp_path / "in.txt")])
    assert result.exit_code == 1 and f"{tmp_path / 'in.txt'}, line 2: not valid UTF-8" in error_line(result)
    result = runner.invoke(app, ["link", "nephropathy", "--pipeline", str(built_pipeline), "--batch-size", "0"])
    assert result.exit_code == 2 and "--batch-size" in result.output


def test_memory_settings_of_the_wrong_shape_or_type_name_the_file_and_key(built_pipeline, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("1|t|Hepatoma.\n1|a|\n1\t0\t8\tHepatoma\tDisease\tD2\n\n", encoding="utf8")
    for content, expected in (('{"memory_k": "4"}', "memory setting `memory_k` must be int, got '4'"),
                              ("[4, 0.1]", "memory settings must be a JSON object"),
                              ('{"memory_weight": "0.1"}', "memory setting `memory_weight` must be float")):
        (tmp_path / "settings.json").write_text(content, encoding="utf8")
        result = runner.invoke(app, ["add-memory", str(built_pipeline), str(corpus), "--output", str(tmp_path / "with"),
                                     "--settings", str(tmp_path / "settings.json")])
        assert result.exit_code == 1 and f"{tmp_path / 'settings.json'}: {expected}" in error_line(result), content


def test_add_reranker_refuses_a_weight_that_is_not_a_positive_number(built_pipeline, tmp_path):
    for value in ("nan", "inf", "0"):
        result = runner.invoke(app, ["add-reranker", str(built_pipeline), str(tmp_path), "--rerank-weight", value, "--output", str(tmp_path / "with")])
        assert result.exit_code == 1 and "--rerank-weight must be a positive number" in error_line(result), value


def test_build_index_refuses_a_chunk_dir_that_the_output_would_replace_before_reading(built_pipeline, tmp_path, tiny_bert):
    output = tmp_path / "new"
    result = runner.invoke(app, ["build-index", str(tmp_path / "no-vocabulary.txt"), str(output), "--model", tiny_bert,
                                 "--chunk-dir", str(output / "chunks")])
    assert result.exit_code == 1 and "is (inside) the output" in error_line(result) and not output.exists()


def test_linkers_whose_labels_overlap_are_refused_naming_the_shared_labels(tiny_bert):
    import spacy

    from spacy_sapbert.errors import SapbertError
    from spacy_sapbert.pipeline import require_linkers, shared_labels

    assert shared_labels(["Disease"], ["Chemical"]) == set() and shared_labels([], ["Chemical"]) == {"Chemical"}
    assert shared_labels(["Disease", "Chemical"], ["Chemical"]) == {"Chemical"} and shared_labels([], []) == {"every label"}
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", name="disease_linker", config={"model": tiny_bert, "labels": ["Disease", "Chemical"]})
    nlp.add_pipe("sapbert_linker", name="chemical_linker", config={"model": tiny_bert, "labels": ["Chemical"]})
    with pytest.raises(SapbertError, match=r"'disease_linker' and 'chemical_linker' both link \['Chemical'\]"):
        require_linkers(nlp)
    nlp.get_pipe("disease_linker").labels = ["Disease"]
    assert [name for name, _ in require_linkers(nlp)] == ["disease_linker", "chemical_linker"]


def test_link_jsonl_keeps_each_id_as_the_input_has_it(built_pipeline, tmp_path):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"id": 2, "text": "nephropathy"}\n{"id": "2", "text": "hepatoma"}\n{"text": "no id"}\n', encoding="utf8")
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline), "--file", str(corpus), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [row.get("id") for row in rows] == [2, "2", None]  # an integer stays one; a record without id gets none


@pytest.mark.parametrize("record, said", [
    ('{"id": 18446744073709551616, "text": "nephropathy"}', 'an integer "id" must fit in 64 bits'),  # was written as {"id":,...}
    ('{"id": 1, "text": "hepatoma \\ud800"}', '"text" holds an unpaired surrogate'),
])
def test_link_jsonl_refuses_what_it_could_not_write_back_naming_the_line(built_pipeline, tmp_path, record, said):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"id": 1, "text": "hepatoma"}\n' + record + "\n", encoding="utf8")
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline), "--file", str(corpus), "--format", "jsonl"])
    assert result.exit_code == 1 and "docs.jsonl, line 2" in result.output and said in result.output


def test_link_input_a_bom_on_stdin_text_with_file_and_a_document_over_max_length(built_pipeline, tmp_path):
    """A byte order mark piped in stayed in the first document (its entities were lost); TEXT silently won over --file;
    a document over nlp.max_length failed with spaCy's message, naming no document, and lost its batch (found by an audit)."""
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline)], input="\ufeffnephropathy\n")
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert row["text"] == "nephropathy" and row["ents"][0]["kb_id"] == "OMIM:3"
    (tmp_path / "docs.txt").write_text("hepatoma\n", encoding="utf8")
    result = runner.invoke(app, ["link", "nephropathy", "--pipeline", str(built_pipeline), "--file", str(tmp_path / "docs.txt")])
    assert result.exit_code == 1 and "give TEXT or --file, not both" in result.output
    (tmp_path / "long.txt").write_text("hepatoma\nnephropathy\n" + "x " * 600_000 + "\nhepatoma\n", encoding="utf8")
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline), "--file", str(tmp_path / "long.txt")])
    assert result.exit_code == 1 and "document 3 (input line 3) has 1,200,000 characters" in result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [row["text"] for row in rows] == ["hepatoma", "nephropathy"]  # the documents before it, printed
    # a BOM at the start of a later line (files joined by cat), TEXT with --file and a long document in visualize
    result = runner.invoke(app, ["link", "--pipeline", str(built_pipeline)], input="nephropathy\n\ufeffhepatoma\n")
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [row["text"] for row in rows] == ["nephropathy", "hepatoma"] and rows[1]["ents"][0]["kb_id"] == "D2"
    result = runner.invoke(app, ["visualize", "hepatoma", "--pipeline", str(built_pipeline), "--file", str(tmp_path / "docs.txt"),
                                 "-o", str(tmp_path / "page.html")])
    assert result.exit_code == 1 and "give TEXT or --file, not both" in result.output
    result = runner.invoke(app, ["visualize", "--pipeline", str(built_pipeline), "--file", str(tmp_path / "long.txt"), "-o", str(tmp_path / "page.html")])
    assert result.exit_code == 1 and "document 3 has 1,200,000 characters" in result.output and not (tmp_path / "page.html").exists()
    result = runner.invoke(app, ["visualize", "x", "--pipeline", str(built_pipeline), "-o", str(tmp_path / "page.html"), "--port", "1"])
    assert result.exit_code == 1 and "--port and --host are the server's" in result.output
    result = runner.invoke(app, ["link", "--pipeline", str(tmp_path / "no-pipeline"), "--file", str(tmp_path / "none.txt")])
    assert result.exit_code == 1 and "none.txt" in result.output  # the missing file is said first


@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_and_sigterm_say_what_is_kept_and_exit_with_the_shells_status(signal_name, status, tmp_path):
    """A command stopped by Ctrl-C exited 130 without a word; it now says what was kept and how to go on, and cleans up
    (finally blocks run) as on SIGTERM."""
    import subprocess
    import sys

    script = (
        "import os, signal, time\n"
        "from spacy_sapbert.cli import exit_on_signals\n"
        "exit_on_signals()\n"
        "try:\n"
        f"    os.kill(os.getpid(), signal.{signal_name}); time.sleep(30)\n"
        "finally:\n"
        f"    open({str(tmp_path / 'cleaned')!r}, 'w').close()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == status and (tmp_path / "cleaned").exists()
    assert result.stderr.strip().startswith("interrupted: no output was left half-written; a trainer continues") and "--resume" in result.stderr


def test_link_into_a_reader_that_stops_early_exits_quietly(built_pipeline, tmp_path):
    """`link --file F | head -1` ended with "error: BrokenPipeError ..." and status 1 (found by an audit)."""
    documents = tmp_path / "many.txt"
    documents.write_text("Hepatoma and cardiac failure and nephropathy.\n" * 3000, encoding="utf8")  # more than a pipe holds
    process = subprocess.Popen([sys.executable, "-m", "spacy_sapbert", "link", "--pipeline", str(built_pipeline), "--file", str(documents)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()  # the reader goes, as head does
    _, errors = process.communicate(timeout=300)
    assert json.loads(first)["ents"]
    assert process.returncode == 141 and b"error" not in errors.lower() and b"Traceback" not in errors


@pytest.mark.parametrize("option, value, said", [
    ("--index-type", "nope", "--index-type is 'nope'"), ("--k", "0", "--k must be at least 1"), ("--pooling", "max", "--pooling is 'max'"),
])
def test_build_index_names_a_bad_option_before_it_reads_the_vocabulary(tmp_path, option, value, said, monkeypatch):
    """A bad --index-type was said as "config key `index_type`", after the whole vocabulary was read (minutes for UMLS)."""
    import spacy_sapbert.readers

    monkeypatch.setattr(spacy_sapbert.readers, "read_vocabulary", lambda *a, **k: pytest.fail("the vocabulary was read"))
    (tmp_path / "vocab.txt").write_text("D1||Heart failure\n", encoding="utf8")
    result = runner.invoke(app, ["build-index", str(tmp_path / "vocab.txt"), str(tmp_path / "pipe"), option, value])
    assert result.exit_code == 1 and f"error: {said}" in result.output and "config key" not in result.output


def test_add_reranker_names_its_rerank_k_option_not_the_config_key(built_pipeline, tmp_path):
    (tmp_path / "rr").mkdir()
    for value in ("0", "1000"):
        result = runner.invoke(app, ["add-reranker", str(built_pipeline), str(tmp_path / "rr"), "--rerank-k", value, "--output", str(tmp_path / "with")])
        assert result.exit_code == 1 and f"--rerank-k must be between 1 and the k of sapbert_linker in {built_pipeline}" in error_line(result), value
    assert not (tmp_path / "with").exists()


def test_add_reranker_names_a_missing_reranker_folder(built_pipeline, tmp_path):
    result = runner.invoke(app, ["add-reranker", str(built_pipeline), str(tmp_path / "no-such"), "--output", str(tmp_path / "out")])
    assert result.exit_code == 1 and "no-such: no such re-ranker folder" in result.output


def test_a_commands_warnings_are_one_line_each(tmp_path):
    """Python printed a warning with the library's file and source line under it ("  for concept in read_vocabulary(...)");
    --debug keeps that form (found by an audit)."""
    import subprocess
    import sys

    vocab = tmp_path / "v.txt"
    vocab.write_text("D1||heart failure|cardiac failure\nbad line\n", encoding="utf8")
    command = [sys.executable, "-m", "spacy_sapbert", "extract", str(vocab), "-o", str(tmp_path / "s.txt"), "--no-strict"]
    lines = subprocess.run(command, capture_output=True, text=True, check=True).stderr.splitlines()
    assert f"warning: VocabularyWarning: {vocab}: skipped 1 malformed line(s); first at line 2: no '||' between ids and names" in lines
    assert not any(line.startswith("  ") for line in lines)
    debug = subprocess.run([sys.executable, "-m", "spacy_sapbert", "--debug", *command[3:]], capture_output=True, text=True, check=True)
    assert "VocabularyWarning" in debug.stderr and "warning: VocabularyWarning" not in debug.stderr


def test_package_builds_a_wheel_of_exactly_the_pipeline_each_time(built_pipeline, tmp_path):
    """`spacy package --force` over its earlier folder kept the earlier build's files: a rebuilt wheel carried a
    re-ranker/ folder its pipeline no longer had, and linked otherwise (found by an audit of the project workflow)."""
    import zipfile

    extra = built_pipeline / "sapbert_linker" / "notes"
    extra.mkdir()
    (extra / "stale.txt").write_text("from the first build\n", encoding="utf8")
    args = ["package", str(built_pipeline), str(tmp_path / "packages"), "--name", "tiny_pkg", "--version", "0.0.1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    wheel = tmp_path / "packages" / "en_tiny_pkg-0.0.1-py3-none-any.whl"
    assert [p.name for p in (tmp_path / "packages").iterdir()] == [wheel.name]  # the wheel only, no build folder
    assert any(n.endswith("sapbert_linker/notes/stale.txt") for n in zipfile.ZipFile(wheel).namelist())
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "pass --overwrite" in error_line(result)
    (extra / "stale.txt").unlink()  # the file this test made
    extra.rmdir()
    result = runner.invoke(app, [*args, "--overwrite"])
    assert result.exit_code == 0, result.output
    names = zipfile.ZipFile(wheel).namelist()
    assert not any("notes" in n for n in names) and any(n.endswith("sapbert_linker/cfg") for n in names)
    assert [p.name for p in (tmp_path / "packages").iterdir()] == [wheel.name]
    # setuptools normalizes names and versions: the wheel it built is the one kept (an audit: "1.0-beta" was thrown away)
    result = runner.invoke(app, ["package", str(built_pipeline), str(tmp_path / "other"), "--name", "Tiny_Pkg", "--version", "1.0-beta"])
    assert result.exit_code == 0, result.output
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["en_tiny_pkg-1.0b0-py3-none-any.whl"]
    result = runner.invoke(app, ["package", str(built_pipeline), str(built_pipeline / "dist"), "--name", "x"])
    assert result.exit_code == 1 and "is (inside) the pipeline" in error_line(result) and not (built_pipeline / "dist").exists()


def test_an_interrupted_package_is_an_interruption_not_a_refusal(built_pipeline, tmp_path, monkeypatch):
    """Ctrl-C while spacy package ran (cli.exit_on_signals: SystemExit 130) was reported as "spacy package refused"
    with status 1 (an audit); its temporary build folder still goes."""
    import importlib

    from spacy_sapbert.packaging import build_wheel

    def interrupted(*args, **kwargs):
        raise SystemExit(130)

    monkeypatch.setattr(importlib.import_module("spacy.cli.package"), "package", interrupted)
    with pytest.raises(SystemExit) as stopped:
        build_wheel(built_pipeline, tmp_path / "packages", "tiny_pkg", "0.0.1")
    assert stopped.value.code == 130 and list((tmp_path / "packages").iterdir()) == []
