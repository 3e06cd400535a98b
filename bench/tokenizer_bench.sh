#!/usr/bin/env bash
# Byte-level BPE encoding speed, Loom against PyPI tokenizers on one thread (docs/text.md,
# "Speed"): tests/text/check_tokenizers.py prepare writes the 1.3 MB corpus, the tokenizers and
# tokenizers' CPU time; loom_text_check bpe checks every id, then prints both speeds and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test_venv.sh text
cmake --build build --target loom_text_check
dir=build/tokenizer_bench
rm -rf "$dir"
mkdir -p "$dir"
build/text-venv/bin/python tests/text/check_tokenizers.py prepare "$dir"
build/tests/text/loom_text_check bpe "$dir"
