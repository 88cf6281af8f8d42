#!/usr/bin/env bash
# MS loss v1 / v2 / v3 side by side (issue 18, part 2): the same pairs, steps, batch, learning rate and seed;
# NCBI-disease dev and BC5CDR-disease dev acc@1/@5 (strict and biosyn, through the component).
# Usage: benchmarks/ms_losses.sh MODEL PAIRS KGE_MODEL OUT_DIR   (STEPS=100, BATCH=256, LR=2e-5; LOSSES="ms ms-v2 ms-v3";
# a run folder OUT_DIR/LOSS that already holds model/ is evaluated as it is; DATA=../shared/data; CACHE=DIR for evaluate)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data}
MODEL=$1; PAIRS=$2; KGE=$3; OUT=$4
STEPS=${STEPS:-100}; BATCH=${BATCH:-256}; LR=${LR:-2e-5}
NCBI=$DATA/ncbi-disease; MEDIC=$DATA/medic/medic_06Jul2012.txt; CDR=$DATA/bc5cdr
cache=(); [ -n "${CACHE:-}" ] && cache=(--cache-dir "$CACHE")
mkdir -p "$OUT"
for loss in ${LOSSES:-ms ms-v2 ms-v3}; do
    run="$OUT/$loss"
    extra=(); [ "$loss" = ms-v3 ] && extra=(--kge "$KGE")
    [ -d "$run/model" ] || "$PY" -m spacy_sapbert train "$PAIRS" --model "$MODEL" --output "$run" --pooling mean --loss "$loss" \
        --batch-size "$BATCH" --max-steps "$STEPS" --lr "$LR" --checkpoint-every 50 --no-progress "${extra[@]}"
    [ -f "$run/ncbi-dev.json" ] || "$PY" -m spacy_sapbert evaluate "$NCBI/NCBIdevelopset_corpus.txt" --vocab "$MEDIC" \
        --spell-check "$DATA/medic/ncbi-spell-check.txt" --train "$NCBI/NCBItrainset_corpus.txt" --model "$run/model" \
        --no-baselines "${cache[@]}" --title "$loss ncbi-dev" --output "$run/ncbi-dev.json" > "$run/ncbi-dev.md"
    [ -f "$run/bc5cdr-disease-dev.json" ] || "$PY" -m spacy_sapbert evaluate "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Disease \
        --vocab "$MEDIC" --train "$CDR/CDR_TrainingSet.PubTator.txt" --model "$run/model" --no-baselines "${cache[@]}" \
        --title "$loss bc5cdr-disease-dev" --output "$run/bc5cdr-disease-dev.json" > "$run/bc5cdr-disease-dev.md"
done
"$PY" - "$OUT" ${LOSSES:-ms ms-v2 ms-v3} <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| loss | NCBI dev strict acc@1 / @5 | NCBI dev biosyn | BC5CDR-disease dev strict | BC5CDR-disease dev biosyn |")
print("|---|---|---|---|---|")
for loss in sys.argv[2:]:
    cells = []
    for corpus in ("ncbi-dev", "bc5cdr-disease-dev"):
        scores = next(iter(json.loads((out / loss / f"{corpus}.json").read_text())["results"].values()))
        cells += [f"{100 * scores[p]['acc@1']:.1f} / {100 * scores[p]['acc@5']:.1f}" for p in ("strict", "biosyn")]
    print(f"| {loss} | " + " | ".join(cells) + " |")
PY
