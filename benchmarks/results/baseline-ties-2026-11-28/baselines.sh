#!/bin/bash
# The baselines' biosyn tie fix, before (old: the commit before it) and after (new: /work/main at the fix)
for src in /work/runs/s33/old /work/runs/s33/new; do
  name=$(basename $src)
  (cd $src && PY=/work/main/.venv/bin/python DATA=/work/shared/data CACHE=/work/runs/s32/evalcache TABLES="ncbi-dev ncbi-test bc5cdr-disease-dev" \
     bash benchmarks/eval_table.sh "" "" /work/runs/s33/tables-$name)
done
