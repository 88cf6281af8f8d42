#!/bin/bash
# Device call 5 (after ../gpu-rr-2026-11-26/call_setup.sh and the uploads, same warm machine), or later calls on the
# warm machine (each step is skipped when its output exists): the mpnet chain of NCBI-disease dev's choice (SAP 700
# steps, DHNS on NCBI-disease train + BC5CDR train, the memory; seed $SEED) as in ../gpu-rr-2026-11-26, with its
# re-ranker trained with `--context-words 8` (the `best` workflow's default since 2026-11-27) from all-mpnet-base-v2,
# seed $RR_SEED. Then `evaluate` with the re-ranker: NCBI-disease dev with the memory tuned per protocol, and with
# dev's settings NCBI-disease test and BC5CDR-disease dev. Reports go to $OUT as soon as they exist.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
D=${D:-/root/devsite}; OUT=${OUT:-/tmp/out}; W=${W:-$D/mpnet}; DATA=${DATA:-$D/data}
SEED=${SEED:-42}; RR_SEED=${RR_SEED:-42}; CTX=${CTX:-8}; N=rr-ctx$CTX-s$RR_SEED
mkdir -p "$OUT" "$W"
[ -f "$D/call_a.done" ] || { echo "a fresh machine: call_setup.sh did not run here"; exit 3; }
export PYTHONPATH=$PWD:$D/site
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
finish() { tar -C "$W" -czf "$OUT/$N-logs.tar.gz" $(cd "$W" && ls *.log sap/train_config.json dhns/*.json* $N/*.json* $N-*-misses.jsonl 2>/dev/null); ls -l "$OUT"; date -u; }
trap finish EXIT
T=$(date +%s); lap() { local now; now=$(date +%s); echo "$1: $((now - T)) s"; T=$now; }
if [ ! -f "$W/mpnet/config.json" ]; then
  [ "$(cat "$D"/parts/mpnet-fp16.tar.xz.part* | md5sum | cut -c1-32)" = "${XZ_MD5:-7e18a17ce11ba83b9e20e4193ef82a36}" ] \
      || { echo "the uploaded parts are not the whole xz tar"; ls -l "$D/parts"; exit 4; }
  cat "$D"/parts/mpnet-fp16.tar.xz.part* | xz -T4 -dc | tar -C "$W" -xf - || exit 4
  python3 benchmarks/results/gpu-sap-2026-11-26/convert_model.py "$W/mpnet-fp16" "$W/mpnet" float32 2>&1 | tail -1 || exit 4
  lap "unpack"
fi
V="--vocab $DATA/medic/medic_06Jul2012.txt --spell-check $DATA/medic/ncbi-spell-check.txt"
NCBI=$DATA/ncbi-disease; CDR=$DATA/bc5cdr
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
if [ ! -f "$W/sap/model/config.json" ]; then
  python3 -m spacy_sapbert train "$D/pairs.txt" --model "$W/mpnet" --output "$W/sap" --pooling mean --max-length 25 \
      --batch-size 256 --lr 0.00002 --max-steps 700 --seed $SEED --checkpoint-every 100000 --encode-chunk 0 \
      --no-progress --overwrite > "$W/sap.log" 2>&1 || { echo "sap failed"; tail -5 "$W/sap.log"; exit 5; }
  lap "sap"
fi
if [ ! -f "$W/dhns/model/config.json" ]; then
  python3 -m spacy_sapbert train-dhns "$NCBI/NCBItrainset_corpus.txt" "$CDR/CDR_TrainingSet.PubTator.txt" $LABELS $V \
      --model "$W/sap/model" --output "$W/dhns" --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 \
      --temperature 0.01 --lr 0.00002 --epochs 3 --seed $SEED --no-progress --overwrite > "$W/dhns.log" 2>&1 \
      || { echo "dhns failed"; tail -5 "$W/dhns.log"; exit 6; }
  lap "dhns"
fi
if [ ! -f "$W/linker/config.cfg" ]; then
  python3 -m spacy_sapbert build-index "$DATA/medic/medic_06Jul2012.txt" "$W/linker" --model "$W/dhns/model" --pooling mean \
      --max-length 25 --k 10 --label '' --remove-punctuation --spell-check "$DATA/medic/ncbi-spell-check.txt" --overwrite \
      > "$W/build-index.log" 2>&1 || { echo "build-index failed"; tail -3 "$W/build-index.log"; exit 7; }
  lap "build-index"
fi
if [ ! -f "$W/$N/model/config.json" ]; then
  python3 -m spacy_sapbert train-reranker "$NCBI/NCBItrainset_corpus.txt" "$CDR/CDR_TrainingSet.PubTator.txt" $LABELS \
      --model "$W/mpnet" --pipeline "$W/linker" --output "$W/$N" --epochs 2 --seed $RR_SEED --context-words $CTX \
      --no-progress --overwrite > "$W/$N-train.log" 2>&1 || { echo "train-reranker failed"; tail -5 "$W/$N-train.log"; exit 8; }
  lap "train-reranker $N"; tail -1 "$W/$N/train_log.jsonl"
fi
M="--model $W/dhns/model --reranker $W/$N/model --pooling mean --cache-dir $W/cache"
score() {  # name, args...
  local name=$1; shift
  python3 -m spacy_sapbert evaluate "$@" $M --output "$W/$N-$name.json" --errors "$W/$N-$name-misses.jsonl" \
      > "$W/$N-$name.log" 2>&1 || { echo "evaluate $name failed"; tail -3 "$W/$N-$name.log"; return 1; }
  cp "$W/$N-$name.json" "$OUT/"; echo "=== $N $name $(date -u +%T)"; grep "^|" "$W/$N-$name.log"
}
[ -f "$W/$N-dev.json" ] || score dev "$NCBI/NCBIdevelopset_corpus.txt" $V --train "$NCBI/NCBItrainset_corpus.txt" \
    --memory "$NCBI/NCBItrainset_corpus.txt" --tune-memory || exit 9
lap "dev"
[ -f "$W/$N-ncbi-test.json" ] || score ncbi-test "$NCBI/NCBItestset_corpus.txt" $V --train "$NCBI/NCBItrainset_corpus.txt" \
    --train "$NCBI/NCBIdevelopset_corpus.txt" --memory "$NCBI/NCBItrainset_corpus.txt" --memory "$NCBI/NCBIdevelopset_corpus.txt" \
    --memory-settings "$W/$N-dev.json" &
[ -f "$W/$N-bc5cdr.json" ] || score bc5cdr "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Disease $V \
    --train "$CDR/CDR_TrainingSet.PubTator.txt" --memory "$CDR/CDR_TrainingSet.PubTator.txt" --memory-settings "$W/$N-dev.json" &
wait
lap "test + bc5cdr"
