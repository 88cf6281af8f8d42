#!/bin/bash
# mpnet DHNS + memory + its re-ranker, scored once on NCBI-disease test and BC5CDR-disease dev (settings from NCBI-disease dev)
cd /work/runs/s16
D=/work/shared/data; P=/work/main/.venv/bin/python
$P -m spacy_sapbert evaluate $D/ncbi-disease/NCBItestset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --model dhns-mpnet/model --pooling mean --backend torch-bf16 --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory-settings mpnet-dhns-dev.json --reranker rr-mpnet/model --cache-dir mpnet-cache --output rr-mpnet-ncbi-test.json 2>&1 | grep "^|\|error"
echo "=== bc5cdr $(date +%T)"
$P -m spacy_sapbert evaluate $D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --model dhns-mpnet/model --pooling mean --backend torch-bf16 --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory-settings mpnet-dhns-dev.json --reranker rr-mpnet/model --cache-dir mpnet-cache --output rr-mpnet-bc5cdr-disease-dev.json 2>&1 | grep "^|\|error"
echo "=== done $(date +%T)"
