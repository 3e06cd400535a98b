#!/usr/bin/env bash
# The peers of bench/decode_bench.cpp (docs/benchmarks.md, "Text generation"): batch-1 greedy
# decode of a random-init GPT-2 124M after a 32-token prompt (64 new tokens, tokens/s) and a
# 512-token prefill (seconds), at 1 and 2 threads, each thread count in a process of its own:
#   - Hugging Face transformers on PyTorch 2.15 (bench/transformers_decode_peer.py, in a venv of
#     bench/requirements-transformers.txt over the python3 that bench/requirements.txt gives
#     torch 2.15; the hf test venv of tests/hf/requirements.txt, on Debian's torch 1.13, writes
#     the weights that the llama peer converts);
#   - llama.cpp through llama-cpp-python (bench/llama_decode_peer.py, bench/requirements-llama.txt),
#     the same weights written as GGUF F32 and Q8_0.
# Prints decode_bench's JSON lines, with "system" naming the peer.
#
# One more peer, not run by default: llama-server, the peer of bench/text_serve_bench.cpp
# (llama-cpp-python's OpenAI-compatible server under 1 and 8 concurrent streaming clients,
# bench/llama_serve_peer.py), which adds the package's server extras
# (bench/requirements-llama-server.txt) to the llama venv; it prints text_serve_bench's lines.
#
#   bench/decode_peers.sh                 # both peers, 1 and 2 threads
#   THREADS="2" PEERS=llama bench/decode_peers.sh
#   THREADS="2" PEERS=llama-server bench/decode_peers.sh
#
# Environment: BUILD_DIR (default <repo>/build: its hf-venv; the llama venv, the weights and the
# GGUF files go in BUILD_DIR/decode-peers), THREADS, PEERS ("transformers llama"; "llama-server"),
# ROUNDS (llama-server: completions per client, default 2).
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
# The llama venv: llama-cpp-python compiles llama.cpp from its source package. It is built from
# the unpacked package in $work/llama-src with its build folder kept in $work/llama-build (and
# ccache), at nice 19 with one job, so that a build cut short (it takes an hour and more on a
# shared 2-core machine) resumes where it stopped the next time.
llama_venv() {
  local venv="$work/llama-venv" req="$here/requirements-llama.txt"
  if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/.requirements"; then return; fi
  local version
  version=$(sed -n 's/^llama-cpp-python==//p' "$req")
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  grep -v '^llama-cpp-python==' "$req" > "$work/requirements-llama-deps.txt"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$work/requirements-llama-deps.txt"
  local src="$work/llama-src/llama_cpp_python-$version"
  if [ ! -d "$src" ]; then
    "$venv/bin/python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work/sdist"
    mkdir -p "$work/llama-src" && tar xzf "$work/sdist/llama_cpp_python-$version.tar.gz" -C "$work/llama-src"
  fi
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  echo "decode_peers: building llama-cpp-python $version (resumable: $work/llama-build)" >&2
  CMAKE_BUILD_PARALLEL_LEVEL=1 CMAKE_ARGS="${launcher[*]} -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF" \
    nice -n 19 "$venv/bin/python" -m pip install -q --no-deps --disable-pip-version-check \
    -C build-dir="$work/llama-build" "$src"
  cp "$req" "$venv/.requirements"
}

# llama-cpp-python's server extras, added to the llama venv once it is built: pure-Python wheels
# (pydantic-core's is binary), pinned, constrained by the llama pins so that nothing of the decode
# peer moves; the marker is written after the install, so one cut short is done again.
llama_server_extras() {
  local venv="$work/llama-venv" req="$here/requirements-llama-server.txt"
  if cmp -s "$req" "$venv/.requirements-server"; then return; fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -c <(grep -v '^llama-cpp-python==' "$here/requirements-llama.txt") -r "$req"
  cp "$req" "$venv/.requirements-server"
}

# shellcheck disable=SC2086
for peer in $peers; do
  case "$peer" in
    transformers)
      if ! python3 -c 'import torch' 2>/dev/null; then python3 -m pip install -q -r "$here/requirements.txt"; fi
      bench_venv "$work/transformers-venv" "$here/requirements-transformers.txt" --torch-site-packages
      "$work/transformers-venv/bin/python" "$here/transformers_decode_peer.py" --threads $threads ;;
    llama)
      llama_venv
      [ -f "$work/gpt2.npz" ] || "$hf_python" "$here/transformers_decode_peer.py" --save-npz "$work/gpt2.npz"
      "$work/llama-venv/bin/python" "$here/llama_decode_peer.py" --npz "$work/gpt2.npz" --work "$work" --threads $threads ;;
    llama-server)
      llama_venv
      llama_server_extras
      [ -f "$work/gpt2-F32.gguf" ] || [ -f "$work/gpt2.npz" ] || "$hf_python" "$here/transformers_decode_peer.py" --save-npz "$work/gpt2.npz"
      "$work/llama-venv/bin/python" "$here/llama_serve_peer.py" --npz "$work/gpt2.npz" --work "$work" \
        --rounds "${ROUNDS:-2}" --threads $threads ;;
    *) echo "decode_peers: unknown peer '$peer' (valid: transformers, llama, llama-server)" >&2; exit 2 ;;
  esac
done
