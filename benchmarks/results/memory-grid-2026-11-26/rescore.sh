#!/bin/bash
# The CPU-scored chains with `--tune-memory` searching memory_weight alone: commit 63b984a, checked out in /tmp/s22wt,
# where that was the default (86e59f0 made the whole grid the default again: with later commits add
# `--memory-grid weight` to DEV for the same runs). NCBI-disease dev with the memory tuned per protocol, then NCBI-disease test and
# BC5CDR-disease dev once with dev's settings (the commands of ../gpu-chain-2026-11-26/score_chains.sh).
# The models are those of session 21 (/work/runs/s21). One thread per evaluation, two side by side.
mkdir -p /work/runs/s22/rescore && cd /tmp/s22wt
D=/work/shared/data; P=/work/main/.venv/bin/python; O=/work/runs/s22/rescore
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
run() {  # name, args
  [ -f $O/$1.json ] && { echo "=== $1 (scored before)"; return; }
  OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s22wt $P -m spacy_sapbert evaluate $2 --output $O/$1.json --errors $O/$1-misses.jsonl > $O/$1.log 2>&1
  echo "=== $1 $(date +%T)"; grep "^|" $O/$1.log
}
chain() {  # name, model args
  run $1-dev "$DEV $2"
  run $1-ncbi-test "$TEST $2 --memory-settings $O/$1-dev.json"
  run $1-bc5cdr "$CDR $2 --memory-settings $O/$1-dev.json"
}
chain mpnet-dhns-ncbi "--model /work/runs/s21/mpnet/dhns-mpnet/model --pooling mean --backend torch-bf16 --cache-dir /work/runs/s21/mpnet/cache" &
(for s in ${SEEDS:-42 43 44}; do chain minilm-chain-seed$s "--model /work/runs/s21/gpu/seed$s/dhns-model --pooling mean --cache-dir /work/runs/s21/cache-after"; done) &
wait
echo "=== done $(date +%T)"
