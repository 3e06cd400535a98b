#!/usr/bin/env bash
# The peers of bench/decode_bench.cpp (docs/benchmarks.md, "Text generation"): batch-1 greedy
# decode of a random-init GPT-2 124M after a 32-token prompt (64 new tokens, tokens/s) and a
# 512-token prefill (seconds), at 1 and 2 threads, each thread count in a process of its own:
#   - Hugging Face transformers on PyTorch (bench/transformers_decode_peer.py, in the hf test venv
#     of tests/hf/requirements.txt, made by scripts/test_venv.sh hf);
#   - llama.cpp through llama-cpp-python (bench/llama_decode_peer.py, bench/requirements-llama.txt),
#     the same weights written as GGUF F32 and Q8_0.
# Prints decode_bench's JSON lines, with "system" naming the peer.
#
#   bench/decode_peers.sh                 # both peers, 1 and 2 threads
#   THREADS="2" PEERS=llama bench/decode_peers.sh
#
# Environment: BUILD_DIR (default <repo>/build: its hf-venv; the llama venv, the weights and the
# GGUF files go in BUILD_DIR/decode-peers), THREADS, PEERS ("transformers llama").
# llama-cpp-python is a source package: installing it compiles llama.cpp (about 15 minutes on 2
# cores), here with nice -n 19 and one build job so that a shared machine stays usable.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
threads="${THREADS:-1 2}"
peers="${PEERS:-transformers llama}"
work="$build/decode-peers"
mkdir -p "$work"

source "$here/build_targets.sh"
hf_python="$build/hf-venv/bin/python"
[ -x "$hf_python" ] || bash "$repo/scripts/test_venv.sh" hf
# shellcheck disable=SC2086
for peer in $peers; do
  case "$peer" in
    transformers) "$hf_python" "$here/transformers_decode_peer.py" --threads $threads ;;
    llama)
      CMAKE_BUILD_PARALLEL_LEVEL=1 nice -n 19 bash -c "source '$here/build_targets.sh'; bench_venv '$work/llama-venv' '$here/requirements-llama.txt'"
      [ -f "$work/gpt2.npz" ] || "$hf_python" "$here/transformers_decode_peer.py" --save-npz "$work/gpt2.npz"
      "$work/llama-venv/bin/python" "$here/llama_decode_peer.py" --npz "$work/gpt2.npz" --work "$work" --threads $threads ;;
    *) echo "decode_peers: unknown peer '$peer' (valid: transformers, llama)" >&2; exit 2 ;;
  esac
done
