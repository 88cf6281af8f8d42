# NCBI-disease test and BC5CDR-disease dev, once, at the rerank_weight NCBI-disease dev chose (strict acc@1 with the
# memory, the smaller on a tie, as add-reranker --tune-weight-on chooses): seed 42 0.5, seed 43 0.1, their ensemble
# 0.7; the ensemble also at 1.0 (no weight tuning).
P=/work/main/.venv/bin/python
M=/work/runs/s21/gpu/seed42/dhns-model; S=/work/runs/s21/scores/seed42-after-dev.json; C=/work/runs/s23/minilm/cache
R42=/work/runs/s23/minilm/rr/model; R43=/work/runs/s25/rr43/rr/model
for corpus in ncbi-test bc5cdr; do
for spec in "s42 $R42 0.5" "s43 $R43 0.1" "ens-42-43 $PWD/ens-42-43 0.7,1.0"; do set -- $spec
  echo "=== $corpus $1 $(date +%T)"; $P sweep.py $corpus $M $S $corpus-$1.json $2 $3 $C 2> $corpus-$1.err | cut -c1-400
done; done
echo "=== done $(date +%T)"
