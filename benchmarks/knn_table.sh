#!/usr/bin/env bash
# The kNN-BioEL table of BENCHMARKS.md: a SAP model and a SAP -> DHNS model, each without and with a
# mention memory (strict protocol: MEDIC names only in the concept index).
#   1. NCBI-disease dev: memory = train mentions; --tune-memory chooses memory_k, memory_weight, the two
#      temperatures and the mixture here (MEMORY_GRID=weight: memory_weight alone); the only place where anything is chosen.
#   2. NCBI-disease test, once: memory = train + dev mentions, the settings of step 1.
#   3. BC5CDR-disease dev: memory = BC5CDR train disease mentions, the settings of step 1.
# Usage: benchmarks/knn_table.sh SAP_MODEL DHNS_MODEL [POOLING] [OUT_DIR]   (DATA defaults to ../shared/data;
# CACHE=DIR keeps the encoded vocabulary between the runs of one model: evaluate --cache-dir;
# SYSTEMS="sap" or "dhns" runs one model's rows)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data}
SAP=$1
DHNS=$2
POOLING=${3:-mean}
OUT=${4:-benchmarks/results/knn}
mkdir -p "$OUT"
cache_args=()
[ -n "${CACHE:-}" ] && cache_args+=(--cache-dir "$CACHE")
NCBI=$DATA/ncbi-disease; MEDIC=$DATA/medic/medic_06Jul2012.txt; CDR=$DATA/bc5cdr; SPELL=$DATA/medic/ncbi-spell-check.txt

run() { name=$1; shift; "$PY" -m spacy_sapbert evaluate "$@" --pooling "$POOLING" --protocol strict --title "$name" "${cache_args[@]}" \
          --output "$OUT/$name.json" --plot "$OUT/$name.png" | tee "$OUT/$name.md"; }

for system in ${SYSTEMS:-sap dhns}; do
    model=$SAP; [ "$system" = dhns ] && model=$DHNS
    run "$system-ncbi-dev" "$NCBI/NCBIdevelopset_corpus.txt" --vocab "$MEDIC" --spell-check "$SPELL" --model "$model" \
        --memory "$NCBI/NCBItrainset_corpus.txt" --tune-memory --memory-grid "${MEMORY_GRID:-full}"
    run "$system-ncbi-test" "$NCBI/NCBItestset_corpus.txt" --vocab "$MEDIC" --spell-check "$SPELL" --model "$model" \
        --memory "$NCBI/NCBItrainset_corpus.txt" --memory "$NCBI/NCBIdevelopset_corpus.txt" \
        --memory-settings "$OUT/$system-ncbi-dev.json"
    run "$system-bc5cdr-disease-dev" "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Disease --vocab "$MEDIC" --model "$model" \
        --memory "$CDR/CDR_TrainingSet.PubTator.txt" --memory-settings "$OUT/$system-ncbi-dev.json"
done
