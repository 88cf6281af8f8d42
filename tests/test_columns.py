import os
import subprocess
import sys

import numpy
import pytest

from spacy_sapbert import columns
from spacy_sapbert.columns import HashLookup, StringColumn, arrays_from_msg, arrays_to_msg, read_arrays, write_arrays
from spacy_sapbert.errors import IndexFormatError
from spacy_sapbert.kb import Concept, ConceptTable

STRINGS = ["heart failure", "", "Ménière", "眩暈", "heart failure", "a\x00b"]


def test_a_string_column_holds_any_unicode_and_empty_strings():
    column = StringColumn.from_strings(STRINGS)
    assert len(column) == 6 and list(column) == STRINGS
    assert column[2] == "Ménière" and column[-1] == "a\x00b" and column[1:4] == STRINGS[1:4]
    assert column.offsets.tolist()[:3] == [0, 13, 13]
    with pytest.raises(IndexError):
        column[6]
    assert list(column.extended(["new", "眩"])) == STRINGS + ["new", "眩"]
    assert list(StringColumn.from_strings([])) == []


def test_a_string_column_refuses_offsets_that_do_not_fit_its_blob():
    column = StringColumn.from_strings(["abc", "de"])
    with pytest.raises(ValueError, match="offsets run from 0 to 4, not 0 to 5"):
        StringColumn(column.blob, numpy.array([0, 3, 4]))


def test_the_hash_lookup_finds_first_positions_even_when_every_hash_collides(monkeypatch):
    lookup = HashLookup.build(STRINGS)
    assert [STRINGS[p] for p in lookup.candidates("heart failure")] == ["heart failure", "heart failure"]
    assert lookup.candidates("heart failure") == [0, 4] and lookup.candidates("absent") == []
    monkeypatch.setattr(columns, "string_hash", lambda string: 7)
    colliding = ConceptTable.from_concepts(
        [Concept("A", "x", alt_ids=["B2", "shared"]), Concept("B", "y", alt_ids=["shared", "A"]), Concept("C", "z")]
    )
    assert [colliding.row(i) for i in ("A", "B", "C", "B2", "shared", "nope")] == [0, 1, 2, 0, 0, None]


def test_hashes_are_fixed_values_not_pythons_salted_hash():
    """Saved look-ups hold these hashes: a change of the function would make every saved index miss ids."""
    code = "from spacy_sapbert.columns import string_hash; print(string_hash('C0011849'))"
    runs = [int(subprocess.check_output([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed})) for seed in ("1", "2")]
    assert runs == [0x88E7083790B02057] * 2


def test_arrays_round_trip_through_files_and_messages(tmp_path):
    arrays = {**StringColumn.from_strings(STRINGS).arrays("s"), **HashLookup.build(STRINGS).arrays("h")}
    dtypes = {key: str(array.dtype) for key, array in arrays.items()}
    write_arrays(tmp_path / "t", arrays)
    for loaded in (read_arrays(tmp_path / "t", dtypes), arrays_from_msg(arrays_to_msg(arrays), dtypes)):
        assert sorted(loaded) == sorted(arrays)
        for key in arrays:
            assert numpy.array_equal(loaded[key], arrays[key]) and loaded[key].dtype == arrays[key].dtype
    assert list(StringColumn.from_arrays(read_arrays(tmp_path / "t", dtypes), "s")) == STRINGS
    with pytest.raises(ValueError, match="s.offsets holds <f8, not int64"):
        arrays_from_msg({**arrays_to_msg(arrays), "s.offsets": ["<f8", b""]}, dtypes)
    (tmp_path / "t" / "s.utf8.npy").unlink()
    with pytest.raises(IndexFormatError, match="t/s.utf8.npy is missing"):
        read_arrays(tmp_path / "t", dtypes)


def test_a_column_equals_the_same_strings_in_the_same_order():
    column = StringColumn.from_strings(STRINGS)
    assert column == STRINGS and column == tuple(STRINGS) and column == StringColumn.from_strings(STRINGS)
    assert column != STRINGS[::-1] and column != STRINGS[:-1] and column != StringColumn.from_strings(STRINGS[:-1])
