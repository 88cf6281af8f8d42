#!/bin/bash
# Issue 15's last measurement, prepared for a session lent a GPU: the mpnet chain of NCBI-disease dev's choice
# (all-mpnet-base-v2: SAP 700 steps, DHNS on NCBI-disease train + BC5CDR train, the mention memory; seed $SEED) with
# the `best` workflow's re-ranker stage as the workflow runs it: two seeds of the re-ranker from all-mpnet-base-v2,
# combined (combine-rerankers), and rerank_weight chosen on NCBI-disease dev. Then NCBI-disease test and
# BC5CDR-disease dev, scored once at dev's choice.
#
# Dev chooses, before anything else is scored, as `add-reranker --tune-weight-on` does: the best strict acc@1 of the
# memory + re-ranker row (the gold mentions linked through the pipeline), the smaller weight on a tie, over the
# --tune-weight-on grid. The weights are scored in one `evaluate` (each pair's logit computed once).
#
# Every step is skipped when its output exists, so it runs across calls on one warm machine:
#   STAGE=train  the chain and the two re-rankers (about 390 s on an H200: unpack 17, SAP 70, DHNS 85, index 28,
#                two re-rankers 2 x 89; figures of benchmarks/results/gpu-ctx-rr-2026-11-27)
#   STAGE=score  dev with every weight, the choice, test and BC5CDR (about 350 s, an estimate)
#   STAGE=all    both (over one call's 600 s on the H200)
# Before it, on a fresh machine: the setup and upload calls of benchmarks/results/gpu-rr-2026-11-26 (README there).
# Reports and logs go to $OUT as soon as they exist.
#
# Settings from the environment (defaults: the device layout of those calls):
#   D (/root/devsite), W ($D/mpnet: work folder), DATA ($D/data), OUT (/tmp/out), BASE ($W/mpnet, unpacked from the
#   uploaded parts when absent), PAIRS ($D/pairs.txt: SAP pairs), SEED (42), SEEDS ("42 43": re-ranker seeds), CTX (0:
#   the mention alone, NCBI-disease dev's choice on this chain, BENCHMARKS "The mpnet re-ranker with context"),
#   SAP_STEPS (700), DHNS_EPOCHS (3), RR_EPOCHS (2), WEIGHTS (the --tune-weight-on grid), PYTHON (python3).
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
D=${D:-/root/devsite}; W=${W:-$D/mpnet}; DATA=${DATA:-$D/data}; OUT=${OUT:-/tmp/out}; BASE=${BASE:-$W/mpnet}
PAIRS=${PAIRS:-$D/pairs.txt}; SEED=${SEED:-42}; SEEDS=${SEEDS:-42 43}; CTX=${CTX:-0}; STAGE=${STAGE:-all}
SAP_STEPS=${SAP_STEPS:-700}; DHNS_EPOCHS=${DHNS_EPOCHS:-3}; RR_EPOCHS=${RR_EPOCHS:-2}
WEIGHTS=${WEIGHTS:-0.1 0.2 0.3 0.5 0.7 1.0 1.5}; PY=${PYTHON:-python3}
E=ens-ctx$CTX-$(echo $SEEDS | tr ' ' '-')
mkdir -p "$OUT" "$W"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}:$D/site
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU"
finish() {
  local logs; logs=$(cd "$W" && ls *.log sap/train_config.json dhns/*.json* rr-*/*.json* $E-*-misses.jsonl 2>/dev/null)
  [ -z "$logs" ] || tar -C "$W" -czf "$OUT/$E-logs.tar.gz" $logs; ls -l "$OUT"; date -u
}
trap finish EXIT
T=$(date +%s); lap() { local now; now=$(date +%s); echo "$1: $((now - T)) s"; T=$now; }
fail() { echo "$1 failed: $(tail -1 "$2")"; exit "$3"; }
V="--vocab $DATA/medic/medic_06Jul2012.txt --spell-check $DATA/medic/ncbi-spell-check.txt"
NCBI=$DATA/ncbi-disease; CDR=$DATA/bc5cdr
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"

