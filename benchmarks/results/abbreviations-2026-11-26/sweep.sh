#!/bin/bash
# DHNS (MiniLM from SAP, NCBI-disease + BC5CDR train) with other learning rates / epochs, each scored on NCBI-disease dev
# with the memory tuned per protocol; the 2e-5 / 3 epochs run is dhns-minilm-both (session 17).
cd /work/runs/s18/sweep
D=/work/shared/data; P=/work/main/.venv/bin/python
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
for run in "lr5e-5-ep3:0.00005:3" "lr2e-5-ep6:0.00002:6"; do
  IFS=: read name lr epochs <<< "$run"
  echo "=== train $name $(date +%T)"
  /usr/bin/time -v $P -m spacy_sapbert train-dhns $D/ncbi-disease/NCBItrainset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS $V \
    --model /work/runs/sap/training/sap/model --output $name --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 \
    --temperature 0.01 --lr $lr --epochs $epochs --seed 42 --no-progress > $name-train.log 2>&1
  grep -E "Elapsed|Maximum res|Exit" $name-train.log
  echo "=== dev $name $(date +%T)"
  OMP_NUM_THREADS=2 /usr/bin/time -v $P -m spacy_sapbert evaluate $D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt \
    --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory --model $name/model --pooling mean --cache-dir cache-$name --output $name-dev.json > $name-dev.log 2>&1
  grep "^|\|Elapsed" $name-dev.log
done
echo "=== done $(date +%T)"
