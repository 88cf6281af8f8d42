#!/bin/bash
# Device call 1 (from the repository root, carrying .dev/u/0): unpack the cp312 packages the machine lacks (spaCy,
# faiss-cpu, pytorch-metric-learning stacks), the corpora and the SAP pairs into $D, outside the checkout, where they
# stay while the machine is warm; then keep this call's part of the all-mpnet-base-v2 weights (call_upload.sh).
set -u
D=${D:-/root/devsite}; U=.dev/u/0
mkdir -p "$D/site"
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
tar -C "$D/site" -xJf "$U/site2.tar.xz" && tar -C "$D" -xJf "$U/data.tar.xz" && gunzip -c "$U/pairs.txt.gz" > "$D/pairs.txt" || exit 2
wc -l "$D/pairs.txt"
PYTHONPATH=$PWD:$D/site python3 -c "import sys, torch, transformers, spacy, faiss, pytorch_metric_learning, spacy_sapbert; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'spacy', spacy.__version__, 'faiss', faiss.__version__)" || exit 3
touch "$D/call_a.done"
