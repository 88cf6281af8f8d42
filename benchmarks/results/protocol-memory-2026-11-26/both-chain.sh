#!/bin/bash
# after dhns-mpnet-both.sh: NCBI-disease dev with the memory tuned per protocol, then an index and a re-ranker on both corpora's training mentions, dev again
cd /work/runs/s17
D=/work/shared/data; P=/work/main/.venv/bin/python
while pgrep -f "output dhns-mpnet-both" > /dev/null; do sleep 20; done
test -f dhns-mpnet-both/model/config.json || { echo "no model"; exit 1; }
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory --model dhns-mpnet-both/model --pooling mean --backend torch-bf16 --cache-dir mpnet-both-cache"
echo "=== evaluate dev $(date +%T)"
OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $DEV --output both-dev.json > both-dev.log 2>&1
grep "^|" both-dev.log
echo "=== build-index $(date +%T)"
$P -m spacy_sapbert build-index $D/medic/medic_06Jul2012.txt linker-mpnet-both --model dhns-mpnet-both/model --pooling mean --max-length 25 --k 10 --label '' --remove-punctuation --spell-check $D/medic/ncbi-spell-check.txt --backend torch-bf16 2>&1 | tail -1
echo "=== train-reranker $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-reranker $D/ncbi-disease/NCBItrainset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS --model sentence-transformers/all-MiniLM-L6-v2 --pipeline linker-mpnet-both --output rr-mpnet-both --epochs 2 --seed 42 --no-progress > rr-mpnet-both.log 2>&1
grep -v "it/s\]" rr-mpnet-both.log | tail -25
echo "=== evaluate dev with the re-ranker $(date +%T)"
OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $DEV --reranker rr-mpnet-both/model --output both-rr-dev.json > both-rr-dev.log 2>&1
grep "^|" both-rr-dev.log
echo "=== done $(date +%T)"
