"""The train and train-dhns options are derived from the config dataclasses: every setting is an option,
and the value given on the command line is the value the trainer receives."""
import dataclasses

import pytest
from typer.testing import CliRunner

from spacy_sapbert.training.dhns import DhnsConfig
from spacy_sapbert.training.reranker import RerankerConfig
from spacy_sapbert.training.trainer import TrainConfig

# a value other than the default for each setting, as typed on the command line and as the config holds it
TRAIN_VALUES = {
    "model": ("m", "m"), "output": ("OUT", "OUT"), "batch_size": ("7", 7), "lr": ("0.003", 0.003),
    "weight_decay": ("0.5", 0.5), "epochs": ("3", 3), "max_steps": ("11", 11), "grad_accum": ("2", 2),
    "max_length": ("9", 9), "pooling": ("mean", "mean"), "alpha": ("1.5", 1.5), "beta": ("20", 20.0),
    "base": ("0.25", 0.25), "loss": ("ms-v3", "ms-v3"), "pos_margin": ("0.9", 0.9), "neg_margin": ("0.4", 0.4),
    "kge": ("kge/model", "kge/model"), "adapters": ("4", 4),
    "margin": ("0.3", 0.3), "miner_distance": ("cosine", "cosine"),
    "use_miner": (None, False), "warmup_steps": ("5", 5), "encode_chunk": ("13", 13), "seed": ("4", 4),
    "checkpoint_every": ("17", 17), "log_every": ("3", 3), "device": ("cpu", "cpu"), "amp": (None, False),
    "cpu_bf16": ("--cpu-bf16", True), "progress": (None, False),
}
DHNS_VALUES = {
    "model": ("m", "m"), "output": ("OUT", "OUT"), "vocab": (["v1", "v2"], ["v1", "v2"]), "vocab_format": ("medic", "medic"),
    "mesh_trees": (["C", "D"], ["C", "D"]), "labels": (["Disease"], ["Disease"]), "spell_check": ("spell.txt", "spell.txt"),
    "remove_punctuation": ("--keep-punctuation", False), "pooling": ("mean", "mean"), "max_length": ("9", 9),
    "context_window": ("16", 16),
    "batch_size": ("7", 7), "hard_negatives": ("2", 2), "temperature": ("0.05", 0.05), "lr": ("0.003", 0.003),
    "weight_decay": ("0.5", 0.5), "epochs": ("2", 2), "encode_chunk": ("13", 13), "seed": ("4", 4),
    "log_every": ("3", 3), "device": ("cpu", "cpu"), "amp": (None, False), "cpu_bf16": ("--cpu-bf16", True),
    "progress": (None, False),
}
RERANKER_VALUES = {
    "model": ("m", "m"), "pipeline": ("pipe", "pipe"), "output": ("OUT", "OUT"), "component": ("linker", "linker"),
    "labels": (["Disease"], ["Disease"]), "candidates": ("6", 6), "max_length": ("40", 40), "context_words": ("5", 5), "max_names": ("3", 3),
    "bi_temperature": ("0.2", 0.2), "batch_size": ("5", 5), "lr": ("0.003", 0.003), "weight_decay": ("0.5", 0.5),
    "epochs": ("2", 2), "seed": ("4", 4), "log_every": ("3", 3), "device": ("cpu", "cpu"), "amp": (None, False),
    "cpu_bf16": ("--cpu-bf16", True), "progress": (None, False),
}
FLAGS = {"labels": "--label"}


def command_line(values):
    args = []
    for name, (typed, _) in values.items():
        flag = FLAGS.get(name, "--" + name.replace("_", "-"))
        if typed is None:  # a boolean switched off
            args.append("--no-" + name.replace("_", "-"))
        elif isinstance(typed, str) and typed.startswith("--"):
            args.append(typed)
        else:
            for value in typed if isinstance(typed, list) else [typed]:
                args += [flag, value]
    return args


@pytest.mark.parametrize("command, module, function, config_class, values, positional, resume", [
    ("train", "spacy_sapbert.training.trainer", "train", TrainConfig, TRAIN_VALUES, ["pairs.txt"], ["--resume"]),
    ("train-dhns", "spacy_sapbert.training.dhns", "train_dhns", DhnsConfig, DHNS_VALUES, ["a.txt", "b.txt"], []),
    ("train-reranker", "spacy_sapbert.training.reranker", "train_reranker", RerankerConfig, RERANKER_VALUES, ["a.txt"], ["--resume"]),
])
def test_every_setting_is_an_option_that_reaches_the_config(monkeypatch, tmp_path, command, module, function, config_class, values, positional, resume):
    import importlib

    from spacy_sapbert.cli import app

    fields = {f.name for f in dataclasses.fields(config_class)}
    positional_field = "pairs" if config_class is TrainConfig else "corpora"
    assert set(values) | {positional_field} == fields  # the table above covers every setting
    received = []
    monkeypatch.setattr(importlib.import_module(module), function, lambda config, resume=False: received.append((config, resume)) or tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [command, *positional, *command_line(values), *resume])
    assert result.exit_code == 0, result.output
    (config, resumed), = received
    expected = {name: value for name, (_, value) in values.items()}
    expected[positional_field] = positional[0] if config_class is TrainConfig else positional
    assert dataclasses.asdict(config) == expected
    assert resumed == bool(resume)


def test_defaults_of_the_commands_are_the_configs_defaults(monkeypatch, tmp_path, tiny_bert):
    """Without options, the command builds the dataclass's defaults (pooling: what the folder declares)."""
    import spacy_sapbert.training.trainer as trainer
    from spacy_sapbert.cli import app

    received = []
    monkeypatch.setattr(trainer, "train", lambda config, resume=False: received.append(config) or tmp_path)
    result = CliRunner().invoke(app, ["train", "p.txt", "--model", tiny_bert, "--output", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert received == [TrainConfig(model=tiny_bert, output=str(tmp_path / "run"), pairs="p.txt", pooling="cls")]


# settings a resumed run may change without a word: where and how it runs, how long, what it shows and logs
# (the reranker's context_words and max_length are checked against its checkpoint's reranker.json instead)
RESUME_FREE = {"output", "epochs", "max_steps", "checkpoint_every", "log_every", "device", "amp", "cpu_bf16", "progress"}


@pytest.mark.parametrize("module, config_class, checked_elsewhere", [
    ("trainer", TrainConfig, set()), ("dhns", DhnsConfig, set()), ("reranker", RerankerConfig, {"context_words", "max_length"}),
])
def test_a_resume_compares_every_setting_that_changes_the_training(module, config_class, checked_elsewhere):
    """A new setting must be listed where resume compares it (or among the free ones here): never silently mixed."""
    import importlib

    trainer = importlib.import_module(f"spacy_sapbert.training.{module}")
    compared = set(trainer.TRAJECTORY_KEYS) | set(getattr(trainer, "FIXED_KEYS", ()))
    fields = {field.name for field in dataclasses.fields(config_class)}
    assert compared <= fields
    assert fields - compared - checked_elsewhere == RESUME_FREE & fields
