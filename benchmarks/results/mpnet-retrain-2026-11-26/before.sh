#!/bin/bash
# The retrained mpnet DHNS model scored with 75d6744 (row order; /tmp/before): NCBI-disease dev tuned, then NCBI-disease test.
cd /tmp/before
D=/work/shared/data; P=/work/main/.venv/bin/python; O=/work/runs/s21/mpnet
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
M="--model $O/dhns-mpnet/model --pooling mean --backend torch-bf16 --cache-dir $O/cache-before"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
run() { echo "=== $1 $(date +%T)"; PYTHONPATH=/tmp/before $P -m spacy_sapbert evaluate $2 --output $O/$1.json > $O/$1.log 2>&1; grep "^|" $O/$1.log; }
run before-mpnet-dev "$DEV $M"
run before-mpnet-ncbi-test "$TEST $M --memory-settings $O/before-mpnet-dev.json"
echo "=== done $(date +%T)"
