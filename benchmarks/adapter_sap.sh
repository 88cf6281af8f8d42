#!/usr/bin/env bash
# Adapter SAP beside full SAP (issue 18, part 1): the same pairs, steps, batch and seed; for each variant
# the trainable parameters, pairs/s and NCBI-disease dev acc@1/@5 (strict and biosyn, through the component).
# Usage: benchmarks/adapter_sap.sh MODEL PAIRS OUT_DIR   (STEPS=100, BATCH=256, FULL_LR=2e-5, ADAPTER_LR=1e-4,
# VARIANTS="full 16 1": 0/full trains the whole encoder, a number is the adapters' reduction factor; DATA=../shared/data)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data}
MODEL=$1; PAIRS=$2; OUT=$3
STEPS=${STEPS:-100}; BATCH=${BATCH:-256}
mkdir -p "$OUT"
for variant in ${VARIANTS:-full 16 1}; do
    run="$OUT/$variant"
    if [ "$variant" = full ]; then extra=(--lr "${FULL_LR:-2e-5}"); else extra=(--adapters "$variant" --lr "${ADAPTER_LR:-1e-4}"); fi
    [ -d "$run/model" ] || "$PY" -m spacy_sapbert train "$PAIRS" --model "$MODEL" --output "$run" --pooling mean \
        --batch-size "$BATCH" --max-steps "$STEPS" --checkpoint-every 50 --no-progress "${extra[@]}"
    [ -f "$run/ncbi-dev.json" ] || "$PY" -m spacy_sapbert evaluate "$DATA/ncbi-disease/NCBIdevelopset_corpus.txt" \
        --vocab "$DATA/medic/medic_06Jul2012.txt" --spell-check "$DATA/medic/ncbi-spell-check.txt" --model "$run/model" \
        --train "$DATA/ncbi-disease/NCBItrainset_corpus.txt" \
        --no-baselines --title "$variant" --output "$run/ncbi-dev.json" > "$run/ncbi-dev.md"
done
"$PY" - "$OUT" ${VARIANTS:-full 16 1} <<'PY'
import json, sys
from pathlib import Path
from spacy_sapbert.adapters import adapter_settings, trainable_parameters
from spacy_sapbert.encoder import load_pretrained
out = Path(sys.argv[1])
print("| variant | trainable parameters | pairs/s | NCBI dev strict acc@1 / @5 | biosyn acc@1 / @5 |")
print("|---|---|---|---|---|")
for variant in sys.argv[2:]:
    run = out / variant
    _, model = load_pretrained(str(run / "model"))
    total = sum(p.numel() for p in model.parameters())
    trainable = trainable_parameters(model) if adapter_settings(model) else total - sum(p.numel() for p in model.pooler.parameters())
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    rate = sum(e["pairs_per_s"] for e in log) / len(log)
    scores = next(iter(json.loads((run / "ncbi-dev.json").read_text())["results"].values()))
    cell = lambda p: f"{100 * scores[p]['acc@1']:.1f} / {100 * scores[p]['acc@5']:.1f}"
    name = "full SAP" if variant == "full" else f"adapters, reduction {variant}"
    print(f"| {name} | {trainable:,} ({100 * trainable / total:.1f}%) | {rate:.1f} | {cell('strict')} | {cell('biosyn')} |")
PY
