#!/bin/bash
# Device call 5 (after call_a_setup.sh and the uploads; same warm machine): the biosyn dev choice's chain with
# all-mpnet-base-v2 in place of MiniLM, then scored here, on the device, because a 12-layer model cannot come back
# (16 MiB a file, 8 files):
#   1. the float16 weights back to float32;
#   2. SAP: the workflow's `train` step with MiniLM's dev choice (700 steps of 256 pairs, lr 2e-5, mean pooling,
#      max length 25, the MEDIC + MeSH C/D pairs), the whole micro-batch per pass;
#   3. DHNS on NCBI-disease train + BC5CDR train (Disease), the project's settings (3 epochs, batch 32, 4 hard
#      negatives, tau 0.01, lr 2e-5);
#   4. `evaluate` (torch float32 on CUDA): untuned and SAP on NCBI-disease dev; the DHNS model on NCBI-disease dev
#      with the memory tuned per protocol (capture_grid.py also keeps every grid setting's ranks), then NCBI-disease
#      test and BC5CDR-disease dev with dev's settings, once.
#   With RR_BASE=FOLDER (a cross-encoder base, e.g. the offline MiniLM), also an index of MEDIC and a re-ranker
#   trained on both corpora's training mentions (the `best` workflow's recipe), scored in the same evaluations.
# Each report goes to $OUT as soon as it exists, so a run cut short still returns what it finished.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
D=${D:-/root/devsite}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f "$D/call_a.done" ] || { echo "a fresh machine: call A did not run here"; exit 3; }
export PYTHONPATH=$PWD:$D/site
R=benchmarks/results/gpu-mpnet-2026-11-26; DATA=${DATA:-$D/data}; SEED=${SEED:-42}; W=${W:-$D/mpnet}; mkdir -p "$W"
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
finish() { tar -C "$W" -czf "$OUT/logs.tar.gz" $(cd "$W" && ls *.log *.npz sap/train_log.jsonl sap/train_config.json dhns/*.json* rr/*.json* *-misses.jsonl 2>/dev/null); ls -l "$OUT"; date -u; }
trap finish EXIT
if [ ! -f "$W/mpnet/config.json" ]; then
  [ "$(cat "$D"/parts/mpnet-fp16.tar.part* | md5sum | cut -c1-32)" = "${MPNET_MD5:-86e679ac474e0f32a9b6b2938b09820c}" ] \
      || { echo "the uploaded parts are not the whole float16 tar"; ls -l "$D/parts"; exit 4; }
  cat "$D"/parts/mpnet-fp16.tar.part* | tar -C "$W" -xf - || exit 4
  python3 benchmarks/results/gpu-sap-2026-11-26/convert_model.py "$W/mpnet-fp16" "$W/mpnet" float32 2>&1 | tail -1 || exit 4
fi
V="--vocab $DATA/medic/medic_06Jul2012.txt --spell-check $DATA/medic/ncbi-spell-check.txt"
NCBI=$DATA/ncbi-disease; CDR=$DATA/bc5cdr
DEV="$NCBI/NCBIdevelopset_corpus.txt $V --train $NCBI/NCBItrainset_corpus.txt"
evaluate() {  # name, args...
  local name=$1; shift
  python3 -m spacy_sapbert evaluate "$@" --pooling mean --cache-dir "$W/cache" --output "$W/$name.json" \
      --errors "$W/$name-misses.jsonl" > "$W/$name.log" 2>&1 || { echo "evaluate $name failed"; tail -3 "$W/$name.log"; return 1; }
  cp "$W/$name.json" "$OUT/"; echo "=== $name $(date -u +%T)"; grep "^|" "$W/$name.log"
}
evaluate untuned-dev $DEV --model "$W/mpnet" &
S0=$(date +%s)
python3 -m spacy_sapbert train "$D/pairs.txt" --model "$W/mpnet" --output "$W/sap" --pooling mean --max-length 25 \
    --batch-size 256 --lr 0.00002 --max-steps ${SAP_STEPS:-700} --seed $SEED --checkpoint-every 100000 --encode-chunk 0 \
    --no-progress > "$W/sap.log" 2>&1 || { echo "sap failed"; tail -5 "$W/sap.log"; exit 5; }
S1=$(date +%s); echo "sap: $((S1 - S0)) s"
evaluate sap-dev $DEV --model "$W/sap/model" &
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
python3 -m spacy_sapbert train-dhns "$NCBI/NCBItrainset_corpus.txt" "$CDR/CDR_TrainingSet.PubTator.txt" $LABELS $V \
    --model "$W/sap/model" --output "$W/dhns" --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 \
    --temperature 0.01 --lr 0.00002 --epochs ${DHNS_EPOCHS:-3} --seed $SEED --no-progress > "$W/dhns.log" 2>&1 \
    || { echo "dhns failed"; tail -5 "$W/dhns.log"; exit 6; }
S2=$(date +%s); echo "dhns: $((S2 - S1)) s"; grep -o '"train_name_top1": [0-9.]*' "$W/dhns/train_log.jsonl"
wait
M="--model $W/dhns/model"
if [ -n "${RR_BASE:-}" ]; then  # optional: a re-ranker on this linker's candidates, as in the `best` workflow
  python3 -m spacy_sapbert build-index "$DATA/medic/medic_06Jul2012.txt" "$W/linker" --model "$W/dhns/model" --pooling mean \
      --max-length 25 --k 10 --label '' --remove-punctuation --spell-check "$DATA/medic/ncbi-spell-check.txt" --overwrite \
      > "$W/build-index.log" 2>&1 || { echo "build-index failed"; tail -3 "$W/build-index.log"; exit 8; }
  python3 -m spacy_sapbert train-reranker "$NCBI/NCBItrainset_corpus.txt" "$CDR/CDR_TrainingSet.PubTator.txt" $LABELS \
      --model "$RR_BASE" --pipeline "$W/linker" --output "$W/rr" --epochs 2 --seed $SEED --no-progress > "$W/rr.log" 2>&1 \
      || { echo "train-reranker failed"; tail -5 "$W/rr.log"; exit 8; }
  S3=$(date +%s); echo "index + re-ranker: $((S3 - S2)) s"
  M="$M --reranker $W/rr/model"  # every evaluation below also reports the rows with the re-ranker
fi
CAPTURE="$W/dhns-dev" python3 $R/capture_grid.py evaluate $DEV $M --memory "$NCBI/NCBItrainset_corpus.txt" --tune-memory \
    --pooling mean --cache-dir "$W/cache" --output "$W/dhns-dev.json" --errors "$W/dhns-dev-misses.jsonl" > "$W/dhns-dev.log" 2>&1 \
    || { echo "dhns-dev failed"; tail -3 "$W/dhns-dev.log"; exit 7; }
cp "$W/dhns-dev.json" "$OUT/"; echo "=== dhns-dev $(date -u +%T)"; grep "^|" "$W/dhns-dev.log"
evaluate dhns-ncbi-test "$NCBI/NCBItestset_corpus.txt" $V --train "$NCBI/NCBItrainset_corpus.txt" --train "$NCBI/NCBIdevelopset_corpus.txt" \
    --memory "$NCBI/NCBItrainset_corpus.txt" --memory "$NCBI/NCBIdevelopset_corpus.txt" $M --memory-settings "$W/dhns-dev.json" &
evaluate dhns-bc5cdr "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Disease $V --train "$CDR/CDR_TrainingSet.PubTator.txt" \
    --memory "$CDR/CDR_TrainingSet.PubTator.txt" $M --memory-settings "$W/dhns-dev.json" &
wait
