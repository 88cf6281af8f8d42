#!/bin/bash
# After sap.sh: (1) the MiniLM "+ SAP" row at current code: the SAP model scored alone on NCBI-disease dev, then once on
# NCBI-disease test and BC5CDR-disease dev (one thread); (2) beside it, the MiniLM chain's mention-only re-ranker with
# seed 43 (session 23's recipe, seed 42 there), scored with the memory settings dev chose for the chain.
cd /work/runs/s25
until grep -q "^rc" sap.out 2>/dev/null; do sleep 20; done
D=/work/shared/data; P=/work/main/.venv/bin/python; export PYTHONPATH=/work/runs/s25/src
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
NCBI=$D/ncbi-disease; CDR=$D/bc5cdr
DEV="$NCBI/NCBIdevelopset_corpus.txt $V --train $NCBI/NCBItrainset_corpus.txt"
TEST="$NCBI/NCBItestset_corpus.txt $V --train $NCBI/NCBItrainset_corpus.txt --train $NCBI/NCBIdevelopset_corpus.txt"
BC="$CDR/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $CDR/CDR_TrainingSet.PubTator.txt"
score() {  # folder, name, args
  (cd $1 && $P -m spacy_sapbert evaluate ${@:3} --output $2.json --errors $2-misses.jsonl > $2.log 2>&1; echo "=== $1 $2 $(date +%T)"; grep "^|" $2.log)
}
sap_rows() {
  local M="--model /work/runs/s25/sap-minilm/model --pooling mean --cache-dir /work/runs/s25/cache-sap"
  for name in dev ncbi-test bc5cdr; do
    case $name in dev) A="$DEV";; ncbi-test) A="$TEST";; bc5cdr) A="$BC";; esac
    OMP_NUM_THREADS=1 score /work/runs/s25 sap-$name $A $M
  done
}
sap_rows > sap-rows.out 2>&1 &
LABELS="--label Disease --label SpecificDisease --label DiseaseClass --label Modifier --label CompositeMention"
echo "=== train-reranker $(date +%T)"
(cd rr43 && /usr/bin/time -v $P -m spacy_sapbert train-reranker $NCBI/NCBItrainset_corpus.txt $CDR/CDR_TrainingSet.PubTator.txt $LABELS \
   --model sentence-transformers/all-MiniLM-L6-v2 --pipeline /work/runs/s23/minilm/linker --output rr --epochs 2 --seed 43 --no-progress > rr.log 2>&1) || exit 2
grep -E "Elapsed|Maximum res" rr43/rr.log
M="--model /work/runs/s21/gpu/seed42/dhns-model --pooling mean --reranker /work/runs/s25/rr43/rr/model --memory-settings /work/runs/s21/scores/seed42-after-dev.json --cache-dir /work/runs/s23/minilm/cache"
score rr43 dev $DEV --memory $NCBI/NCBItrainset_corpus.txt $M
score rr43 ncbi-test $TEST --memory $NCBI/NCBItrainset_corpus.txt --memory $NCBI/NCBIdevelopset_corpus.txt $M
score rr43 bc5cdr $BC --memory $CDR/CDR_TrainingSet.PubTator.txt $M
wait
echo "=== done $(date +%T)"
