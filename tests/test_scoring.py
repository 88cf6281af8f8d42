"""The linker's registered scorer: `nlp.evaluate` and `spacy evaluate` score links with alternative ids resolved."""
import json
import subprocess
import sys

import pytest
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_sapbert.kb import Concept
from spacy_sapbert.pipeline import build_pipeline, save_pipeline
from spacy_sapbert.scoring import resolve_pair

CONCEPTS = [
    Concept("D1", "Heart failure", ["cardiac failure"]),
    Concept("D2", "Liver cancer", ["hepatoma"]),
    Concept("OMIM:3", "Kidney disease", ["nephropathy"], alt_ids=["D4"]),
]
PRIMARY = {"D4": "OMIM:3"}.get


@pytest.mark.parametrize(
    "gold, pred, expected",
    [
        ("D4", "OMIM:3", ("OMIM:3", "OMIM:3")),  # gold is an alternative id of the predicted concept
        ("OMIM:3", "D4", ("OMIM:3", "OMIM:3")),  # prediction is an alternative id of the gold concept
        ("D1|D4", "OMIM:3", ("OMIM:3", "OMIM:3")),  # a composite gold is met by any of its ids
        ("D1", "D2", ("D1", "D2")),
        ("-1", "D2", ("", "D2")),  # a gold without concept is a negative
        ("D1", "", ("D1", "")),
    ],
)
def test_resolve_pair(gold, pred, expected):
    assert resolve_pair(gold, pred, lambda i: PRIMARY(i, i)) == expected


TEXTS = [
    # (text, [(mention, gold kb id)]) -- the dictionary matcher finds every mention, the linker links its name
    ("Hepatoma and cardiac failure.", [("Hepatoma", "D2"), ("cardiac failure", "D9")]),  # right; wrong (fp + fn)
    ("Nephropathy seen.", [("Nephropathy", "D4")]),  # right through the alternative id D4 of OMIM:3
    ("Heart failure, then hepatoma.", [("Heart failure", "D1|D7"), ("hepatoma", "")]),  # composite right; NIL gold (fp)
]
# tp 3, fp 2, fn 1
EXPECTED = {"nel_micro_p": 3 / 5, "nel_micro_r": 3 / 4, "nel_micro_f": 2 * (3 / 5) * (3 / 4) / (3 / 5 + 3 / 4)}


def gold_docs(nlp):
    docs = []
    for text, mentions in TEXTS:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(text.index(m), text.index(m) + len(m), label="DISEASE", kb_id=kb) for m, kb in mentions]
        docs.append(doc)
    return docs


@pytest.fixture
def scored_pipeline(tiny_bert, one_thread):
    return build_pipeline(CONCEPTS, tiny_bert, label="DISEASE")


def test_nlp_evaluate_scores_links_with_alternative_ids_resolved(scored_pipeline):
    nlp = scored_pipeline
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.scorer is not None and nlp.config["components"]["sapbert_linker"]["scorer"] == {
        "@scorers": "spacy-sapbert.linker_scorer.v1"
    }
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in gold_docs(nlp)]
    scores = nlp.evaluate(examples)
    for key, value in EXPECTED.items():
        assert scores[key] == pytest.approx(value), key
    assert scores["nel_f_per_type"]["DISEASE"]["p"] == pytest.approx(3 / 5)


def test_a_linker_scores_only_its_labels(scored_pipeline):
    nlp = scored_pipeline
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in gold_docs(nlp)]
    nlp.get_pipe("sapbert_linker").labels = ["CHEMICAL"]
    assert nlp.evaluate(examples)["nel_micro_f"] == 0.0 and nlp.evaluate(examples)["nel_f_per_type"] == {}


def test_spacy_evaluate_scores_a_saved_pipeline(scored_pipeline, tmp_path):
    nlp = scored_pipeline
    save_pipeline(nlp, tmp_path / "pipe")
    DocBin(docs=gold_docs(nlp)).to_disk(tmp_path / "gold.spacy")
    out = subprocess.run(
        [sys.executable, "-m", "spacy", "evaluate", str(tmp_path / "pipe"), str(tmp_path / "gold.spacy"),
         "--output", str(tmp_path / "metrics.json")],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    for key, value in EXPECTED.items():
        assert metrics[key] == pytest.approx(value), key
    assert metrics["nel_f_per_type"]["DISEASE"]["r"] == pytest.approx(3 / 4)  # (spacy evaluate prints no NEL table; the JSON has it)


def test_a_pipeline_that_finds_no_mentions_warns_instead_of_scoring_zero_silently(tiny_bert, one_thread):
    """The README's quick-start linker has no mention detection: spacy evaluate ran it on the corpus text and
    reported link scores of 0 without a word."""
    from spacy_sapbert.errors import ConfigWarning

    nlp = build_pipeline(CONCEPTS, tiny_bert, label="")  # no dictionary matcher
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in gold_docs(nlp)]
    with pytest.warns(ConfigWarning, match=r"no predicted entity in 3 document\(s\) with 5 gold entities .* finds no mentions"):
        assert nlp.evaluate(examples)["nel_micro_f"] == 0.0
