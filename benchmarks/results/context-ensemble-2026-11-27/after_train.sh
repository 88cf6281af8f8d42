# Once seed 43 is trained: the stopped seed-42 dev sweep goes on, then the ensemble of the two context re-rankers
# (every weight of the grid) and seed 43 alone (0.5, 0.7, 1.0), all on NCBI-disease dev.
P=/work/main/.venv/bin/python
M=/work/runs/s21/gpu/seed42/dhns-model; S=/work/runs/s21/scores/seed42-after-dev.json; C=/work/runs/s23/minilm/cache
while pgrep -f "train-reranker.*seed 43" > /dev/null; do sleep 10; done
grep -E "Elapsed|Maximum res" ctx43/rr.log
pkill -CONT -f "sweep.py dev"
while pgrep -f "sweep.py dev" > /dev/null; do sleep 10; done
cat run_ctx_dev.out
[ -d ens-ctx-42-43 ] || $P -m spacy_sapbert combine-rerankers /work/runs/s24/ctx/rr/model ctx43/rr/model --output ens-ctx-42-43 || exit 1
echo "=== ens-ctx-42-43 $(date +%T)"; $P sweep.py dev $M $S dev-ens-ctx-42-43.json $PWD/ens-ctx-42-43 0.1,0.2,0.3,0.5,0.7,1.0,1.5 $C 2> dev-ens-ctx-42-43.err | cut -c1-400
echo "=== ctx43 $(date +%T)"; $P sweep.py dev $M $S dev-ctx43.json $PWD/ctx43/rr/model 0.5,0.7,1.0 $C 2> dev-ctx43.err | cut -c1-400
echo "=== done $(date +%T)"
