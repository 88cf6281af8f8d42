#!/bin/bash
# a re-ranker for the mpnet DHNS linker: index, train (the project's reranker defaults), score on NCBI-disease dev with the memory
cd /work/runs/s16
D=/work/shared/data; P=/work/main/.venv/bin/python
echo "=== build-index $(date +%T)"
$P -m spacy_sapbert build-index $D/medic/medic_06Jul2012.txt linker-mpnet --model dhns-mpnet/model --pooling mean --max-length 25 --k 10 --label '' --remove-punctuation --spell-check $D/medic/ncbi-spell-check.txt --backend torch-bf16 2>&1 | tail -1
echo "=== train-reranker $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-reranker $D/ncbi-disease/NCBItrainset_corpus.txt --model sentence-transformers/all-MiniLM-L6-v2 --pipeline linker-mpnet --output rr-mpnet --epochs 2 --seed 42 --no-progress 2>&1 | grep -v "it/s\]" | tail -25
echo "=== evaluate dev $(date +%T)"
$P -m spacy_sapbert evaluate $D/ncbi-disease/NCBIdevelopset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/ncbi-disease/NCBItrainset_corpus.txt --model dhns-mpnet/model --pooling mean --backend torch-bf16 --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory-settings mpnet-dhns-dev.json --reranker rr-mpnet/model --cache-dir mpnet-cache --output rr-mpnet-dev.json 2>&1 | grep "^|\|error"
echo "=== done $(date +%T)"
