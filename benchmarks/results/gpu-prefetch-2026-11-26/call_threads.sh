#!/bin/bash
# Second device call (a fresh machine; carry .dev/p): is a warm vector cache really slower than a cold one
# on this 16-core machine (section "SAP on a GPU"), or was that one short pass's noise? bench_backends.py
# now reports the median of 5 passes. MiniLM (random weights) on the CPU's 16 cores and on the GPU, with
# faiss on OpenMP's default threads and with OMP_NUM_THREADS=1 (faiss on one thread; torch keeps its 16).
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD; D=${D:-/root/devsite}; S=$ROOT/.dev/p
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" "$D/site"
date -u
[ -n "${SKIP_SITE:-}" ] || { tar -C "$D/site" -xJf "$S/site2.tar.xz" && cp -r "$S"/extra/* "$D/site/"; } || exit 2
export PYTHONPATH=$ROOT:$D/site
python3 $ROOT/benchmarks/results/gpu-sap-2026-11-26/convert_model.py $S/cfg/minilm $D/minilm-random random 2>&1 | tail -1
THREADS=$(nproc)
for omp in default 1; do
    if [ $omp = default ]; then unset OMP_NUM_THREADS; else export OMP_NUM_THREADS=$omp; fi
    python3 -c "import faiss; print('OMP_NUM_THREADS=$omp: faiss threads', faiss.omp_get_max_threads())"
    python3 benchmarks/bench_backends.py --data $S/data --model $D/minilm-random:mean --devices ${DEVICES:-cpu cuda} \
        --backends torch --threads $THREADS --repeats 5 ${LIMIT:+--limit-names $LIMIT} > "$OUT/bench-omp-$omp.log" 2>&1
    grep -A4 "^machine" "$OUT/bench-omp-$omp.log" || tail -5 "$OUT/bench-omp-$omp.log"
    date -u
done
