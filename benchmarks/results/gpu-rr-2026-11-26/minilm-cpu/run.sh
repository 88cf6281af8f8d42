#!/bin/bash
# The MiniLM chain's (seed 42, GPU-trained in session 21) re-ranker, on CPU: the `best` workflow's recipe with the
# re-ranker trained on both corpora's disease mentions (as on the device for mpnet), then scored with the memory
# settings NCBI-disease dev chose for that chain.
cd /work/runs/s23/minilm
D=/work/shared/data; P=/work/main/.venv/bin/python; MODEL=/work/runs/s21/gpu/seed42/dhns-model
SETTINGS=/work/runs/s21/scores/seed42-after-dev.json
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
echo "=== build-index $(date +%T)"
$P -m spacy_sapbert build-index $D/medic/medic_06Jul2012.txt linker --model $MODEL --pooling mean --max-length 25 --k 10 \
   --label '' --remove-punctuation --spell-check $D/medic/ncbi-spell-check.txt --overwrite > build-index.log 2>&1 || exit 1
echo "=== train-reranker $(date +%T)"
/usr/bin/time -v $P -m spacy_sapbert train-reranker $D/ncbi-disease/NCBItrainset_corpus.txt $D/bc5cdr/CDR_TrainingSet.PubTator.txt $LABELS \
   --model sentence-transformers/all-MiniLM-L6-v2 --pipeline linker --output rr --epochs 2 --seed 42 --no-progress > rr.log 2>&1 || exit 2
grep -E "Elapsed|Maximum res" rr.log
M="--model $MODEL --pooling mean --reranker rr/model --memory-settings $SETTINGS --cache-dir /work/runs/s23/minilm/cache"
run() {  # name, args
  echo "=== $1 $(date +%T)"
  $P -m spacy_sapbert evaluate $2 $M --output $1.json --errors $1-misses.jsonl > $1.log 2>&1
  grep "^|" $1.log
}
run dev "$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt"
run ncbi-test "$D/ncbi-disease/NCBItestset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --train $D/ncbi-disease/NCBIdevelopset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBIdevelopset_corpus.txt"
run bc5cdr "$D/bc5cdr/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $D/bc5cdr/CDR_TrainingSet.PubTator.txt --memory $D/bc5cdr/CDR_TrainingSet.PubTator.txt"
echo "=== done $(date +%T)"
