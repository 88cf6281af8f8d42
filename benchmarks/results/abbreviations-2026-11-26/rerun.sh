#!/bin/bash
# every dev-chosen system re-scored after the abbreviation fix (commit 002fa04): memory tuned per protocol on
# NCBI-disease dev, then NCBI-disease test and BC5CDR-disease dev once with those settings. Stream $1: mpnet or minilm.
cd /work/runs/s18/rerun
D=/work/shared/data; P=/work/main/.venv/bin/python; S16=/work/runs/s16; S17=/work/runs/s17; SAP=/work/runs/sap/training
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
if [ "$1" = mpnet ]; then
  SYSTEMS=("mpnet|--model $S16/dhns-mpnet/model --pooling mean --backend torch-bf16 --reranker $S16/rr-mpnet/model --cache-dir $S16/mpnet-cache"
           "mpnet-both|--model $S17/dhns-mpnet-both/model --pooling mean --backend torch-bf16 --reranker $S17/rr-mpnet-both/model --cache-dir $S17/mpnet-both-cache")
else
  SYSTEMS=("minilm|--model $SAP/dhns/model --pooling mean --reranker $SAP/reranker/model --cache-dir $SAP/eval-cache"
           "minilm-both|--model $S17/dhns-minilm-both/model --pooling mean --cache-dir $S17/minilm-both-cache")
fi
run() {  # name, args
  echo "=== $1 $(date +%T)"
  OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $2 --output $1.json --errors $1-misses.jsonl > $1.log 2>&1
  grep "^|\|Elapsed" $1.log
}
for system in "${SYSTEMS[@]}"; do
  name=${system%%|*}; model=${system#*|}
  run $name-dev "$DEV $model"
  run $name-ncbi-test "$TEST $model --memory-settings $name-dev.json"
  run $name-bc5cdr "$CDR $model --memory-settings $name-dev.json"
done
echo "=== done $(date +%T)"
