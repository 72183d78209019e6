#!/bin/bash
# Run 26: one traced DeepSeek prefill at 25 % and the store file's O_DIRECT read rate by block size.
# The trace was taken at 11:53 UTC on this commit's build (trace.json.gz is it, gzip -9); the
# summary is scripts/dev/prefill_layers.py's (generate.log was not kept from that run); dd ran at 12:28 UTC, nothing else running.
cd "$(dirname "$0")/../../../.."
d=docs/bench/run26/prefill-trace
build/app/zipmoe generate out/bench/dsv2lite5-nibble-store --raw \
  --prompt "the quick brown fox jumps over the lazy dog and then it runs far away" --max-tokens 3 --budget 25% \
  --replay-trace ../shared/data/traces/deepseek-v2-lite.tsv --trace /tmp/z25.json 2> $d/generate.log
gzip -9 -c /tmp/z25.json > $d/trace.json.gz
python3 scripts/dev/prefill_layers.py /tmp/z25.json > $d/summary.json
for bs in 1M 4M 16M; do
  dd if=out/bench/dsv2lite5-nibble-store/experts.bin of=/dev/null bs=$bs count=$((1073741824 / $(numfmt --from=iec $bs))) iflag=direct
done 2> $d/dd.log
