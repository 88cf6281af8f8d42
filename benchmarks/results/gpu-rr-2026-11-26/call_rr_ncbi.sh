#!/bin/bash
# After call_chain.sh (same warm machine): a re-ranker trained like the chain's, on NCBI-disease train alone (the
# workflow's `reranker` step), scored with the memory settings dev chose for the chain ($W/dhns-dev.json): NCBI-disease
# dev, then NCBI-disease test and BC5CDR-disease dev. Its reports and logs come back as one file, rr-ncbi.tar.gz.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
D=${D:-/root/devsite}; W=${W:-$D/mpnet}; OUT=${OUT:-/tmp/out}; DATA=${DATA:-$D/data}; SEED=${SEED:-42}
export PYTHONPATH=$PWD:$D/site
[ -f "$W/dhns-dev.json" ] || { echo "call_chain.sh did not finish here: no $W/dhns-dev.json"; exit 3; }
V="--vocab $DATA/medic/medic_06Jul2012.txt --spell-check $DATA/medic/ncbi-spell-check.txt"
NCBI=$DATA/ncbi-disease; CDR=$DATA/bc5cdr; N=rr-ncbi
finish() { tar -C "$W" -czf "$OUT/$N.tar.gz" $(cd "$W" && ls $N-*.json $N-*.log $N/*.json* 2>/dev/null); date -u; }
trap finish EXIT
S0=$(date +%s)
[ -f "$W/$N/model/config.json" ] || python3 -m spacy_sapbert train-reranker "$NCBI/NCBItrainset_corpus.txt" --model "$RR_BASE" --pipeline "$W/linker" \
    --output "$W/$N" --epochs 2 --seed $SEED --no-progress > "$W/$N-train.log" 2>&1 || { echo "train-reranker failed"; tail -5 "$W/$N-train.log"; exit 8; }  # trained once, kept when scored again
echo "re-ranker on NCBI-disease train: $(( $(date +%s) - S0 )) s"
M="--model $W/dhns/model --reranker $W/$N/model --memory-settings $W/dhns-dev.json --pooling mean --cache-dir $W/cache"
score() {  # name, args...
  local name=$1; shift
  python3 -m spacy_sapbert evaluate "$@" $M --output "$W/$N-$name.json" > "$W/$N-$name.log" 2>&1 \
      || { echo "evaluate $name failed"; tail -3 "$W/$N-$name.log"; return 1; }
  echo "=== $N $name"; grep "^|" "$W/$N-$name.log"
}
score dev "$NCBI/NCBIdevelopset_corpus.txt" $V --train "$NCBI/NCBItrainset_corpus.txt" --memory "$NCBI/NCBItrainset_corpus.txt" &
score ncbi-test "$NCBI/NCBItestset_corpus.txt" $V --train "$NCBI/NCBItrainset_corpus.txt" --train "$NCBI/NCBIdevelopset_corpus.txt" \
    --memory "$NCBI/NCBItrainset_corpus.txt" --memory "$NCBI/NCBIdevelopset_corpus.txt" &
score bc5cdr "$CDR/CDR_DevelopmentSet.PubTator.txt" --label Disease $V --train "$CDR/CDR_TrainingSet.PubTator.txt" \
    --memory "$CDR/CDR_TrainingSet.PubTator.txt" &
wait
