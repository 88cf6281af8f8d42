"""How fast can an encoder go on this machine? The CPU's matmul rate against the encoder's work per name.

Prints the measured GFLOP/s of torch's float32 and bfloat16 matmuls (the bulk of a BERT forward pass;
bfloat16 runs on AMX / AVX512-BF16 where the CPU has them) at the given thread count, the mean word
pieces per MEDIC name, the forward FLOPs per name from the model's config (2 x multiply-adds of the
attention and feed-forward matrices, attention scores included), and so the names/s that a forward
pass at each matmul rate would reach: the ceiling for index building and cold-cache linking, whatever
the runtime. Also the padding of batches of 128 names cut by characters (the encoder before issue 13's
change) and by word pieces (`encoder.pooled_chunks` now): the share of the work spent on pad positions.

Usage: python benchmarks/bench_ceiling.py [--model all-MiniLM-L6-v2] [--model FOLDER] [--threads 2]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def matmul_gflops(dtype: str = "float32", size: int = 1024, seconds: float = 3.0) -> float:
    """GFLOP/s of repeated size x size matmuls in `dtype`."""
    import torch

    a, b = (torch.randn(size, size, dtype=getattr(torch, dtype)) for _ in range(2))
    a @ b  # warm-up
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        runs += 1
    return 2 * size**3 * runs / (time.perf_counter() - start) / 1e9


def forward_flops(config, tokens: float) -> float:
    """FLOPs of one BERT-style forward pass over `tokens` word pieces (embedding lookups are free)."""
    hidden, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_token = 2 * (4 * hidden * hidden + 2 * hidden * inter)  # Q, K, V, output; two feed-forward matrices
    attention = 2 * 2 * tokens * hidden  # scores and weighted sum, per token
    return layers * tokens * (per_token + attention)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from spacy_sapbert.encoder import length_chunks, resolve_model
    from spacy_sapbert.readers import read_vocabulary

    torch.set_num_threads(args.threads)
    rates = {dtype: matmul_gflops(dtype) for dtype in ("float32", "bfloat16")}
    for dtype, rate in rates.items():
        print(f"{dtype} matmul, {args.threads} threads: {rate:.1f} GFLOP/s")
    names = [n.lower() for c in read_vocabulary(args.data / "medic" / "medic_06Jul2012.txt", "medic") for n in c.names]
    print("| model | word pieces per MEDIC name (max 25) | padding, batches by characters / by pieces | GFLOP per name | ceiling names/s float32 / bfloat16 |")
    print("|---|---|---|---|---|")
    for model in args.model or ["all-MiniLM-L6-v2"]:
        folder = resolve_model(model)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        lengths = [len(ids) for ids in tokenizer(names, truncation=True, max_length=25)["input_ids"]]
        tokens = sum(lengths) / len(lengths)
        by_chars = padding_share(lengths, length_chunks([len(n) for n in names], 128))
        by_pieces = padding_share(lengths, length_chunks(lengths, 128))
        flops = forward_flops(AutoConfig.from_pretrained(folder), tokens)
        ceilings = " / ".join(f"{rate * 1e9 / flops:.0f}" for rate in rates.values())
        print(f"| {Path(model).name} | {tokens:.1f} | {100 * by_chars:.1f}% / {100 * by_pieces:.1f}% | {flops / 1e9:.3f} | {ceilings} |")


def padding_share(lengths, chunks) -> float:
    """The share of the word-piece positions of padded batches `chunks` (rows of `lengths`) that are padding."""
    padded = sum(max(lengths[i] for i in rows) * len(rows) for rows in chunks)
    return 1 - sum(lengths) / padded


if __name__ == "__main__":
    main()
