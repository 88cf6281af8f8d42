"""The spaCy project workflow `all` end to end with tiny vars, then the wheel it packages links after install."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


from conftest import ROOT, shared_file

TINY_DOCS = 6
# what a local `spacy project run` leaves in the project folder (git-ignored): not copied into the test's project
PROJECT_RUN_OUTPUTS = shutil.ignore_patterns("assets", "corpus", "training", "metrics", "packages", "project.lock")


def tiny_pubtator(source: Path, dest: Path, n_docs: int) -> set:
    """The first documents of a PubTator file; returns their gold ids."""
    blocks = source.read_text(encoding="utf8").strip().split("\n\n")[:n_docs]
    dest.write_text("\n\n".join(blocks) + "\n\n", encoding="utf8")
    golds = set()
    for block in blocks:
        for line in block.splitlines():
            fields = line.split("\t")
            if len(fields) >= 6:
                golds.update(g.replace("OMIM:", "") for g in fields[5].replace("+", "|").split("|"))
    return golds


def tiny_data(root: Path) -> str:
    """Tiny copies of the workflow's data under `root`; returns the name of a concept in the tiny vocabulary."""
    for sub in ("medic", "mesh-2024", "ncbi-disease", "bc5cdr"):
        (root / sub).mkdir(parents=True)
    golds = tiny_pubtator(shared_file("ncbi-disease", "NCBItrainset_corpus.txt"), root / "ncbi-disease" / "NCBItrainset_corpus.txt", TINY_DOCS)
    golds |= tiny_pubtator(shared_file("ncbi-disease", "NCBIdevelopset_corpus.txt"), root / "ncbi-disease" / "NCBIdevelopset_corpus.txt", TINY_DOCS)
    golds |= tiny_pubtator(shared_file("bc5cdr", "CDR_TrainingSet.PubTator.txt"), root / "bc5cdr" / "CDR_TrainingSet.PubTator.txt", TINY_DOCS)
    medic = shared_file("medic", "medic_06Jul2012.txt").read_text(encoding="utf8").splitlines()
    keep = [l for l in medic if set(l.split("||")[0].split("|")) & golds] + medic[:200]
    (root / "medic" / "medic_06Jul2012.txt").write_text("\n".join(keep) + "\n", encoding="utf8")
    shutil.copy(shared_file("medic", "ncbi-spell-check.txt"), root / "medic" / "ncbi-spell-check.txt")
    mesh = shared_file("mesh-2024", "mesh_id_label_mappings.tsv").read_text(encoding="utf8").splitlines()
    (root / "mesh-2024" / "mesh_id_label_mappings.tsv").write_text("\n".join(mesh[:400]) + "\n", encoding="utf8")
    return keep[0].split("||")[1].split("|")[0]


