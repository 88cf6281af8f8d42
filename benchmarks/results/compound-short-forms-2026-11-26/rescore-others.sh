#!/bin/bash
# the other issue-15 systems on NCBI-disease dev after the compound-short-form rule (memory tuned per protocol), to check that
# the two dev choices still lead; test and BC5CDR only for a system that takes the lead
cd /work/runs/s19/rescore
while pgrep -f rescore-mpnet.sh > /dev/null; do sleep 10; done
D=/work/shared/data; P=/work/main/.venv/bin/python; S16=/work/runs/s16; S17=/work/runs/s17; SAP=/work/runs/sap/training
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
run() {  # name, args
  echo "=== $1 $(date +%T)"
  OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $2 --output $1.json > $1.log 2>&1
  grep "^|\|Elapsed" $1.log
}
run minilm-dev "$DEV --model $SAP/dhns/model --pooling mean --reranker $SAP/reranker/model --cache-dir $SAP/eval-cache"
run mpnet-both-dev "$DEV --model $S17/dhns-mpnet-both/model --pooling mean --backend torch-bf16 --reranker $S17/rr-mpnet-both/model --cache-dir $S17/mpnet-both-cache"
echo "=== done $(date +%T)"
