"""Copy a Hugging Face encoder folder with its weights in another dtype, or with fresh random weights.

    python convert_model.py SRC DST float16|float32|random

float16 halves the weights so that MiniLM fits the device tool's 64 MiB transfer; float32 brings such a
copy back to the dtype training and inference expect; random keeps SRC's config and tokenizer and draws
new weights (seed 0), for timing an architecture whose weights cannot travel (all-mpnet-base-v2).
"""
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel

WEIGHT_FILES = {"model.safetensors", "pytorch_model.bin"}


def main(src: str, dst: str, mode: str) -> None:
    src_path, dst_path = Path(src), Path(dst)
    dst_path.mkdir(parents=True, exist_ok=True)
    for item in src_path.iterdir():
        if item.name in WEIGHT_FILES or item.name == "config.json":
            continue
        if item.is_dir():
            shutil.copytree(item, dst_path / item.name, dirs_exist_ok=True)
        else:
            shutil.copy2(item, dst_path / item.name)
    if mode == "random":
        torch.manual_seed(0)
        model = AutoModel.from_config(AutoConfig.from_pretrained(src))
    else:
        model = AutoModel.from_pretrained(src, dtype=getattr(torch, mode))
        model = model.to(getattr(torch, mode))
    model.save_pretrained(dst)
    print(f"{dst}: {sum(p.numel() for p in model.parameters()):,} parameters, {next(model.parameters()).dtype}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
