#!/usr/bin/env bash
# XL-BEL on its open subset (issue 18, part 4): the queries whose gold CUI is reachable through the UMLS
# cross-references of HPO, MONDO and DOID (their names keyed by CUI: evaluate --key-by UMLS), per language;
# exact match, TF-IDF character 3-grams and the encoder (default: the offline all-MiniLM-L6-v2), acc@1/@5.
# Usage: benchmarks/xlbel_open.sh [OUT_DIR] [MODEL]   (DATA=../shared/data; VERSION=xlbel_v1.0; LANGS="de en es ...";
# CACHE=DIR keeps the encoded dictionary between languages; default OUT_DIR benchmarks/results/xlbel-open)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data}
OUT=${1:-benchmarks/results/xlbel-open}
MODEL=${2:-}
VERSION=${VERSION:-xlbel_v1.0}
ONT=$DATA/ontologies
mkdir -p "$OUT"
extra=()
[ -n "$MODEL" ] && extra+=(--model "$MODEL")
[ -n "${CACHE:-}" ] && extra+=(--cache-dir "$CACHE")
for lang in ${LANGS:-de en es fi ja ko ru th tr zh}; do
    file=$(ls "$DATA/xl-bel/$VERSION/${lang}_1k_test_query"*.txt | head -1)
    [ -f "$OUT/$lang.json" ] || "$PY" -m spacy_sapbert evaluate "$file" --corpus-format xlbel \
        --vocab "$ONT/hp.obo" --vocab "$ONT/mondo.json" --vocab "$ONT/doid.json" --key-by UMLS --reachable-only \
        --protocol strict --baselines "${extra[@]}" --title "xl-bel $lang" --output "$OUT/$lang.json" > "$OUT/$lang.md"
done
"$PY" - "$OUT" ${LANGS:-de en es fi ja ko ru th tr zh} <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
reports = {lang: json.loads((out / f"{lang}.json").read_text()) for lang in sys.argv[2:]}
systems = list(next(iter(reports.values()))["results"])
print("| language | queries kept of 1,000 | " + " | ".join(f"{s} acc@1 / @5" for s in systems) + " |")
print("|---|---|" + "---|" * len(systems))
for lang, report in reports.items():
    cells = [f"{100 * report['results'][s]['strict']['acc@1']:.1f} / {100 * report['results'][s]['strict']['acc@5']:.1f}" for s in systems]
    print(f"| {lang} | {report['n_mentions']} | " + " | ".join(cells) + " |")
PY
