#!/bin/bash
# Device call A (run from the repository root, carry .dev/p/s): unpack the Python packages this machine lacks
# (spaCy, faiss-cpu, pytorch-metric-learning stacks, cp312), the corpora and the SAP pairs into $D, outside
# the checkout, where they stay for call B on the same warm machine.
set -u
D=${D:-/root/devsite}; S=.dev/p/s
mkdir -p "$D/site"
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
tar -C "$D/site" -xJf "$S/site2.tar.xz" || exit 2
cp -r "$S/data" "$D/" && gunzip -c "$S/pairs.txt.gz" > "$D/pairs.txt" || exit 2
wc -l "$D/pairs.txt"
PYTHONPATH=$PWD:$D/site python3 -c "import sys, torch, transformers, spacy, faiss, pytorch_metric_learning, spacy_sapbert; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'spacy', spacy.__version__, 'faiss', faiss.__version__)" || exit 3
touch "$D/call_a.done"; date -u
