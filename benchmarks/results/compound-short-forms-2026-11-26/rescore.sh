#!/bin/bash
# the biosyn dev choice re-scored after the compound-short-form rule: memory tuned per protocol on NCBI-disease dev, then
# NCBI-disease test and BC5CDR-disease dev once with those settings (as benchmarks/results/abbreviations-2026-11-26/rerun.sh)
cd /work/runs/s19/rescore
D=/work/shared/data; P=/work/main/.venv/bin/python; S17=/work/runs/s17
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
MODEL="--model $S17/dhns-minilm-both/model --pooling mean --cache-dir $S17/minilm-both-cache"
run() {  # name, args
  echo "=== $1 $(date +%T)"
  OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $2 --output $1.json --errors $1-misses.jsonl > $1.log 2>&1
  grep "^|\|Elapsed" $1.log
}
run minilm-both-dev "$DEV $MODEL"
run minilm-both-ncbi-test "$TEST $MODEL --memory-settings minilm-both-dev.json"
run minilm-both-bc5cdr "$CDR $MODEL --memory-settings minilm-both-dev.json"
echo "=== done $(date +%T)"
