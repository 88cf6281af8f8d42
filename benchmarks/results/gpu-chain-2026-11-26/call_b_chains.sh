#!/bin/bash
# Device call B (same warm machine as call A; carry .dev/p/m): the biosyn dev choice's MiniLM chain, retrained on
# the GPU because its CPU-trained models were lost with the run folder:
#   1. SAP: the workflow's `train` step (the pairs of `extract` + `pairs`: MEDIC + MeSH C/D, 50 pairs a concept,
#      seed 42), 700 steps of 256 pairs, lr 2e-5, mean pooling, max length 25; the whole micro-batch per forward
#      pass (the CUDA default); checkpoints off (they do not change the steps);
#   2. DHNS on NCBI-disease train + BC5CDR train (Disease), the project's settings (3 epochs, batch 32, 4 hard
#      negatives, tau 0.01, lr 2e-5).
# For each SEED in $SEEDS (the first is the workflow's 42), the DHNS model comes back as float16 in parts under
# the tool's 16 MB per file; scoring happens on the development machine.
set -u
export PYTHONUNBUFFERED=1
D=${D:-/root/devsite}; R=benchmarks/results/gpu-chain-2026-11-26
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f "$D/call_a.done" ] || { echo "a fresh machine: call A did not run here"; exit 3; }
export PYTHONPATH=$PWD:$D/site
date -u
python3 benchmarks/results/gpu-sap-2026-11-26/convert_model.py .dev/p/m/minilm-fp16 $D/minilm float32 || exit 4
DATA=$D/data
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
for SEED in ${SEEDS:-42 43}; do
  W=$D/seed$SEED; mkdir -p $W
  S0=$(date +%s)
  python3 -m spacy_sapbert train $D/pairs.txt --model $D/minilm --output $W/sap --pooling mean --max-length 25 \
      --batch-size 256 --lr 0.00002 --max-steps 700 --seed $SEED --checkpoint-every 100000 --encode-chunk 0 --no-progress > $W/sap.log 2>&1 \
      || { echo "sap $SEED failed"; tail -5 $W/sap.log; exit 5; }
  S1=$(date +%s)
  python3 -m spacy_sapbert train-dhns $DATA/ncbi-disease/NCBItrainset_corpus.txt $DATA/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS \
      --vocab $DATA/medic/medic_06Jul2012.txt --spell-check $DATA/medic/ncbi-spell-check.txt --model $W/sap/model \
      --output $W/dhns --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 --temperature 0.01 --lr 0.00002 \
      --epochs 3 --seed $SEED --no-progress > $W/dhns.log 2>&1 || { echo "dhns $SEED failed"; tail -5 $W/dhns.log; exit 6; }
  S2=$(date +%s)
  echo "seed $SEED: sap $((S1 - S0)) s, dhns $((S2 - S1)) s"
  python3 $R/../gpu-sap-2026-11-26/convert_model.py $W/dhns/model $W/dhns-fp16 float16 | tail -1
  tar -C $W -cf - dhns-fp16 | split -b 15000000 -d - "$OUT/seed$SEED-dhns-fp16.tar.part"
  tar -C $W -czf "$OUT/seed$SEED-logs.tar.gz" sap.log dhns.log sap/train_log.jsonl sap/train_config.json \
      $(cd $W && ls dhns/*.json* 2>/dev/null)
done
ls -la "$OUT"; date -u
