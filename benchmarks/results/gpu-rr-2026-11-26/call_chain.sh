#!/bin/bash
# Device call 5 (after the uploads, same warm machine): check and unpack the weights, then run the mpnet chain of
# ../gpu-mpnet-2026-11-26 (SAP, DHNS on both corpora, the memory) with its re-ranker stage, the cross-encoder started
# from all-mpnet-base-v2 itself (the `best` workflow's base_model when the chain's base is mpnet), trained on the
# chain's candidates for the disease mentions of NCBI-disease train + BC5CDR train. Then call_rr_ncbi.sh: the same
# re-ranker trained on NCBI-disease train alone, as the workflow's `reranker` step trains it today.
set -u
D=${D:-/root/devsite}; W=${W:-$D/mpnet}; mkdir -p "$W"
if [ ! -f "$W/mpnet/config.json" ]; then
  [ "$(cat "$D"/parts/mpnet-fp16.tar.xz.part* | md5sum | cut -c1-32)" = "${XZ_MD5:-7e18a17ce11ba83b9e20e4193ef82a36}" ] \
      || { echo "the uploaded parts are not the whole xz tar"; ls -l "$D/parts"; exit 4; }
  cat "$D"/parts/mpnet-fp16.tar.xz.part* | xz -dc | tar -C "$W" -xf - || exit 4
  PYTHONPATH=$D/site python3 benchmarks/results/gpu-sap-2026-11-26/convert_model.py "$W/mpnet-fp16" "$W/mpnet" float32 2>&1 | tail -1 || exit 4
fi
export D W RR_BASE=${RR_BASE:-$W/mpnet}
bash benchmarks/results/gpu-mpnet-2026-11-26/call_mpnet_chain.sh
bash benchmarks/results/gpu-rr-2026-11-26/call_rr_ncbi.sh
