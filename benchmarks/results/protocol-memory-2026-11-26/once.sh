#!/bin/bash
# scored once on NCBI-disease test and BC5CDR-disease dev with the memory settings chosen per protocol on NCBI-disease dev (tune-dev.sh)
D=/work/shared/data; P=/work/main/.venv/bin/python
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
MPNET="--model /work/runs/s16/dhns-mpnet/model --pooling mean --backend torch-bf16 --reranker /work/runs/s16/rr-mpnet/model --cache-dir /work/runs/s16/mpnet-cache --memory-settings /work/runs/s17/mpnet-dev.json"
MINILM="--model /work/runs/sap/training/dhns/model --pooling mean --reranker /work/runs/sap/training/reranker/model --cache-dir /work/runs/sap/training/eval-cache --memory-settings /work/runs/s17/minilm-dev.json"
for run in "mpnet-ncbi-test:$TEST $MPNET" "mpnet-bc5cdr:$CDR $MPNET" "minilm-ncbi-test:$TEST $MINILM" "minilm-bc5cdr:$CDR $MINILM"; do
  name=${run%%:*}; args=${run#*:}
  echo "=== $name $(date +%T)"
  OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $args --output $name.json > $name.log 2>&1
  grep "^|" $name.log
done
echo "=== done $(date +%T)"
