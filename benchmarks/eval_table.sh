#!/usr/bin/env bash
# The accuracy table of BENCHMARKS.md: NCBI-disease dev/test, BC5CDR-disease/-chemical dev, both dictionary
# protocols, baselines beside the encoder. Usage: benchmarks/eval_table.sh [MODEL] [POOLING] [OUT_DIR]
# (default: the offline all-MiniLM-L6-v2 with mean pooling). DATA defaults to ../shared/data; TABLES picks
# some of: ncbi-dev ncbi-test bc5cdr-disease-dev bc5cdr-chemical-dev (default: all); CACHE=DIR keeps the encoded
# vocabularies between runs (evaluate --cache-dir; default: evaluate's own, ~/.cache/spacy-sapbert/eval-index);
# BASELINES=0 scores the model alone (no exact match, TF-IDF or untuned rows, whose vocabulary encoding is the cost).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data}
MODEL=${1:-}
POOLING=${2:-}
OUT=${3:-benchmarks/results/untuned-minilm}
mkdir -p "$OUT"
model_args=()
[ -n "$MODEL" ] && model_args+=(--model "$MODEL")
[ -n "$POOLING" ] && model_args+=(--pooling "$POOLING")
[ -n "${CACHE:-}" ] && model_args+=(--cache-dir "$CACHE")
[ "${BASELINES:-1}" != 0 ] && model_args+=(--baselines)
TABLES=${TABLES:-ncbi-dev ncbi-test bc5cdr-disease-dev bc5cdr-chemical-dev}
run() { name=$1; shift; [[ " $TABLES " == *" $name "* ]] || return 0; "$PY" -m spacy_sapbert evaluate "$@" "${model_args[@]}" --title "$name" \
          --output "$OUT/$name.json" --plot "$OUT/$name.png" | tee "$OUT/$name.md"; }

NCBI=$DATA/ncbi-disease; MEDIC=$DATA/medic/medic_06Jul2012.txt; CDR=$DATA/bc5cdr; MESH=$DATA/mesh-2024
run ncbi-dev  "$NCBI/NCBIdevelopset_corpus.txt" --vocab "$MEDIC" --spell-check "$DATA/medic/ncbi-spell-check.txt" \
    --train "$NCBI/NCBItrainset_corpus.txt"
run ncbi-test "$NCBI/NCBItestset_corpus.txt" --vocab "$MEDIC" --spell-check "$DATA/medic/ncbi-spell-check.txt" \
    --train "$NCBI/NCBItrainset_corpus.txt" --train "$NCBI/NCBIdevelopset_corpus.txt"
run bc5cdr-disease-dev "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Disease --vocab "$MEDIC" \
    --train "$CDR/CDR_TrainingSet.PubTator.txt"
run bc5cdr-chemical-dev "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Chemical \
    --vocab "$MESH/mesh_id_label_mappings.tsv" --mesh-trees D --vocab "$MESH/mesh_supp_id_label_mappings.tsv" \
    --train "$CDR/CDR_TrainingSet.PubTator.txt"