def test_project_workflow_all_then_install_the_wheel(tmp_path, tiny_bert, capsys):
    import spacy
    from weasel.cli.run import project_run

    project = tmp_path / "project"
    shutil.copytree(ROOT / "projects" / "sapbert", project, ignore=PROJECT_RUN_OUTPUTS)
    name = tiny_data(tmp_path / "data")
    overrides = {
        "vars.data": str(tmp_path / "data"),
        "vars.base_model": tiny_bert,
        "vars.pooling": "cls",
        "vars.batch_size": 16,
        "vars.finetune_batch_size": 8,
        "vars.sap_steps": 3,
        "vars.finetune_steps": 2,
        "vars.checkpoint_every": 2,
        "vars.ner_max_steps": 4,
        "vars.ner_eval_frequency": 2,
        "vars.package_name": "sapbert_tiny_project",
    }
    project_run(project, "all", overrides=overrides)
    for output in ("corpus/pairs.txt", "training/sap/model/config.json", "training/finetuned/model/config.json",
                   "corpus/ner/ncbi-train.spacy", "training/ner/model-best/config.cfg", "metrics/ner-ncbi-dev.json",
                   "training/pipeline/config.cfg", "metrics/ncbi-dev.json", "metrics/ncbi-dev.png", "metrics/embeddings.png"):
        assert (project / output).exists(), output
    capsys.readouterr()
    project_run(project, "all", overrides=overrides)  # nothing changed: every step is skipped
    assert capsys.readouterr().out.count("Skipping") == 12

    # spaCy's EntityLinker on the pipeline's SapBERT candidates
    project_run(project, "entity-linker", overrides={**overrides, "vars.entity_vector_length": 32, "vars.el_max_steps": 4, "vars.el_eval_frequency": 2})
    el_pipeline = spacy.load(project / "training" / "entity-linker" / "model-best")
    assert el_pipeline.pipe_names == ["sentencizer", "ner", "sapbert_abbreviations", "sapbert_linker", "entity_linker"]
    assert len(el_pipeline.get_pipe("entity_linker").kb) == len(el_pipeline.get_pipe("sapbert_linker").index)
    assert "nel_micro_f" in json.loads((project / "metrics" / "entity-linker-dev.json").read_text())

    [wheel] = list((project / "packages").rglob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)],
                   check=True, capture_output=True)
    script = (
        "import spacy\n"
        "nlp = spacy.load('en_sapbert_tiny_project')\n"
        "print(nlp.pipe_names)\n"
        "nlp('Patients with a rash were seen.')\n"  # the NER runs (4 training steps: what it finds is not checked)
        f"doc = nlp.make_doc('Patients with {name} were seen.')\n"
        f"doc.ents = [doc.char_span(14, 14 + len('{name}'), label='Disease')]\n"
        "doc = nlp.get_pipe('sapbert_linker')(doc)\n"
        "print([(e.text, e.label_, bool(e.kb_id_)) for e in doc.ents])\n"
    )
    # the wheel, and this checkout's spacy_sapbert (not another copy installed in the environment)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    pipe_names, ents = out.stdout.strip().splitlines()
    assert pipe_names == "['ner', 'sapbert_abbreviations', 'sapbert_linker']"
    assert f"('{name}', 'Disease', True)" in ents


