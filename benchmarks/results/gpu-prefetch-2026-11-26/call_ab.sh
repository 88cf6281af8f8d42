#!/bin/bash
# One device call (run from the repository root, carry .dev/p): the host side of SAP and of encoding on
# CUDA, old code against new, side by side on one warm machine. Three copies of the package:
#   base  = commit 72bfa45 (tokenizer.pad, no prefetch)     .dev/p/v/base
#   pad   = numpy padding (pad_rows)                        .dev/p/v/pad
#   cur   = numpy padding + next micro-batch in a thread    the checkout
# 1. `train` of random-weight MiniLM and BERT-base-size (mpnet) encoders on the merged pairs, the whole
#    micro-batch per forward pass (the CUDA default), each variant in turn, the MiniLM round twice;
# 2. cProfile of `cur` MiniLM training (where the host time goes);
# 3. bench_backends.py --devices cuda for base and cur (index build and nlp.pipe use the same padding).
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
ROOT=$PWD; D=${D:-/root/devsite}; S=$ROOT/.dev/p; R=$ROOT/benchmarks/results/gpu-prefetch-2026-11-26
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" "$D/site" "$D/runs"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
[ -n "${SKIP_SITE:-}" ] || { tar -C "$D/site" -xJf "$S/site2.tar.xz" && cp -r "$S"/extra/* "$D/site/"; } || exit 2
gunzip -c "$S/pairs.txt.gz" > "$D/pairs.txt" || exit 2
export PYTHONPATH=$PWD:$D/site
python3 $PWD/benchmarks/results/gpu-sap-2026-11-26/convert_model.py $S/cfg/minilm $D/minilm-random random 2>&1 | tail -1
python3 $PWD/benchmarks/results/gpu-sap-2026-11-26/convert_model.py $S/cfg/mpnet $D/mpnet-random random 2>&1 | tail -1
src() { case $1 in base|pad) echo $S/v/$1;; cur) echo $ROOT;; esac; }
time_run() {  # name variant model steps
    local v; v=$(src $2)
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 200 > "$D/runs/$1.smi.csv" &
    local smi=$!
    (cd $v && PYTHONPATH=$v:$D/site python3 -m spacy_sapbert train "$D/pairs.txt" --model "$3" --output "$D/runs/$1" \
        --pooling mean --max-length 25 --batch-size 256 --lr 0.00002 --max-steps "$4" --seed 42 \
        --checkpoint-every 100000 --log-every 10 --no-progress) > "$D/runs/$1.log" 2>&1 || { echo "run $1 failed:"; tail -5 "$D/runs/$1.log"; }
    kill $smi
}
START=$(date +%s)
for round in 1 2; do for v in base pad cur; do time_run minilm-$v-$round $v $D/minilm-random ${MINILM_STEPS:-150}; done; done
for v in base pad cur; do time_run mpnet-$v-1 $v $D/mpnet-random ${MPNET_STEPS:-80}; done
echo "timed runs: $(( $(date +%s) - START )) s"
python3 $R/summarize_ab.py $D/runs | tee "$OUT/ab-summary.txt"
date -u
python3 -m cProfile -o $D/prof.out -m spacy_sapbert train "$D/pairs.txt" --model $D/minilm-random --output $D/runs-prof \
    --pooling mean --batch-size 256 --max-steps ${PROF_STEPS:-100} --checkpoint-every 100000 --no-progress > $D/prof.log 2>&1
python3 -c "
import pstats; p = pstats.Stats('$D/prof.out'); p.sort_stats('tottime').print_stats(30); p.sort_stats('cumulative').print_stats(45)
" > "$OUT/profile-cur.txt" 2>&1; head -80 "$OUT/profile-cur.txt" | tail -45
date -u
for v in base cur; do
    (cd $(src $v) && PYTHONPATH=$(src $v):$D/site python3 $ROOT/benchmarks/bench_backends.py --data $S/data \
        --model $D/minilm-random:mean --model $D/mpnet-random:mean --devices cuda --backends torch) > "$OUT/bench-$v.log" 2>&1
    grep -A4 "^machine" "$OUT/bench-$v.log" || tail -5 "$OUT/bench-$v.log"
done
tar -C "$D/runs" -czf "$OUT/runs.tar.gz" --exclude=checkpoints --exclude=model --exclude='*.png' .
date -u
