#!/bin/bash
# A MiniLM cross-encoder that reads 8 words on each side of the mention, trained on the MiniLM chain's (seed 42,
# GPU-trained in session 21) candidates as session 23's mention-only one was (minilm-cpu/run.sh), then scored with
# the memory settings NCBI-disease dev chose for that chain. Runs the code copied to ../src.
cd /work/runs/s24/ctx
export PYTHONPATH=/work/runs/s24/src
D=/work/shared/data; P=/work/main/.venv/bin/python; MODEL=/work/runs/s21/gpu/seed42/dhns-model
LINKER=/work/runs/s23/minilm/linker; SETTINGS=/work/runs/s21/scores/seed42-after-dev.json
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
echo "=== train-reranker $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-reranker $D/ncbi-disease/NCBItrainset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS \
   --model sentence-transformers/all-MiniLM-L6-v2 --pipeline $LINKER --output rr --epochs 2 --seed 42 --context-words 8 --no-progress --resume > rr.log 2>&1 || exit 2
grep -E "Elapsed|Maximum res" rr.log
M="--model $MODEL --pooling mean --reranker rr/model --memory-settings $SETTINGS --cache-dir /work/runs/s23/minilm/cache"
run() {  # name, args
  echo "=== $1 $(date +%T)"
  /usr/bin/time -v $P -m spacy_sapbert evaluate $2 $M --output $1.json --errors $1-misses.jsonl > $1.log 2>&1
  grep -E "^\||Elapsed" $1.log
}
run dev "$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt"
run ncbi-test "$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
run bc5cdr "$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
echo "=== done $(date +%T)"
