"""Speed of a SAP training step with bottleneck adapters beside full fine-tuning, in one run.

The same batches (seeded random draws of a pairs file) go through three copies of the encoder: full SAP
(every weight trained), adapters of reduction factor 16 and of factor 1 (the SapBERT paper's two
settings). Each step is forward + mining + loss + backward + AdamW over the trainable parameters, as in
the trainer; the variants take turns on each batch, so all see the same machine load. Prints trainable
parameters, seconds per step and pairs/s.

Usage: python benchmarks/bench_adapters.py PAIRS_FILE [--model MODEL] [--pooling mean] [--steps 5] [--batch-size 256]
"""
from __future__ import annotations

import argparse
import statistics

import torch
from bench_train_step import timed_step  # benchmarks/ is on sys.path when this script runs

from spacy_sapbert.adapters import add_adapters, trainable_parameters
from spacy_sapbert.encoder import encoder_fingerprint, load_pretrained
from spacy_sapbert.training.losses import make_loss, make_miner
from spacy_sapbert.training.pairs import PairsFile
from spacy_sapbert.training.trainer import TrainConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs")
    parser.add_argument("--model", required=True)
    parser.add_argument("--pooling", default="mean")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    variants = {}
    for name, factor in (("full SAP", 0), ("adapters, reduction 16", 16), ("adapters, reduction 1", 1)):
        tokenizer, model = load_pretrained(args.model)
        if factor:
            add_adapters(model, factor, encoder_fingerprint(model, tokenizer))
        if getattr(model, "pooler", None) is not None:  # unused by [CLS]/mean pooling, frozen as in the trainer
            model.pooler.requires_grad_(False)
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5, weight_decay=0.01)
        total = sum(p.numel() for p in model.parameters())
        variants[name] = (tokenizer, model, optimizer, trainable_parameters(model), total)
    miner, loss_fn = make_miner(0.2), make_loss()
    pairs = PairsFile(args.pairs)
    config = TrainConfig(model=args.model, output="-", pairs=args.pairs, pooling=args.pooling)
    generator = torch.Generator().manual_seed(0)
    times = {name: [] for name in variants}
    for step in range(args.steps + 1):  # step 0 warms up every variant
        batch = pairs.batch(torch.randint(len(pairs), (args.batch_size,), generator=generator).tolist())
        for name, (tokenizer, model, optimizer, _, _) in variants.items():
            seconds = timed_step(model, tokenizer, optimizer, batch, config, miner, loss_fn)
            if step:
                times[name].append(seconds)
    print(f"model {args.model}, {args.batch_size} pairs per step, {torch.get_num_threads()} threads, {args.steps} steps each")
    print("| variant | trainable parameters | s/step (median) | pairs/s |")
    print("|---|---|---|---|")
    for name, values in times.items():
        _, _, _, trainable, total = variants[name]
        median = statistics.median(values)
        print(f"| {name} | {trainable:,} of {total:,} ({100 * trainable / total:.2f}%) | {median:.2f} | {args.batch_size / median:.1f} |")


if __name__ == "__main__":
    main()
