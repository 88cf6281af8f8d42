#!/bin/bash
# mpnet DHNS from the untuned model on NCBI-disease train + BC5CDR train (Disease), the project's DHNS settings
cd /work/runs/s17
D=/work/shared/data; P=/work/main/.venv/bin/python
/usr/bin/time -v $P -m spacy_sapbert train-dhns $D/ncbi-disease/NCBItrainset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt \
  --label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention \
  --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --model /work/runs/mpnet/all-mpnet-base-v2 \
  --output dhns-mpnet-both --pooling mean --max-length 25 --batch-size 32 --hard-negatives 4 --temperature 0.01 --lr 0.00002 --epochs 3 --seed 42 --cpu-bf16 --no-progress