if [ "$STAGE" != score ]; then
  if [ ! -f "$BASE/config.json" ]; then
    [ "$(cat "$D"/parts/mpnet-fp16.tar.xz.part* | md5sum | cut -c1-32)" = "${XZ_MD5:-7e18a17ce11ba83b9e20e4193ef82a36}" ] \
        || { echo "the uploaded parts are not the whole xz tar"; ls -l "$D/parts"; exit 4; }
    cat "$D"/parts/mpnet-fp16.tar.xz.part* | xz -T4 -dc | tar -C "$W" -xf - || exit 4
    $PY benchmarks/results/gpu-sap-2026-11-26/convert_model.py "$W/mpnet-fp16" "$BASE" float32 2>&1 | tail -1 || exit 4
    lap "unpack"
  fi
  if [ ! -f "$W/sap/model/config.json" ]; then
    $PY -m spacy_sapbert train "$PAIRS" --model "$BASE" --output "$W/sap" --pooling mean --max-length 25 \
        --batch-size 256 --lr 0.00002 --max-steps $SAP_STEPS --seed $SEED --checkpoint-every 100000 --encode-chunk 0 \
        --no-progress --overwrite > "$W/sap.log" 2>&1 || fail sap "$W/sap.log" 5
    lap "sap"
  fi
  if [ ! -f "$W/dhns/model/config.json" ]; then
    $PY -m spacy_sapbert train-dhns "$NCBI/NCBItrainset_corpus.txt" "$CDR/CDR_TrainingSet.PubTator.txt" $LABELS $V \
        --model "$W/sap/model" --output "$W/dhns" --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 \
        --temperature 0.01 --lr 0.00002 --epochs $DHNS_EPOCHS --seed $SEED --no-progress --overwrite > "$W/dhns.log" 2>&1 \
        || fail dhns "$W/dhns.log" 6
    lap "dhns"
  fi
  if [ ! -f "$W/linker/config.cfg" ]; then
    $PY -m spacy_sapbert build-index "$DATA/medic/medic_06Jul2012.txt" "$W/linker" --model "$W/dhns/model" --pooling mean \
        --max-length 25 --k 10 --label '' --remove-punctuation --spell-check "$DATA/medic/ncbi-spell-check.txt" --overwrite \
        > "$W/build-index.log" 2>&1 || fail build-index "$W/build-index.log" 7
    lap "build-index"
  fi
  MEMBERS=()
  for rr_seed in $SEEDS; do
    N=rr-ctx$CTX-s$rr_seed; MEMBERS+=("$W/$N/model")
    if [ ! -f "$W/$N/model/config.json" ]; then  # --resume: a call cut off mid-training goes on from its checkpoint
      $PY -m spacy_sapbert train-reranker "$NCBI/NCBItrainset_corpus.txt" "$CDR/CDR_TrainingSet.PubTator.txt" $LABELS \
          --model "$BASE" --pipeline "$W/linker" --output "$W/$N" --epochs $RR_EPOCHS --seed $rr_seed --context-words $CTX \
          --no-progress --resume > "$W/$N-train.log" 2>&1 || fail "train-reranker $N" "$W/$N-train.log" 8
      lap "train-reranker $N"; tail -1 "$W/$N/train_log.jsonl"
    fi
  done
  if [ ! -f "$W/$E/reranker.json" ]; then
    $PY -m spacy_sapbert combine-rerankers "${MEMBERS[@]}" --output "$W/$E" > "$W/combine.log" 2>&1 || fail combine-rerankers "$W/combine.log" 9
    lap "combine-rerankers"
  fi
fi
[ "$STAGE" = train ] && exit 0

[ -f "$W/$E/reranker.json" ] || { echo "no ensemble in $W/$E: run STAGE=train first"; exit 10; }
M="--model $W/dhns/model --reranker $W/$E --pooling mean --cache-dir $W/cache"
score() {  # name, args...
  local name=$1; shift
  $PY -m spacy_sapbert evaluate "$@" $M --output "$W/$E-$name.json" --errors "$W/$E-$name-misses.jsonl" \
      > "$W/$E-$name.log" 2>&1 || { echo "evaluate $name failed: $(tail -1 "$W/$E-$name.log")"; return 1; }
  cp "$W/$E-$name.json" "$OUT/"; echo "=== $E $name $(date -u +%T)"; grep "^|" "$W/$E-$name.log"
}
[ -f "$W/$E-dev.json" ] || score dev "$NCBI/NCBIdevelopset_corpus.txt" $V --train "$NCBI/NCBItrainset_corpus.txt" \
    --memory "$NCBI/NCBItrainset_corpus.txt" --tune-memory $(for w in $WEIGHTS; do echo "--rerank-weight $w"; done) || exit 11
lap "dev"
CHOSEN=$($PY benchmarks/device/dev_weight.py "$W/$E-dev.json") || exit 12
echo "rerank_weight chosen on dev: $CHOSEN"; echo "$CHOSEN" > "$OUT/$E-chosen-weight.txt"
[ -f "$W/$E-ncbi-test.json" ] || score ncbi-test "$NCBI/NCBItestset_corpus.txt" $V --train "$NCBI/NCBItrainset_corpus.txt" \
    --train "$NCBI/NCBIdevelopset_corpus.txt" --memory "$NCBI/NCBItrainset_corpus.txt" --memory "$NCBI/NCBIdevelopset_corpus.txt" \
    --memory-settings "$W/$E-dev.json" --rerank-weight "$CHOSEN" &
[ -f "$W/$E-bc5cdr.json" ] || score bc5cdr "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Disease $V \
    --train "$CDR/CDR_TrainingSet.PubTator.txt" --memory "$CDR/CDR_TrainingSet.PubTator.txt" --memory-settings "$W/$E-dev.json" \
    --rerank-weight "$CHOSEN" &
wait
lap "test + bc5cdr"
