#!/usr/bin/env bash
# Part a of the vLLM offline bundle (the compiled _C_stable_libtorch.abi3.so, xz: 63.7 MB)
# plus this checkout is over the 64 MiB one device call carries. Split it in two here, and
# join it there over two calls made back to back (the machine keeps /tmp between them):
#
#   bash bench/h200/split_a.sh split      # here: .vllm-offline/a -> .vllm-offline/a1, a2
#   run(carry [".vllm-offline/a1"], "bash bench/h200/split_a.sh join")   # keeps the first half
#   run(carry [".vllm-offline/a2"], "bash bench/h200/split_a.sh join")   # joins and unpacks
#
# then part b and part c as the bundle's README says. `join` unpacks into $VLLM_SITE
# (default /tmp/vsite) where the bundle's own stage.sh looks for it. SPLIT_BYTES: the first
# half's size (default 40000000).
set -euo pipefail
. "$(dirname "$0")/stage.sh"
B=${VLLM_OFFLINE:-.vllm-offline}
S=${VLLM_SITE:-/tmp/vsite}
KEPT=${SPLIT_KEPT:-/tmp/vllm-offline-a1.part}
SO=_C_stable_libtorch.abi3.so

case "${1:-}" in
  split)
    src="$B/a/$SO.xz"
    [ -f "$src" ] || { echo "no $src: build the bundle first (its build.sh)" >&2; exit 2; }
    rm -rf "$B/a1" "$B/a2" && mkdir -p "$B/a1" "$B/a2"
    head -c "${SPLIT_BYTES:-40000000}" "$src" > "$B/a1/part"
    tail -c +"$(( ${SPLIT_BYTES:-40000000} + 1 ))" "$src" > "$B/a2/part"
    echo "split $src: $B/a1/part $(stat -c %s "$B/a1/part") B, $B/a2/part $(stat -c %s "$B/a2/part") B"
    ;;
  join)
    if [ -f "$S/vllm/$SO" ]; then
      echo "part a already unpacked in $S"
    elif [ -f "$B/a2/part" ] && [ -f "$KEPT" ]; then
      # The device keeps a carried folder between calls, so a1 may still be beside a2.
      mkdir -p "$S/vllm"
      cat "$KEPT" "$B/a2/part" | xz -dc > "$S/vllm/$SO.tmp"
      mv "$S/vllm/$SO.tmp" "$S/vllm/$SO" && rm -f "$KEPT"
      echo "part a unpacked: $S/vllm/$SO"
    elif [ -f "$B/a1/part" ]; then
      cp "$B/a1/part" "$KEPT" && echo "kept the first half of part a in $KEPT; carry a2 next"
    elif [ -f "$B/a2/part" ]; then
      echo "no $KEPT: carry a1 first (the machine was released between?)" >&2
      exit 2
    else
      echo "neither $B/a1/part nor $B/a2/part is here: carry one" >&2
      exit 2
    fi
    ;;
  *)
    echo "usage: bash bench/h200/split_a.sh split|join" >&2
    exit 2
    ;;
esac
