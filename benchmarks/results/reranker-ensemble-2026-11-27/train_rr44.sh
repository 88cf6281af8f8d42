# The mention-only re-ranker of the MiniLM chain with seed 44 (session 23's recipe, seeds 42 and 43 before), run in
# /work/runs/s26/rr44 beside the dev sweeps and the test suite.
D=/work/shared/data
/usr/bin/time -v /work/main/.venv/bin/python -m spacy_sapbert train-reranker $D/ncbi-disease/NCBItrainset_corpus.txt \
  $D/bc5cdr/CDR_TrainingSet.PubTator.txt --label Disease --label SpecificDisease --label DiseaseClass --label Modifier \
  --label CompositeMention --model sentence-transformers/all-MiniLM-L6-v2 --pipeline /work/runs/s23/minilm/linker \
  --output rr --epochs 2 --seed 44 --no-progress > rr.log 2>&1
