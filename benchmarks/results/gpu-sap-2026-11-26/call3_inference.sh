#!/bin/bash
# Device call 3 (a fresh machine): the linker's inference path on the GPU. benchmarks/bench_backends.py
# with random-weight encoders of the all-MiniLM-L6-v2 and all-mpnet-base-v2 architectures (the timings
# depend on the architecture, not the weights, which cannot travel): index build over the MEDIC names,
# pipeline load, nlp.pipe linking of the NCBI-disease test mentions, the naive one-mention loop.
# a) MiniLM on the machine's 16 CPU cores beside the GPU (cosine of the GPU's name vectors to the CPU's);
# b) both architectures on the GPU in float32 (torch) and float16 (torch-fp16).
set -u
export PYTHONUNBUFFERED=1
D=${D:-/root/devsite}
S=.dev/e
R=benchmarks/results/gpu-sap-2026-11-26
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" "$D/site"
date -u
tar -C "$D/site" -xJf "$S/site2.tar.xz" && cp -r "$S"/extra/* "$D/site/" || exit 2
export PYTHONPATH=$PWD:$D/site
python3 $R/convert_model.py $S/cfg/minilm $D/minilm-random random 2>&1 | tail -1
python3 $R/convert_model.py $S/cfg/mpnet $D/mpnet-random random 2>&1 | tail -1
python3 benchmarks/bench_backends.py --data $S/data --model $D/minilm-random:mean --devices cpu cuda --backends torch \
    > "$OUT/call3-a.log" 2>&1; grep -A9 "^machine" "$OUT/call3-a.log" || tail -5 "$OUT/call3-a.log"
date -u
python3 benchmarks/bench_backends.py --data $S/data --model $D/minilm-random:mean --model $D/mpnet-random:mean --devices cuda \
    --backends torch torch-fp16 > "$OUT/call3-b.log" 2>&1; grep -A9 "^machine" "$OUT/call3-b.log" || tail -5 "$OUT/call3-b.log"
date -u
