# The third seed (44, trained here) on NCBI-disease dev: alone, and in every ensemble with seeds 42 and 43, at the
# trained weight 1.0 and at 0.7, the weight dev chose for the ensemble of 42 and 43; a robustness check, nothing chosen here.
P=/work/main/.venv/bin/python
M=/work/runs/s21/gpu/seed42/dhns-model; S=/work/runs/s21/scores/seed42-after-dev.json; C=/work/runs/s23/minilm/cache
R42=/work/runs/s23/minilm/rr/model; R43=/work/runs/s25/rr43/rr/model; R44=$PWD/rr44/rr/model
[ -d ens-42-44 ] || $P -m spacy_sapbert combine-rerankers $R42 $R44 --output ens-42-44 || exit 1
[ -d ens-43-44 ] || $P -m spacy_sapbert combine-rerankers $R43 $R44 --output ens-43-44 || exit 1
[ -d ens-42-43-44 ] || $P -m spacy_sapbert combine-rerankers $R42 $R43 $R44 --output ens-42-43-44 || exit 1
for spec in "s44 $R44" "ens-42-44 $PWD/ens-42-44" "ens-43-44 $PWD/ens-43-44" "ens-42-43-44 $PWD/ens-42-43-44"; do set -- $spec
  echo "=== $1 $(date +%T)"; $P sweep.py dev $M $S dev-$1.json $2 0.7,1.0 $C 2> dev-$1.err | cut -c1-400
done
echo "=== done $(date +%T)"
