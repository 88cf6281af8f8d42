# The re-ranker in bfloat16 (and float16) on the Xeon: (1) its cost in nlp.pipe beside float32, NCBI-disease test gold
# mentions, the MiniLM-chain linker, both re-ranker kinds, one model and the two-seed ensemble of each; (2) NCBI-disease
# dev with the memory at each ensemble's dev-chosen weight, float32 and bfloat16, scored by evaluate.
# Run from a folder of its own with the package at commit b02760a; nothing else running.
P=/work/main/.venv/bin/python; D=/work/shared/data
L=/work/runs/s23/minilm/linker
M42=/work/runs/s23/minilm/rr/model; MENS=/work/runs/s26/ens-42-43
C42=/work/runs/s24/ctx/rr/model; CENS=/work/runs/s27/ens-ctx-42-43
echo "=== bench $(date -u +%T)"
/usr/bin/time -f "bench: %e s wall, %M KB peak" $P /work/main/benchmarks/bench_reranker.py --data $D --pipeline $L \
    --reranker $M42 --reranker $MENS --reranker $C42 --reranker $CENS --rerank-k 10 --rounds 1 \
    --rerank-backend torch-bf16 --rerank-backend torch-fp16 > bench.out 2> bench.err; tail -1 bench.err; grep "^|\|^machine\|^linker\|^NCBI\|^peak" bench.out
MODEL=/work/runs/s21/gpu/seed42/dhns-model; S=/work/runs/s21/scores/seed42-after-dev.json; CACHE=/work/runs/s23/minilm/cache
ARGS="$D/ncbi-disease/NCBIdevelopset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt
 --model $MODEL --pooling mean --cache-dir $CACHE --train $D/ncbi-disease/NCBItrainset_corpus.txt --memory $D/ncbi-disease/NCBItrainset_corpus.txt
 --memory-settings $S"
for spec in "mention-ens $MENS 0.7" "ctx-ens $CENS 1.0"; do set -- $spec
  for backend in torch torch-bf16; do
    echo "=== dev $1 $backend $(date -u +%T)"
    /usr/bin/time -f "dev $1 $backend: %e s wall, %M KB peak" $P -m spacy_sapbert evaluate $ARGS --reranker $2 --rerank-weight $3 \
        --rerank-backend $backend --output dev-$1-$backend.json --errors dev-$1-$backend-misses.jsonl > dev-$1-$backend.log 2> dev-$1-$backend.err
    tail -1 dev-$1-$backend.err; grep "re-ranker" dev-$1-$backend.log
  done
done
echo "=== done $(date -u +%T)"
