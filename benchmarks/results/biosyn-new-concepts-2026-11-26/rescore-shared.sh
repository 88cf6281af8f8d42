#!/bin/bash
# Both dev choices scored again with the report's shared_acc@1 column (commit after 19a6d0c): NCBI-disease dev (memory
# tuned again: the same settings must come out), NCBI-disease test and BC5CDR-disease dev with those settings. Nothing
# is chosen on the new column.
mkdir -p /work/runs/s20/shared && cd /work/runs/s20/shared
D=/work/shared/data; P=/work/main/.venv/bin/python; S17=/work/runs/s17
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
TEST="$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
CDR="$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
MINILM="--model $S17/dhns-minilm-both/model --pooling mean --cache-dir $S17/minilm-both-cache"
MPNET="--model /work/runs/s16/dhns-mpnet/model --pooling mean --backend torch-bf16 --cache-dir /work/runs/s16/mpnet-cache"
run() {  # name, args
  echo "=== $1 $(date +%T)"
  OMP_NUM_THREADS=1 $P -m spacy_sapbert evaluate $2 --output $1.json > $1.log 2>&1
  grep "^|\|mentions (" $1.log
}
run minilm-both-dev "$DEV $MINILM"
run minilm-both-ncbi-test "$TEST $MINILM --memory-settings minilm-both-dev.json"
run minilm-both-bc5cdr "$CDR $MINILM --memory-settings minilm-both-dev.json"
run mpnet-dev "$DEV $MPNET"
run mpnet-ncbi-test "$TEST $MPNET --memory-settings mpnet-dev.json"
run mpnet-bc5cdr "$CDR $MPNET --memory-settings mpnet-dev.json"
echo "=== done $(date +%T)"
