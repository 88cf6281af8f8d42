"""Property-based tests of every vocabulary reader and the PubTator / BioSyn / XL-BEL corpus readers.

Inputs are a few consecutive real lines of ../shared/data with one line (or the whole file) mutated --
truncation, byte garbage, invalid UTF-8, latin-1, wrong field counts, BOMs, CRLF, huge fields, wrong
JSON types -- made and checked by benchmarks/fuzz_readers.py (`make_input`, `check`), here driven by
Hypothesis. Each input must give records or the reader's own error (a SapbertError in one line naming
file and line), never another exception; strict mode never drops a line silently and the lenient
mode counts exactly what it skipped (see fuzz_readers.check). Derandomized: the same examples on
every run.
"""
from __future__ import annotations

import importlib.util
import random
import sys
import warnings
from pathlib import Path

import pytest
from conftest import shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacy_sapbert.errors import SapbertError
from spacy_sapbert.readers import VocabularyWarning

ROOT = Path(__file__).resolve().parent.parent


def _load_fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_readers", ROOT / "benchmarks" / "fuzz_readers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_readers"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


fuzz = _load_fuzz_module()

EXAMPLES = 300  # per reader: the whole file takes about 15 s on one core
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
_seeds: dict = {}


def seeds_for(case):
    """The real lines `case` is fuzzed with; the test is skipped when a shared file is missing."""
    paths = [shared_file(*parts) for parts in case.files]
    if case.name not in _seeds:
        _seeds[case.name] = fuzz.load_seeds(case, paths)
    return _seeds[case.name]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("name", [case.name for case in fuzz.CASES])
def test_mutated_real_lines_give_records_or_a_clear_error(name, folder):
    case = fuzz.CASES_BY_NAME[name]
    seeds = seeds_for(case)
    outcomes = []

    @FUZZ
    @given(kind=st.sampled_from(fuzz.mutation_kinds(case)), rng=st.randoms(use_true_random=False))
    def run(kind, rng):
        made = fuzz.make_input(case, seeds, rng, kind)
        outcomes.append(fuzz.check(case, made, folder))  # OracleError or an escaping exception fails the test

    run()
    # the mutations must reach both outcomes, or the test would check too little
    assert {"records", "error"} <= set(outcomes)


def test_check_flags_a_silent_drop(folder):
    """The oracle itself: a reader that drops a mutated line without a word is caught."""
    case = fuzz.CASES_BY_NAME["biosyn .concept"]
    seeds = seeds_for(case)

    line = seeds[0][0]
    pmid, offsets, label, mention, gold = line.split(b"||")
    dropped = "Q" * len(mention.decode("utf8"))  # as long as the mention its offsets span: a well-formed line

    def dropping_reader(path, strict):
        return [query for query in case.read(path, False) if query.mention != dropped]

    sloppy = fuzz.Case(case.name, case.files, dropping_reader, separators=case.separators, one_record_each=True)
    made = fuzz.Input(
        data=b"||".join([pmid, offsets, label, dropped.encode(), gold]) + b"\n" + b"\n".join(seeds[0][1:4]) + b"\n",
        mutation="garbage",
        line_no=1,
        original=b"\n".join(seeds[0][:4]) + b"\n",
        without=b"\n".join(seeds[0][1:4]) + b"\n",
    )
    with pytest.raises(fuzz.OracleError, match="dropped silently|gave 3 records"):
        fuzz.check(sloppy, made, folder)


def test_check_flags_an_error_at_the_wrong_line(folder):
    """The oracle itself: an error that names another line than the mutated one is caught."""
    case = fuzz.CASES_BY_NAME["dictionary (MEDIC)"]
    seeds = seeds_for(case)

    def reader(path, strict):
        from spacy_sapbert.errors import VocabularyFormatError

        raise VocabularyFormatError(str(path), 1, "always line 1")

    wrong = fuzz.Case(case.name, case.files, reader, separators=case.separators)
    lines = seeds[0][:4]
    made = fuzz.Input(
        data=b"\n".join(lines[:2] + [b"no separator"] + lines[3:]) + b"\n",
        mutation="garbage",
        line_no=3,
        original=b"\n".join(lines) + b"\n",
        without=b"\n".join(lines[:2] + lines[3:]) + b"\n",
    )
    with pytest.raises(fuzz.OracleError):
        fuzz.check(wrong, made, folder)


def test_benchmark_table_is_deterministic_and_clean(folder, capsys):
    """benchmarks/fuzz_readers.py: seeded, so two runs print the same table, with no other exception."""
    for case in fuzz.CASES:
        for parts in case.files:
            shared_file(*parts)
    args = ["--n", "3", "--data", str(fuzz.SHARED_DATA), "--only", "xl-bel"]
    assert fuzz.main(args) == 0
    first = capsys.readouterr().out
    assert fuzz.main(args) == 0
    assert capsys.readouterr().out == first
    rows = [line for line in first.splitlines() if line.startswith("| xl-bel")]
    assert len(rows) == 2
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == "3" and int(cells[2]) + int(cells[3]) == 3 and cells[4] == "0" and cells[5] == "0"


def test_random_bytes_never_escape_as_another_exception(folder):
    """Files of random bytes (no real lines at all): every reader gives records or its own error."""
    rng = random.Random(7)
    path = folder / "random.bin"
    errors = 0
    for _ in range(40):
        size = rng.choice([0, 1, 3, 50, 400])
        path.write_bytes(bytes(rng.randrange(256) for _ in range(size)))
        for case in fuzz.CASES:
            for strict in (True, False):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", VocabularyWarning)
                    try:
                        case.read(path, strict)
                    except SapbertError as err:
                        errors += 1
                        assert "\n" not in str(err) and "random.bin" in str(err)
                        assert strict or case.kind == "json"  # lenient line readers skip, they do not raise
    assert errors > 0
