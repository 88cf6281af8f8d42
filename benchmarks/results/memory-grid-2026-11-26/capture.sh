#!/bin/bash
# The CPU-scored dev grids of grids/: NCBI-disease dev with the memory tuned per protocol (the commands of
# ../gpu-chain-2026-11-26/score_chains.sh and ../mpnet-retrain-2026-11-26/chain.sh), through capture_grid.py, which
# keeps every setting's rank of the gold for every mention. Ran with commit d1df632 (whose one grid is today's
# `--memory-grid full`) on the models of session 21 (/work/runs/s21); the mpnet-chain grids came from the device
# (../gpu-mpnet-2026-11-26/call_mpnet_chain.sh). Then: python selection_study.py grids/*.npz --splits 100
cd /work/main
D=/work/shared/data; P=/work/main/.venv/bin/python; CAP=benchmarks/results/gpu-mpnet-2026-11-26/capture_grid.py
G=benchmarks/results/memory-grid-2026-11-26/grids
V="--vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt"
DEV="$D/ncbi-disease/NCBIdevelopset_corpus.txt $V --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt --tune-memory"
cap() { # name, model args
  CAPTURE=$G/$1 OMP_NUM_THREADS=1 $P $CAP evaluate $DEV $2 --output /work/runs/s22/$1-dev.json > /work/runs/s22/$1.log 2>&1
  echo "=== $1 $(date +%T)"; grep "^|" /work/runs/s22/$1.log
}
cap mpnet-dhns-ncbi "--model /work/runs/s21/mpnet/dhns-mpnet/model --pooling mean --backend torch-bf16 --cache-dir /work/runs/s21/mpnet/cache" &
(for s in 42 43 44; do cap minilm-chain-seed$s "--model /work/runs/s21/gpu/seed$s/dhns-model --pooling mean --cache-dir /work/runs/s21/cache-after"; done) &
wait
