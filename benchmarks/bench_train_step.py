"""Speed of one SAP training step, two ways side by side in one run: one padded batch of 2 x 256 names
beside length-sorted chunks (`--compare chunking`), or float32 beside bfloat16 autocast on CPU
(`--compare precision`, the trainers' `--cpu-bf16`; both in chunks of 64).

The same batches (seeded random draws of real pairs: MEDIC + MeSH C/D synonyms) go through the same
model, with every forward pass on all 512 names at once (the old trainer, `encode_chunk` >= 512) and in
length-sorted chunks (`encode_chunk` 64, the default). Each step is forward + mining + loss + backward +
AdamW, as in the trainer. Prints seconds per step and pairs/s of both, interleaved so that both see the
same machine load.

Usage: python benchmarks/bench_train_step.py PAIRS_FILE [--model all-MiniLM-L6-v2] [--pooling mean] [--steps 5]
       [--compare chunking|precision]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from spacy_sapbert.encoder import load_pretrained
from spacy_sapbert.training.checkpoints import MixedPrecision
from spacy_sapbert.training.losses import make_loss, make_miner, sap_loss
from spacy_sapbert.training.pairs import PairsFile
from spacy_sapbert.training.trainer import TrainConfig, _embed


def timed_step(model, tokenizer, optimizer, batch, config: TrainConfig, miner, loss_fn) -> float:
    """Seconds of one trainer step on `batch`: forward (under the config's autocast), mining, loss,
    backward, optimizer."""
    start = time.perf_counter()
    with MixedPrecision(torch.device("cpu"), config.amp, config.cpu_bf16).autocast():
        embeddings, labels, _ = _embed(model, tokenizer, batch, config, "cpu")
    sap_loss(embeddings, labels, miner, loss_fn).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--pooling", default="mean")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--compare", choices=["chunking", "precision"], default="chunking")
    args = parser.parse_args()

    tokenizer, model = load_pretrained(args.model)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    miner, loss_fn = make_miner(0.2), make_loss()
    pairs = PairsFile(args.pairs)
    generator = torch.Generator().manual_seed(0)
    variants = {  # name -> (encode_chunk, cpu_bf16)
        "chunking": {"one padded batch": (2 * args.batch_size, False), "length-sorted chunks of 64": (64, False)},
        "precision": {"float32": (64, False), "bfloat16 autocast": (64, True)},
    }[args.compare]
    times = {name: [] for name in variants}
    for step in range(args.steps + 1):  # step 0 warms up both
        batch = pairs.batch(torch.randint(len(pairs), (args.batch_size,), generator=generator).tolist())
        for name, (chunk, bf16) in variants.items():
            config = TrainConfig(
                model=args.model, output="-", pairs=args.pairs, pooling=args.pooling, encode_chunk=chunk, cpu_bf16=bf16,
            )
            seconds = timed_step(model, tokenizer, optimizer, batch, config, miner, loss_fn)
            if step:
                times[name].append(seconds)
    print(f"model {args.model}, {args.batch_size} pairs per step, {torch.get_num_threads()} threads, {args.steps} steps each")
    print(f"| {args.compare} | s/step (median) | pairs/s |")
    print("|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {args.batch_size / median:.0f} |")


if __name__ == "__main__":
    main()
