#!/bin/bash
# Device call 1 (run from the repository root): unpack the carried Python packages and pairs into
# $D (outside the checkout, so that they survive until call 2 on the same warm machine), then time
# the project's `train` command on the GPU for a MiniLM-size and a BERT-base-size (all-mpnet-base-v2
# architecture, random weights) encoder, each with --encode-chunk 64 (the default then) and with 512
# (the whole micro-batch of 256 pairs in one forward pass).
set -u
export PYTHONUNBUFFERED=1
D=${D:-/root/devsite}
S=.dev/s
R=benchmarks/results/gpu-sap-2026-11-26
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" "$D/site" "$D/runs"
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ -z "${SKIP_SITE:-}" ]; then tar -C "$D/site" -xJf "$S/site2.tar.xz" && cp -r "$S"/extra/* "$D/site/" || exit 2; fi
gunzip -c "$S/pairs.txt.gz" > "$D/pairs.txt" || exit 2
export PYTHONPATH=$PWD:$D/site
python3 -c "import sys, torch, transformers, spacy, faiss, spacy_sapbert; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'spacy', spacy.__version__, 'faiss', faiss.__version__)" || exit 3
python3 $R/convert_model.py $S/cfg/minilm $D/minilm-random random || exit 4
python3 $R/convert_model.py $S/cfg/mpnet $D/mpnet-random random || exit 4
wc -l "$D/pairs.txt"
time_run() {  # name model chunk steps
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 > "$D/runs/$1.smi.csv" &
    local smi=$!
    python3 -m spacy_sapbert train "$D/pairs.txt" --model "$2" --output "$D/runs/$1" --pooling mean --max-length 25 \
        --batch-size 256 --lr 0.00002 --max-steps "$4" --seed 42 --checkpoint-every 100000 --encode-chunk "$3" --no-progress \
        > "$D/runs/$1.log" 2>&1 || { echo "run $1 failed:"; tail -5 "$D/runs/$1.log"; }
    kill $smi
}
START=$(date +%s)
time_run minilm-chunk64 $D/minilm-random 64 ${MINILM_STEPS:-60}
time_run minilm-chunk512 $D/minilm-random 512 ${MINILM_STEPS:-60}
time_run mpnet-chunk64 $D/mpnet-random 64 ${MPNET_STEPS:-40}
time_run mpnet-chunk512 $D/mpnet-random 512 ${MPNET_STEPS:-40}
echo "timed runs: $(( $(date +%s) - START )) s"
python3 $R/summarize.py $D/runs | tee "$OUT/call1-summary.txt"
# the faster MiniLM chunk and its pairs/s, for call 2
python3 - "$D" <<'PY'
import json, statistics, sys
from pathlib import Path
d = Path(sys.argv[1])
best = None
for chunk in (64, 512):
    log = d / "runs" / f"minilm-chunk{chunk}" / "train_log.jsonl"
    if log.exists():
        rates = [json.loads(l)["pairs_per_s"] for l in log.read_text().splitlines() if l.strip()]
        rates = rates[1:] or rates  # the first window holds the warm-up
        if rates and (best is None or statistics.median(rates) > best[1]):
            best = (chunk, statistics.median(rates))
print("call 2 will use", best)
(d / "call2.json").write_text(json.dumps({"chunk": best[0], "pairs_per_s": best[1]}) if best else "{}")
PY
tar -C "$D/runs" -czf "$OUT/call1-runs.tar.gz" --exclude=checkpoints --exclude=model .
date -u
