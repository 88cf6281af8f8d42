"""displaCy pages of linked entities: id links per source, the caption, escaping, and the page in a real headless browser."""
import html
import re
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.visualize import concept_url, displacy_doc

runner = CliRunner()


@pytest.mark.parametrize(
    "concept_id, url",
    [
        ("C0018801", "https://uts.nlm.nih.gov/uts/umls/concept/C0018801"),
        ("UMLS:C0018801", "https://uts.nlm.nih.gov/uts/umls/concept/C0018801"),
        ("MESH:D006333", "https://meshb.nlm.nih.gov/record/ui?ui=D006333"),
        ("D006333", "https://meshb.nlm.nih.gov/record/ui?ui=D006333"),
        ("MESH:C537014", "https://meshb.nlm.nih.gov/record/ui?ui=C537014"),
        ("C000609812", "https://meshb.nlm.nih.gov/record/ui?ui=C000609812"),
        ("OMIM:219700", "https://omim.org/entry/219700"),
        ("HP:0001250", "https://hpo.jax.org/browse/term/HP:0001250"),
        ("MONDO:0009061", "https://monarchinitiative.org/MONDO:0009061"),
        ("DOID:1485", "https://disease-ontology.org/?id=DOID:1485"),
        ("C00188011", None),  # 8 digits: neither a CUI nor a MeSH record
        ("RXNORM:1191", None),
    ],
)
def test_concept_url_follows_the_id_source(concept_id, url):
    assert concept_url(concept_id) == url


def test_an_entity_without_id_shows_its_label_only():
    doc_json = {"text": "a b", "ents": [{"start": 0, "end": 1, "label": "Disease", "kb_id": None, "name": None, "score": None}]}
    assert displacy_doc(doc_json)["ents"] == [{"start": 0, "end": 1, "label": "Disease"}]


@pytest.fixture
def mixed_source_pipeline(tmp_path, tiny_bert):
    """A saved pipeline (entity ruler, then a linker) over concepts from MeSH, HPO and OMIM; one name needs escaping."""
    import spacy

    from spacy_sapbert.kb import Concept

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"})
    ruler.add_patterns([{"label": "Disease", "pattern": text} for text in ("heart failure", "seizure", "cystic fibrosis")])
    linker = nlp.add_pipe("sapbert_linker", config={"model": tiny_bert})
    linker.initialize(
        vocabulary=[
            Concept("MESH:D006333", "Heart failure"),
            Concept("HP:0001250", "Seizure"),
            Concept("OMIM:219700", "Cystic fibrosis <CF> & co", ["cystic fibrosis"]),
        ]
    )
    nlp.to_disk(tmp_path / "pipe")
    return tmp_path / "pipe"


def write_page(pipeline, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("Heart failure after a seizure.\nCystic fibrosis.\n", encoding="utf8")
    page = tmp_path / "page.html"
    result = runner.invoke(app, ["visualize", "--pipeline", str(pipeline), "--file", str(text), "-o", str(page)])
    assert result.exit_code == 0, result.output
    return page


EXPECTED_LINKS = {
    "https://meshb.nlm.nih.gov/record/ui?ui=D006333": ("MESH:D006333", "Heart failure"),
    "https://hpo.jax.org/browse/term/HP:0001250": ("HP:0001250", "Seizure"),
    "https://omim.org/entry/219700": ("OMIM:219700", "Cystic fibrosis <CF> & co"),
}


def links(page_html: str) -> dict:
    """href -> unescaped link text of the page's <a> elements."""
    found = re.findall(r'<a [^>]*href="([^"]*)"[^>]*>(.*?)</a>', page_html, flags=re.S)
    return {html.unescape(href): html.unescape(" ".join(text.split())) for href, text in found}


def test_visualize_writes_a_page_with_id_links_names_and_scores(mixed_source_pipeline, tmp_path):
    page = write_page(mixed_source_pipeline, tmp_path).read_text(encoding="utf8")
    shown = links(page)
    assert set(shown) == set(EXPECTED_LINKS)
    for url, (concept_id, name) in EXPECTED_LINKS.items():
        caption_id, caption_name, score = shown[url].split(" · ")
        assert (caption_id, caption_name) == (concept_id, name)
        assert float(score) == pytest.approx(1.0, abs=0.01)  # each mention is a name of its concept
    assert "<CF>" not in page and "&lt;CF&gt;" in page  # the name is text, not markup


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def headless(*args: str) -> subprocess.CompletedProcess:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install chromium")
def test_the_page_renders_in_a_headless_browser(mixed_source_pipeline, tmp_path):
    import numpy
    from PIL import Image

    page = write_page(mixed_source_pipeline, tmp_path)
    dom = headless("--dump-dom", page.as_uri()).stdout
    shown = links(dom)  # the DOM the browser built, not the file
    assert {url: text.split(" · ")[:2] for url, text in shown.items()} == {url: list(ids) for url, ids in EXPECTED_LINKS.items()}

    screenshot = tmp_path / "page.png"
    headless(f"--screenshot={screenshot}", "--window-size=900,300", page.as_uri())
    pixels = numpy.asarray(Image.open(screenshot).convert("RGB"))
    # displaCy draws an entity on a #ddd box (its colour for labels it does not know): three of them
    boxes = int((pixels == (221, 221, 221)).all(axis=-1).sum())
    assert boxes > 3 * 500, boxes
