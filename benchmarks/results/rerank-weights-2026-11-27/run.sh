# NCBI-disease dev, MiniLM chain + memory + the mention-only re-ranker (seed 42): the --tune-weight-on grid of
# rerank_weight scored (a) by one `evaluate` with every --rerank-weight, (b) by one `evaluate` per weight, as before.
# Same process settings, one after the other, nothing else running. Run from a folder of its own with the package at commit f246135 (paths: the development machine's run folders).
P=/work/main/.venv/bin/python; D=/work/shared/data
M=/work/runs/s21/gpu/seed42/dhns-model; S=/work/runs/s21/scores/seed42-after-dev.json; C=/work/runs/s23/minilm/cache
R=${R:-/work/runs/s23/minilm/rr/model}; TAG=${TAG:-s42}
ARGS="$D/ncbi-disease/NCBIdevelopset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt
 --model $M --pooling mean --cache-dir $C --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt
 --memory-settings $S --reranker $R"
WEIGHTS="0.1 0.2 0.3 0.5 0.7 1.0 1.5"
echo "=== one run, every weight $(date -u +%T)"
/usr/bin/time -f "one run: %e s wall, %M KB peak" $P -m spacy_sapbert evaluate $ARGS $(for w in $WEIGHTS; do echo --rerank-weight $w; done) \
    --output $TAG-all.json > $TAG-all.log 2> $TAG-all.err; tail -1 $TAG-all.err
for w in $WEIGHTS; do
  echo "=== weight $w $(date -u +%T)"
  /usr/bin/time -f "weight $w: %e s wall, %M KB peak" $P -m spacy_sapbert evaluate $ARGS --rerank-weight $w \
      --output $TAG-w$w.json > $TAG-w$w.log 2> $TAG-w$w.err; tail -1 $TAG-w$w.err
done
echo "=== done $(date -u +%T)"
