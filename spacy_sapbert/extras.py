"""Optional libraries, imported when a command needs them, with an error naming the extra to install."""
from __future__ import annotations

import importlib
from types import ModuleType

from .errors import SapbertError

# import name -> (PyPI name, the spacy-sapbert extra that installs it)
OPTIONAL = {
    "sklearn": ("scikit-learn", "eval"),
    "matplotlib": ("matplotlib", "eval"),
    "pytorch_metric_learning": ("pytorch-metric-learning", "train"),
    "hypothesis": ("hypothesis", "test"),
    "pykeen": ("pykeen", "kge"),
    "onnxruntime": ("onnxruntime", "onnx"),
    "onnx": ("onnx", "onnx"),
    "onnxscript": ("onnxscript", "onnx"),
    "ray": ("ray[data]", "ray"),
}


class MissingExtraError(SapbertError):
    """An optional library that a command needs is not installed."""


def missing_extra_message(module: str) -> str:
    """What to install for the missing top-level module `module`."""
    package, extra = OPTIONAL.get(module, (module, "all"))
    return f"this needs the Python package {package}, which is not installed: pip install 'spacy-sapbert[{extra}]'"


def require(name: str) -> ModuleType:
    """Import `name` (e.g. "sklearn.feature_extraction.text"); a missing library raises MissingExtraError."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        top = (err.name or name).split(".")[0]
        if top not in OPTIONAL:
            raise
        raise MissingExtraError(missing_extra_message(top)) from err
