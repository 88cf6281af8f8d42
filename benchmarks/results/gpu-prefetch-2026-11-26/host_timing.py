"""Milliseconds of host work per SAP micro-batch (256 pairs, 512 names) on this machine's CPU: reading the
pairs, tokenizing, and padding either with `tokenizer.pad` (before) or `pad_rows` (after), as one chunk of 512
(the CUDA default) or as chunks of 64 (the CPU default). Mean over the first 50 micro-batches of epoch 0.

    python host_timing.py MODEL_FOLDER PAIRS_FILE
"""
import sys
import time

from transformers import AutoTokenizer

from spacy_sapbert.encoder import length_chunks, pad_rows
from spacy_sapbert.training.pairs import PairsFile
from spacy_sapbert.training.trainer import epoch_order, micro_batch

BATCHES = 50


def main(model: str, pairs_path: str) -> None:
    tokenizer = AutoTokenizer.from_pretrained(model)
    pairs = PairsFile(pairs_path)
    order = epoch_order(len(pairs), 1, 42, 0)
    totals = dict.fromkeys(["read pairs", "tokenize", "tokenizer.pad 512", "pad_rows 512", "tokenizer.pad 8x64", "pad_rows 8x64"], 0.0)
    for index in range(BATCHES):
        start = time.perf_counter()
        batch = pairs.batch(micro_batch(order, index, 256, 0, 1))
        totals["read pairs"] += time.perf_counter() - start
        texts = [a for _, a, _ in batch] + [b for _, _, b in batch]
        start = time.perf_counter()
        encoded = tokenizer(texts, truncation=True, max_length=25)
        totals["tokenize"] += time.perf_counter() - start
        lengths = [len(ids) for ids in encoded["input_ids"]]
        for chunk, label in ((512, "512"), (64, "8x64")):
            chunks = length_chunks(lengths, chunk)
            start = time.perf_counter()
            for rows in chunks:
                tokenizer.pad({key: [encoded[key][i] for i in rows] for key in encoded.keys()}, return_tensors="pt")
            totals[f"tokenizer.pad {label}"] += time.perf_counter() - start
            start = time.perf_counter()
            for rows in chunks:
                pad_rows(tokenizer, encoded, rows)
            totals[f"pad_rows {label}"] += time.perf_counter() - start
    pairs.close()
    for name, seconds in totals.items():
        print(f"{name:<20} {seconds / BATCHES * 1000:7.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
