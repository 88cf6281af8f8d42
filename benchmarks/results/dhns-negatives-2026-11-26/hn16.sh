#!/bin/bash
# the biosyn dev choice's DHNS with 16 hard negatives per mention instead of 4 (BioSyn re-ranks its top 20), then NCBI-disease dev with the memory tuned per protocol
cd /work/runs/s19
D=/work/shared/data; P=/work/main/.venv/bin/python
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
echo "=== train-dhns $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-dhns $D/ncbi-disease/NCBItrainset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS \
  --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --model /work/runs/sap/training/sap/model \
  --output dhns-hn16-both --pooling mean --max-length 25 --batch-size 32 --hard-negatives 16 --temperature 0.01 --lr 0.00002 --epochs 3 --seed 42 --no-progress > dhns-hn16-both.log 2>&1
grep -E "Elapsed|Maximum res|Exit" dhns-hn16-both.log
echo "=== evaluate dev $(date +%T)"
OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $D/ncbi-disease/NCBIdevelopset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory --model dhns-hn16-both/model --pooling mean --cache-dir hn16-both-cache --output hn16-both-dev.json > hn16-both-dev.log 2>&1
grep "^|\|Elapsed" hn16-both-dev.log
echo "=== done $(date +%T)"
