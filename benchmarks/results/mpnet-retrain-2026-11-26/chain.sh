#!/bin/bash
# The strict dev choice's model (mpnet DHNS on NCBI-disease train, from the untuned model; the command of BENCHMARKS.md
# "The whole ablation"), retrained here because the first copy was lost, then scored with the checkout (tie order of
# e69f696): NCBI-disease dev with the memory tuned per protocol, NCBI-disease test and BC5CDR-disease dev with dev's settings.
cd /work/runs/s21/mpnet
D=/work/shared/data; P=/work/main/.venv/bin/python
echo "=== train-dhns $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-dhns $D/ncbi-disease/NCBItrainset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt \
  --spell-check $D/medic/ncbi-spell-check.txt --model /work/runs/mpnet/all-mpnet-base-v2 --output dhns-mpnet --pooling mean \
  --max-length 25 --batch-size 32 --hard-negatives 4 --temperature 0.01 --lr 0.00002 --epochs 3 --seed 42 --cpu-bf16 --no-progress > dhns-mpnet.log 2>&1
grep -E "Elapsed|Maximum res|Exit" dhns-mpnet.log; grep train_name_top1 dhns-mpnet/train_log.jsonl
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
M="--model dhns-mpnet/model --pooling mean --backend torch-bf16 --cache-dir /work/runs/s21/mpnet/cache"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
run() {  # name, args
  echo "=== $1 $(date +%T)"
  $P -m spacy_sapbert evaluate $2 --output $1.json > $1.log 2>&1
  grep "^|" $1.log
}
run mpnet-dev "$DEV $M"
run mpnet-ncbi-test "$TEST $M --memory-settings /work/runs/s21/mpnet/mpnet-dev.json"
run mpnet-bc5cdr "$CDR $M --memory-settings /work/runs/s21/mpnet/mpnet-dev.json"
echo "=== done $(date +%T)"
