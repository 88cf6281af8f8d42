#!/bin/bash
# after the SAP (GPU, one epoch) dev table: DHNS from it on NCBI-disease train + BC5CDR train (the biosyn
# choice's settings), then NCBI-disease dev with the memory tuned per protocol
cd /work/runs/s19
D=/work/shared/data; P=/work/main/.venv/bin/python
while pgrep -f "eval_table.sh" > /dev/null; do sleep 15; done
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
echo "=== train-dhns $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-dhns $D/ncbi-disease/NCBItrainset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS \
  --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --model /work/runs/s19/sap-gpu-epoch1 \
  --output dhns-gpusap-both --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 --temperature 0.01 --lr 0.00002 --epochs 3 --seed 42 --no-progress > dhns-gpusap-both.log 2>&1
grep -E "Elapsed|Maximum res|Exit" dhns-gpusap-both.log
echo "=== evaluate dev $(date +%T)"
OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $D/ncbi-disease/NCBIdevelopset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory --model dhns-gpusap-both/model --pooling mean --cache-dir gpusap-both-cache --output gpusap-both-dev.json --errors gpusap-both-dev-misses.jsonl > gpusap-both-dev.log 2>&1
grep "^|\|Elapsed" gpusap-both-dev.log
echo "=== done $(date +%T)"
