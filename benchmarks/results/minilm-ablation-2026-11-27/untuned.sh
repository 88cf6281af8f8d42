#!/bin/bash
# The MiniLM "untuned" row at current code, scored as sap_rows in after_sap.sh (one thread).
cd /work/runs/s25
D=/work/shared/data; P=/work/main/.venv/bin/python; export PYTHONPATH=/work/runs/s25/src OMP_NUM_THREADS=1
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
NCBI=$D/ncbi-disease; CDR=$D/bc5cdr
M="--model sentence-transformers/all-MiniLM-L6-v2 --pooling mean --cache-dir /work/runs/s25/cache-untuned"
run() { $P -m spacy_sapbert evaluate "${@:2}" $M --output untuned-$1.json --errors untuned-$1-misses.jsonl > untuned-$1.log 2>&1; echo "=== untuned $1 $(date +%T)"; grep "^|" untuned-$1.log; }
run dev $NCBI/NCBIdevelopset_corpus.txt $V --train $NCBI/NCBItrainset_corpus.txt
run ncbi-test $NCBI/NCBItestset_corpus.txt $V --train $NCBI/NCBItrainset_corpus.txt --train $NCBI/NCBIdevelopset_corpus.txt
run bc5cdr $CDR/CDR_DevelopmentSet.PubTator.txt --label Disease $V --train $CDR/CDR_TrainingSet.PubTator.txt
