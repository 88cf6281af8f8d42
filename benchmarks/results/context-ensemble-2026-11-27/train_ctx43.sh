# The MiniLM re-ranker with 8 context words, seed 43 (session 24's recipe, seed 42 before), on the MiniLM chain.
D=/work/shared/data
/usr/bin/time -v /work/main/.venv/bin/python -m spacy_sapbert train-reranker $D/ncbi-disease/NCBItrainset_corpus.txt \
  $D/bc5cdr/CDR_TrainingSet.PubTator.txt --label Disease --label SpecificDisease --label DiseaseClass --label Modifier \
  --label CompositeMention --model sentence-transformers/all-MiniLM-L6-v2 --pipeline /work/runs/s23/minilm/linker \
  --output rr --epochs 2 --seed 43 --context-words 8 --no-progress --resume > rr.log 2>&1
