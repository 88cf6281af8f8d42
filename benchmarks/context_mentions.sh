#!/usr/bin/env bash
# Context-aware against context-free mention encoding after the same fine-tuning (issue 18, part 3):
# DHNS from one model on the NCBI-disease training mentions, once on the mentions alone and once on each
# mention inside its document ([Ms] ... [Me], CONTEXT=32 word pieces), the same epochs and seed; then each
# model's MEDIC pipeline links the NCBI-disease dev gold mentions (benchmarks/eval_entity_linker.py).
# Usage: benchmarks/context_mentions.sh MODEL OUT_DIR   (EPOCHS=1, CONTEXT=32, DATA=../shared/data)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data}
MODEL=$1; OUT=$2
EPOCHS=${EPOCHS:-1}; CONTEXT=${CONTEXT:-32}
NCBI=$DATA/ncbi-disease; MEDIC=$DATA/medic/medic_06Jul2012.txt
mkdir -p "$OUT"
for variant in alone context; do
    window=0; [ "$variant" = context ] && window=$CONTEXT
    [ -d "$OUT/$variant/model" ] || "$PY" -m spacy_sapbert train-dhns "$NCBI/NCBItrainset_corpus.txt" --vocab "$MEDIC" \
        --model "$MODEL" --output "$OUT/$variant" --pooling mean --epochs "$EPOCHS" --context-window "$window" --no-progress
    [ -d "$OUT/$variant-pipeline" ] || "$PY" -m spacy_sapbert build-index "$MEDIC" "$OUT/$variant-pipeline" --format medic \
        --model "$OUT/$variant/model" --label '' --remove-punctuation --context-window "$window"
done
"$PY" benchmarks/eval_entity_linker.py --corpus "$NCBI/NCBIdevelopset_corpus.txt" "$OUT/alone-pipeline" "$OUT/context-pipeline"
