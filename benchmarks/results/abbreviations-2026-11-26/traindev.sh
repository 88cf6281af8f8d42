#!/bin/bash
# The biosyn dev choice (MiniLM SAP + DHNS (NCBI + BC5CDR) + memory) retrained for test as BioSyn did: DHNS on
# NCBI-disease train + dev (+ BC5CDR train), every setting as chosen on dev (those of dhns-minilm-both); then
# NCBI-disease test and BC5CDR-disease dev once, with the memory settings chosen on dev for the train-only model.
cd /work/runs/s18/traindev
D=/work/shared/data; P=/work/main/.venv/bin/python
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
echo "=== train-dhns $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-dhns $D/ncbi-disease/NCBItrainset_corpus.txt $D/ncbi-disease/NCBIdevelopset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS \
  --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --model /work/runs/sap/training/sap/model \
  --output dhns-minilm-traindev --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 --temperature 0.01 --lr 0.00002 --epochs 3 --seed 42 --no-progress > dhns-minilm-traindev.log 2>&1
grep -E "Elapsed|Maximum res|Exit" dhns-minilm-traindev.log
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
M="--model dhns-minilm-traindev/model --pooling mean --cache-dir cache --memory-settings /work/runs/s18/rerun/minilm-both-dev.json"
for run in "traindev-ncbi-test:$TEST $M" "traindev-bc5cdr:$CDR $M"; do
  name=${run%%:*}; args=${run#*:}
  echo "=== $name $(date +%T)"
  OMP_NUM_THREADS=1 /usr/bin/time -v $P -m spacy_sapbert evaluate $args --output $name.json > $name.log 2>&1
  grep "^|\|Elapsed" $name.log
done
echo "=== done $(date +%T)"
