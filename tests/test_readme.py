from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command():
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf8").splitlines()
    command = [line for line in ci_lines if line.startswith("python3 -m venv")][0]
    assert command in (ROOT / "README.md").read_text(encoding="utf8")
