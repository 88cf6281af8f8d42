#!/bin/bash
# the mpnet DHNS (NCBI-disease + BC5CDR) linker with a re-ranker trained on both corpora's mentions: NCBI-disease test and BC5CDR-disease dev once
cd /work/runs/s17
D=/work/shared/data; P=/work/main/.venv/bin/python
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
while [ ! -f both-rr-dev.json ]; do sleep 20; done
MPNET="--model dhns-mpnet-both/model --pooling mean --backend torch-bf16 --cache-dir mpnet-both-cache --memory-settings both-dev.json --reranker rr-mpnet-both/model"
for run in "both-rr-mpnet-ncbi-test:$TEST $MPNET" "both-rr-mpnet-bc5cdr:$CDR $MPNET"; do
  name=${run%%:*}; args=${run#*:}
  echo "=== $name $(date +%T)"
  OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $args --output $name.json > $name.log 2>&1
  grep "^|" $name.log
done
echo "=== done $(date +%T)"