def test_project_knn_and_best_workflows_after_all(tmp_path, tiny_bert):
    """`knn` builds on `all`: DHNS from the SAP model on NCBI-disease and BC5CDR train, memory settings tuned on dev,
    a pipeline with a memory. `best` builds on `knn`: a re-ranker trained on the same corpora's disease mentions, and
    the pipeline dev chooses with or without it, packaged."""
    import spacy
    from weasel.cli.run import project_run

    project = tmp_path / "project"
    shutil.copytree(ROOT / "projects" / "sapbert", project, ignore=PROJECT_RUN_OUTPUTS)
    tiny_data(tmp_path / "data")
    overrides = {
        "vars.data": str(tmp_path / "data"), "vars.base_model": tiny_bert, "vars.pooling": "cls",
        "vars.batch_size": 16, "vars.sap_steps": 2, "vars.checkpoint_every": 2, "vars.dhns_epochs": 1,
        "vars.dhns_batch_size": 8, "vars.knn_package_name": "sapbert_tiny_knn",
        "vars.reranker_epochs": 1, "vars.best_package_name": "sapbert_tiny_best",
        "vars.ner_max_steps": 2, "vars.ner_eval_frequency": 2,
    }
    for command in ("extract", "pairs", "train", "convert", "ner"):
        project_run(project, command, overrides=overrides)
    project_run(project, "knn", overrides=overrides)
    dhns = json.loads((project / "training" / "dhns" / "dhns_config.json").read_text())
    assert [Path(c).parent.name for c in dhns["corpora"]] == ["ncbi-disease", "bc5cdr"]  # the dev choice's two corpora
    assert "Disease" in dhns["labels"] and "Chemical" not in dhns["labels"]
    report = json.loads((project / "metrics" / "knn-dev.json").read_text())
    assert report["memory"]["tuned_on_this_corpus"] and report["memory"]["n_entries"] > 0
    linker = spacy.load(project / "training" / "knn" / "pipeline").get_pipe("sapbert_linker")
    assert len(linker.memory) > 0
    assert linker.memory_settings.to_dict() == report["memory"]["settings"]
    assert list((project / "packages").rglob("en_sapbert_tiny_knn-*.whl"))

    project_run(project, "best", overrides=overrides)
    reranker = json.loads((project / "training" / "reranker" / "reranker_config.json").read_text())
    assert [Path(c).parent.name for c in reranker["corpora"]] == ["ncbi-disease", "bc5cdr"]  # as dhns, chosen on dev
    assert reranker["labels"] == dhns["labels"] and reranker["context_words"] == 8  # the mention read in its document
    second = json.loads((project / "training" / "reranker-second" / "reranker_config.json").read_text())
    assert (reranker["seed"], second["seed"]) == (42, 43) and {**second, "seed": 42, "output": reranker["output"]} == reranker
    ensemble = json.loads((project / "training" / "reranker-ensemble" / "reranker.json").read_text())
    assert ensemble["members"] == ["member-0", "member-1"]  # the two seeds, averaged
    choice = json.loads((project / "metrics" / "best-dev.json").read_text())
    candidates = ["training/knn/pipeline", "training/best/with-reranker"]  # as the step names them, in the project folder
    assert [c["pipeline"] for c in choice["candidates"]] == candidates and choice["chosen"] in candidates
    chosen = spacy.load(project / "training" / "best" / "pipeline").get_pipe("sapbert_linker")
    assert (chosen.reranker is not None) == choice["chosen"].endswith("with-reranker")
    with_reranker = spacy.load(project / "training" / "best" / "with-reranker").get_pipe("sapbert_linker")
    weights = json.loads((project / "metrics" / "reranker-weight-dev.json").read_text())
    assert len(with_reranker.reranker.members) == 2 and with_reranker.rerank_weight == weights["chosen"]  # chosen on dev
    assert weights["corpus"].endswith("NCBIdevelopset_corpus.txt") and len(weights["weights"]) == 7
    assert list((project / "packages").rglob("en_sapbert_tiny_best-*.whl"))


def test_every_data_file_a_step_reads_is_one_of_its_deps():
    """A step that reads a data file it does not list is not rerun when the file changes (dhns and evaluate-knn read the
    spelling list, index-umls MRSTY.RRF, unlisted: found by an audit), and spacy project push/pull leave it out."""
    import re

    import srsly

    project = srsly.read_yaml(ROOT / "projects" / "sapbert" / "project.yml")
    missing = {}
    for command in project["commands"]:
        read = set()
        for line in command.get("script", []):
            read |= set(re.findall(r"\$\{vars\.(?:data|umls_dir)\}/[^\s\"']+", line))
        outputs = set(command.get("outputs", []))
        unlisted = sorted(read - set(command.get("deps", [])) - outputs)
        if unlisted:
            missing[command["name"]] = unlisted
    assert missing == {}


def test_the_umls_workflow_writes_only_files_of_its_own():
    """`umls` wrote corpus/synonyms.txt, training/linker and training/pipeline, which `all` writes: run after it, it
    replaced the MEDIC linker and `package` then built the MEDIC-named wheel from the UMLS pipeline (an audit)."""
    import srsly

    project = srsly.read_yaml(ROOT / "projects" / "sapbert" / "project.yml")
    commands = {command["name"]: command for command in project["commands"]}

    def outputs(workflow):
        return {output for name in project["workflows"][workflow] for output in commands[name].get("outputs", [])}

    umls = outputs("umls")
    others = outputs("all") | outputs("knn") | outputs("best")
    assert umls and not umls & others
    assert all(dep in umls or dep.startswith("${vars.umls_dir}/") for name in project["workflows"]["umls"] for dep in commands[name].get("deps", []))
