"""Seconds that the load-time checks of saved parts cost, beside loading the model they check: a re-ranker's
fingerprint (reranker.json `weights`), an ONNX export's digest (onnx_export.json), and the signature an index or
memory records for each file (meta.json `files`), on the offline MiniLM (or the model folder given).

Usage: python benchmarks/bench_load_checks.py [--model FOLDER]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def main() -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging

    from spacy_sapbert.encoder import encoder_fingerprint, offline_default_model
    from spacy_sapbert.io import file_digest, file_signature

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=offline_default_model())
    folder = Path(parser.parse_args().model)
    logging.set_verbosity_error()
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1)
    load = time.perf_counter() - started
    started = time.perf_counter()
    encoder_fingerprint(model, tokenizer)
    fingerprint = time.perf_counter() - started
    weights = next(folder.glob("*.safetensors"))
    started = time.perf_counter()
    file_digest(weights)
    digest = time.perf_counter() - started
    started = time.perf_counter()
    file_signature(weights)
    signature = time.perf_counter() - started
    print(f"| model | load as a re-ranker, s | fingerprint, s | digest of {os.path.getsize(weights) / 1e6:.0f} MB, s | signature, ms |")
    print("|---|---|---|---|---|")
    print(f"| {folder.parent.name}/{folder.name} | {load:.2f} | {fingerprint:.2f} | {digest:.3f} | {signature * 1000:.1f} |")


if __name__ == "__main__":
    main()
