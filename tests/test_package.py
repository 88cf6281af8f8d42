"""`spacy package` turns a saved linker pipeline into a wheel that links after `pip install`."""
import os
import subprocess
import sys

from conftest import ROOT
from spacy_sapbert.kb import Concept
from spacy_sapbert.pipeline import build_pipeline, save_pipeline


def test_spacy_package_wheel_installs_and_links(tmp_path, tiny_bert):
    nlp = build_pipeline(
        [Concept("D1", "Heart failure", ["cardiac failure"]), Concept("D2", "Liver cancer", ["hepatoma"])],
        tiny_bert,
        label="DISEASE",
    )
    save_pipeline(nlp, tmp_path / "pipe")
    (tmp_path / "out").mkdir()
    subprocess.run(
        [sys.executable, "-m", "spacy", "package", str(tmp_path / "pipe"), str(tmp_path / "out"),
         "--name", "sapbert_test_linker", "--version", "0.0.1", "--build", "wheel"],
        check=True, capture_output=True,
    )
    [wheel] = list((tmp_path / "out").rglob("*.whl"))
    meta = (tmp_path / "out" / "en_sapbert_test_linker-0.0.1" / "meta.json").read_text()
    assert "spacy-sapbert" in meta  # spacy package found the component's distribution through its entry point
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)],
        check=True, capture_output=True,
    )
    script = (
        "import spacy\n"
        "nlp = spacy.load('en_sapbert_test_linker')\n"
        "doc = nlp('Cardiac failure and hepatoma.')\n"
        "print([(e.text, e.kb_id_) for e in doc.ents])\n"
    )
    # the wheel, and this checkout's spacy_sapbert (not another copy installed in the environment)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    assert out.stdout.strip() == "[('Cardiac failure', 'D1'), ('hepatoma', 'D2')]"


def test_the_all_extra_installs_what_the_project_package_step_runs():
    """The README's first command installs `.[all]`; the project's `package` step builds a wheel with `spacy package`,
    which needs the `build` package (it failed on a fresh install without it)."""
    from importlib.metadata import requires

    all_extra = {line.split(";")[0].strip().split(">")[0].split("[")[0] for line in requires("spacy-sapbert") if 'extra == "all"' in line}
    assert "spacy_sapbert package" in (ROOT / "projects" / "sapbert" / "project.yml").read_text(encoding="utf8")  # a wheel
    assert {"build", "pytorch-metric-learning", "matplotlib", "scikit-learn", "onnxruntime", "pykeen"} <= all_extra
