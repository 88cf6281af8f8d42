#!/bin/bash
# memory settings chosen per protocol on NCBI-disease dev (evaluate --tune-memory, commit f256d27): mpnet DHNS and MiniLM SAP+DHNS, with their re-rankers
D=/work/shared/data; P=/work/main/.venv/bin/python
NCBI="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
echo "=== mpnet $(date +%T)"
OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $D/ncbi-disease/NCBIdevelopset_corpus.txt $NCBI --model /work/runs/s16/dhns-mpnet/model --pooling mean --backend torch-bf16 --reranker /work/runs/s16/rr-mpnet/model --cache-dir /work/runs/s16/mpnet-cache --output mpnet-dev.json > mpnet-dev.log 2>&1
grep "^|" mpnet-dev.log
echo "=== minilm $(date +%T)"
cd /work/runs/sap
OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $D/ncbi-disease/NCBIdevelopset_corpus.txt $NCBI --model training/dhns/model --pooling mean --reranker training/reranker/model --cache-dir training/eval-cache --output /work/runs/s17/minilm-dev.json > /work/runs/s17/minilm-dev.log 2>&1
grep "^|" /work/runs/s17/minilm-dev.log
echo "=== done $(date +%T)"
