"""Self-alignment pretraining (SapBERT, Liu et al. NAACL 2021): synonyms -> pairs -> metric learning.

Needs the ``train`` extra (pytorch-metric-learning, matplotlib). Modules: ``extract`` (synonym sets from
vocabularies and UMLS), ``pairs`` (positive pairs and the pairs file), ``losses`` (miner + multi-similarity
loss), ``loop`` (the training run both trainers share: device, mixed precision, checkpoints, log, plot),
``trainer`` (TrainConfig, train), ``dhns`` (DhnsConfig, train_dhns), ``options`` (command-line options
derived from the config dataclasses), ``commands`` (the ``extract``/``pairs``/``train``/``train-dhns`` CLI commands).
"""
from .extract import extract_synonyms, read_synonyms, umls_concepts, write_synonyms
from .pairs import PairsFile, concept_pairs, finetune_pairs, read_pairs, save_pairs, write_pairs
from .trainer import TrainConfig, train

__all__ = [
    "PairsFile",
    "TrainConfig",
    "concept_pairs",
    "extract_synonyms",
    "finetune_pairs",
    "read_pairs",
    "read_synonyms",
    "save_pairs",
    "train",
    "umls_concepts",
    "write_pairs",
    "write_synonyms",
]
