# NCBI-disease dev: the memory + re-ranker at each rerank_weight, for the MiniLM chain's re-rankers (seeds 42, 43)
# and their ensemble (combine-rerankers). Run from /work/runs/s26 with the package at HEAD.
P=/work/main/.venv/bin/python
M=/work/runs/s21/gpu/seed42/dhns-model; S=/work/runs/s21/scores/seed42-after-dev.json; C=/work/runs/s23/minilm/cache
R42=/work/runs/s23/minilm/rr/model; R43=/work/runs/s25/rr43/rr/model
[ -d ens-42-43 ] || $P -m spacy_sapbert combine-rerankers $R42 $R43 --output ens-42-43 || exit 1
W=0.1,0.2,0.3,0.5,0.7,1.0,1.5
for spec in "s42 $R42" "s43 $R43" "ens-42-43 $PWD/ens-42-43"; do set -- $spec
  echo "=== $1 $(date +%T)"; $P sweep.py dev $M $S dev-$1.json $2 $W $C 2> dev-$1.err | cut -c1-400
done
echo "=== done $(date +%T)"
