# What an ensemble costs in nlp.pipe beside one of its members, for the mention-only and the 8-context-word
# re-rankers, in the MiniLM chain's saved linker (the pipeline they were trained for), on NCBI-disease test's gold mentions.
cd /work/main && /work/main/.venv/bin/python benchmarks/bench_reranker.py --data /work/shared/data --pipeline /work/runs/s23/minilm/linker \
  --reranker /work/runs/s23/minilm/rr/model --reranker /work/runs/s26/ens-42-43 \
  --reranker /work/runs/s24/ctx/rr/model --reranker /work/runs/s27/ens-ctx-42-43 --rerank-k 10 --rounds 1
