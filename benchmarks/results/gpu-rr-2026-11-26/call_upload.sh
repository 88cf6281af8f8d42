#!/bin/bash
# Device calls 1-5: keep the carried part of the xz-compressed float16 all-mpnet-base-v2 tar (.dev/u/N) in $D/parts.
# xz takes the 219.7 MB tar to 197.0 MB, which with the packages and corpora fits five calls of 64 MiB (with the
# working tree) instead of six.
D=${D:-/root/devsite}; mkdir -p "$D/parts"
cp .dev/u/*/mpnet-fp16.tar.xz.part* "$D/parts/" || exit 2
ls -l "$D/parts" | tail -n +2; date -u
