"""Bottleneck adapters (Pfeiffer et al. 2020's configuration) for parameter-efficient SAP.

SapBERT's adapter variant (Liu et al. 2021, section 4) freezes the encoder and trains one small
bottleneck per transformer layer, placed after the layer's feed-forward block:

    h = LayerNorm(FFN(x) + x)            # the layer's own output, unchanged
    h = h + W_up(relu(W_down(h)))        # the adapter: hidden -> hidden / reduction_factor -> hidden

Reduction factor 16 trains about 1% of BERT-base's parameters, factor 1 about 13%. W_up starts at
zero, so an untrained adapter model encodes exactly as its base.

Written here rather than taken from a library: `adapters` (AdapterHub) pins transformers 4.x, which
this package has left, and `peft` has LoRA-style methods but no bottleneck adapters. The adapter is a
submodule of each layer's output module, run by a forward hook, so the base model's own code and its
state-dict names are untouched: a folder holds the base weights as Hugging Face writes them, plus
`adapter_model.safetensors` and `adapter_config.json` (the reduction factor and the fingerprint of the
base weights the adapters were trained on). Loading such a folder onto other base weights is refused.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Optional, Union

import torch
from torch import nn

from .encoder import same_encoder
from .errors import EncoderLoadError

__all__ = [
    "ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "BottleneckAdapter", "add_adapters", "adapter_settings", "base_state_dict",
    "feed_forward_outputs", "load_adapters", "save_adapters", "trainable_parameters",
]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_NAME = "sapbert_adapter"  # the submodule's name inside each layer's output module
# each transformer layer's feed-forward output (BERT, RoBERTa/XLM-R, MPNet, ELECTRA: encoder.layer.N.output)
FEED_FORWARD_OUTPUT = re.compile(r"(^|\.)layer\.\d+\.output$")


class BottleneckAdapter(nn.Module):
    """h + W_up(relu(W_down(h))), W_up zero-initialised (the identity before training)."""

    def __init__(self, hidden_size: int, reduction_factor: int):
        super().__init__()
        bottleneck = max(1, hidden_size // reduction_factor)
        self.down = nn.Linear(hidden_size, bottleneck)
        self.up = nn.Linear(bottleneck, hidden_size)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden + self.up(torch.relu(self.down(hidden)))


def _run_adapter(module: nn.Module, inputs, output):
    """Forward hook of a layer's output module (module level, so a model with adapters pickles)."""
    return getattr(module, ADAPTER_NAME)(output)


def feed_forward_outputs(model: nn.Module) -> List[nn.Module]:
    """The output module of each transformer layer's feed-forward block, in layer order."""
    found = [module for name, module in model.named_modules() if FEED_FORWARD_OUTPUT.search(name)]
    if not found:
        raise EncoderLoadError(
            f"adapters: no transformer layer output modules (encoder.layer.N.output) in {type(model).__name__}; "
            "bottleneck adapters support BERT-like encoders (BERT, RoBERTa, XLM-R, MPNet, ELECTRA)"
        )
    return found


def adapter_settings(model: nn.Module) -> Optional[Dict]:
    """The adapter settings a model carries (reduction_factor, base_fingerprint), or None."""
    return getattr(model, "sapbert_adapter_settings", None)


def add_adapters(model: nn.Module, reduction_factor: int, base_fingerprint: str) -> nn.Module:
    """Put a new (identity) bottleneck adapter after every layer's feed-forward block and freeze
    everything else, so that only the adapters train. `base_fingerprint` names the frozen weights."""
    if reduction_factor < 1:
        raise EncoderLoadError(f"adapters: reduction factor {reduction_factor} must be at least 1")
    if adapter_settings(model) is not None:
        raise EncoderLoadError("adapters: this model already has adapters")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    hidden = int(model.config.hidden_size)
    for module in feed_forward_outputs(model):
        module.add_module(ADAPTER_NAME, BottleneckAdapter(hidden, reduction_factor))
        module.register_forward_hook(_run_adapter)
    model.sapbert_adapter_settings = {"type": "pfeiffer", "reduction_factor": int(reduction_factor),
                                      "base_fingerprint": base_fingerprint}
    return model


def _is_adapter_key(name: str) -> bool:
    return f".{ADAPTER_NAME}." in name


def base_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """The model's state dict without the adapters: what the base model's own files hold."""
    return {name: tensor for name, tensor in model.state_dict().items() if not _is_adapter_key(name)}


def save_adapters(folder: Union[str, Path], model: nn.Module) -> None:
    """adapter_model.safetensors (the adapters' weights) and adapter_config.json into `folder`."""
    from safetensors.torch import save_file

    folder = Path(folder)
    weights = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items() if _is_adapter_key(name)}
    save_file(weights, str(folder / ADAPTER_WEIGHTS))
    (folder / ADAPTER_CONFIG).write_text(json.dumps(adapter_settings(model), indent=2) + "\n", encoding="utf8")


def load_adapters(folder: Union[str, Path], model: nn.Module, base_fingerprint: str) -> nn.Module:
    """Attach the adapters saved in `folder` to `model` (its base weights already loaded). Adapters
    trained on other base weights, or files that do not fit the model, are refused."""
    from safetensors.torch import load_file

    folder = Path(folder)
    config_path, weights_path = folder / ADAPTER_CONFIG, folder / ADAPTER_WEIGHTS
    try:
        settings = json.loads(config_path.read_text(encoding="utf8"))
        reduction_factor, trained_on = int(settings["reduction_factor"]), str(settings["base_fingerprint"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise EncoderLoadError(f"{config_path}: not a readable adapter config ({err})") from err
    if not same_encoder(trained_on, base_fingerprint):
        raise EncoderLoadError(
            f"{config_path}: these adapters were trained on base weights {trained_on}, but the weights in {folder} "
            f"are {base_fingerprint}; put the adapters beside the base model they were trained with"
        )
    add_adapters(model, reduction_factor, trained_on)
    if not weights_path.exists():
        raise EncoderLoadError(f"{weights_path}: missing (the folder has {ADAPTER_CONFIG} but no adapter weights)")
    weights = load_file(str(weights_path))
    expected = {name for name in model.state_dict() if _is_adapter_key(name)}
    if set(weights) != expected:
        raise EncoderLoadError(
            f"{weights_path}: its tensors do not fit this model's {len(expected)} adapter tensors "
            f"({len(set(weights) - expected)} unknown, {len(expected - set(weights))} missing)"
        )
    try:
        model.load_state_dict(weights, strict=False)
    except RuntimeError as err:  # a tensor of another shape (another reduction factor or hidden size)
        raise EncoderLoadError(f"{weights_path}: does not fit this model ({str(err).splitlines()[-1].strip()})") from err
    return model


def trainable_parameters(model: nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
