# NCBI-disease dev: the memory + the 8-context-word re-ranker at each rerank_weight (seed 42 from session 24; then
# seed 43 and their ensemble once seed 43 is trained). Run from /work/runs/s27 with the package at HEAD.
P=/work/main/.venv/bin/python
M=/work/runs/s21/gpu/seed42/dhns-model; S=/work/runs/s21/scores/seed42-after-dev.json; C=/work/runs/s23/minilm/cache
W=0.1,0.2,0.3,0.5,0.7,1.0,1.5
for spec in "$@"; do set -- $spec
  echo "=== $1 $(date +%T)"; $P sweep.py dev $M $S dev-$1.json $2 $W $C 2> dev-$1.err | cut -c1-400
done
echo "=== done $(date +%T)"
