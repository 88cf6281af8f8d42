#!/bin/bash
# Each GPU chain (seeds 42, 43, 44) scored here, with the index's old tie order (`before`: commit 75d6744, checked out
# in /tmp/before), the new one (`after`: commit 91eb9b7, the checkout then) and `given` (the checkout after it:
# add_names puts the pairs it is given first, the most often given first, also pairs the index held; run with
# VERSIONS=given once `before` and `after` had run): NCBI-disease dev with the memory tuned per protocol, then
# NCBI-disease test and BC5CDR-disease dev with the settings dev chose for that chain and version.
# The two versions of one chain run side by side, one thread each.
mkdir -p /work/runs/s21/scores && cd /work/runs/s21/scores
D=/work/shared/data; P=/work/main/.venv/bin/python
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
run() {  # version, name, args
  [ -f $2.json ] && { echo "=== $2 (scored before)"; return; }
  local src=/work/main; [ $1 = before ] && src=/tmp/before
  (cd $src && OMP_NUM_THREADS=1 PYTHONPATH=$src $P -m spacy_sapbert evaluate $3 --output /work/runs/s21/scores/$2.json \
     --errors /work/runs/s21/scores/$2-misses.jsonl) > $2.log 2>&1
  echo "=== $2 $(date +%T)"; grep "^|" $2.log
}
chain() {  # version, seed (the strict index of `after` and `given` is the same, so they share a cache)
  local cache=after; [ $1 = before ] && cache=before
  local M="--model /work/runs/s21/gpu/seed$2/dhns-model --pooling mean --cache-dir /work/runs/s21/cache-$cache"
  run $1 seed$2-$1-dev "$DEV $M"
  run $1 seed$2-$1-ncbi-test "$TEST $M --memory-settings /work/runs/s21/scores/seed$2-$1-dev.json"
  run $1 seed$2-$1-bc5cdr "$CDR $M --memory-settings /work/runs/s21/scores/seed$2-$1-dev.json"
}
for seed in ${SEEDS:-42 43 44}; do
  for version in ${VERSIONS:-before after}; do
    chain $version $seed > seed$seed-$version.out 2>&1 &
  done
  wait
done
echo "=== done $(date +%T)"
