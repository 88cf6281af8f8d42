#!/bin/bash
# the strict dev choice (mpnet DHNS on NCBI + memory, with its re-ranker row) re-scored after the compound-short-form rule: memory tuned per protocol on NCBI-disease dev, then
# NCBI-disease test and BC5CDR-disease dev once with those settings (as benchmarks/results/abbreviations-2026-11-26/rerun.sh)
cd /work/runs/s19/rescore
D=/work/shared/data; P=/work/main/.venv/bin/python; S17=/work/runs/s17
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
MODEL="--model /work/runs/s16/dhns-mpnet/model --pooling mean --backend torch-bf16 --reranker /work/runs/s16/rr-mpnet/model --cache-dir /work/runs/s16/mpnet-cache"
run() {  # name, args
  echo "=== $1 $(date +%T)"
  OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $2 --output $1.json --errors $1-misses.jsonl > $1.log 2>&1
  grep "^|\|Elapsed" $1.log
}
run mpnet-dev "$DEV $MODEL"
run mpnet-ncbi-test "$TEST $MODEL --memory-settings mpnet-dev.json"
run mpnet-bc5cdr "$CDR $MODEL --memory-settings mpnet-dev.json"
echo "=== done $(date +%T)"
