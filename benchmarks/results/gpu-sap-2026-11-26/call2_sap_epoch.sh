#!/bin/bash
# Device call 2 (same warm machine as call 1): SAP of the real all-MiniLM-L6-v2 weights on the merged
# open vocabularies (637,033 pairs, one epoch = 2,489 steps of 256 pairs), through the project's
# `train` step (`spacy project run train`), for at most TRAIN_SECONDS of steps at call 1's pairs/s.
# Brings back the trained weights in float16, cut into parts under the tool's 16 MB per file.
set -u
export PYTHONUNBUFFERED=1
D=${D:-/root/devsite}
R=benchmarks/results/gpu-sap-2026-11-26
TRAIN_SECONDS=${TRAIN_SECONDS:-330}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
date -u
[ -f "$D/call2.json" ] || { echo "no $D/call2.json: a fresh machine, call 1 did not run here"; exit 3; }
export PYTHONPATH=$PWD:$D/site
python3 $R/convert_model.py .dev/m/minilm-fp16 $D/minilm float32 || exit 4
read CHUNK STEPS < <(python3 -c "
import json; c = json.load(open('$D/call2.json'))
print(c['chunk'], min(2489, int(c['pairs_per_s'] * $TRAIN_SECONDS / 256)))")
echo "encode_chunk $CHUNK, $STEPS steps"
mkdir -p projects/sapbert/corpus && ln -sf "$D/pairs.txt" projects/sapbert/corpus/pairs.txt
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 1000 > "$OUT/call2-smi.csv" &
SMI=$!
START=$(date +%s)
python3 -m spacy project run train projects/sapbert --vars.base_model "$D/minilm" --vars.sap_steps "$STEPS" \
    --vars.checkpoint_every 100000 --vars.encode_chunk "$CHUNK" > "$OUT/call2-train.log" 2>&1
echo "train exit $?, $(( $(date +%s) - START )) s"
kill $SMI
T=projects/sapbert/training/sap
tail -3 $T/train_log.jsonl
python3 $R/convert_model.py $T/model $D/sap-fp16 float16 || exit 5
cp "$OUT/call2-smi.csv" "$OUT/call2-train.log" $T/ && rm "$OUT/call2-smi.csv" "$OUT/call2-train.log"
tar -C $T -czf "$OUT/call2-logs.tar.gz" train_log.jsonl train_config.json call2-smi.csv call2-train.log $(cd $T && ls loss.png 2>/dev/null)
tar -C "$D" -cf - sap-fp16 | split -b 15000000 -d - "$OUT/sap-fp16.tar.part"
ls -la "$OUT"
date -u
