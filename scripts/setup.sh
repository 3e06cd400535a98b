#!/usr/bin/env bash
# Installs the Debian packages Loom needs, by name, when any is missing.
#   scripts/setup.sh               what building, testing and the main job need
#   scripts/setup.sh --sanitizers  also clang, its sanitizer and libFuzzer runtimes and
#                                  llvm-symbolizer (scripts/sanitized_build.sh)
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config zlib1g-dev
  libopenblas-dev libdnnl-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libzstd-dev libfmt-dev
  # the store: embedded database, PostgreSQL client and SHA-256 of blobs; the PostgreSQL server
  # binaries for the tests' throwaway server (tests/unit/store/pg_server.sh)
  libsqlite3-dev libpq-dev libssl-dev postgresql
  dataset-fashion-mnist
  # data::read_image and ImageFolder: JPEG (libjpeg-turbo's TurboJPEG API) and PNG decoding
  libturbojpeg0-dev libpng-dev
  # the test suite's reference: Debian's PyTorch and NumPy under /usr/bin/python3
  python3 python3-torch python3-numpy
  # the model zoo's parameter-count and output reference (tests/zoo/check_params.py)
  python3-torchvision
  # loom::dist: Open MPI's library and headers, and mpirun for the multi-process tests
  libopenmpi-dev openmpi-bin
  # ONNX export: libonnx's generated protobuf classes, checker and shape inference; the ONNX
  # backend test data (import tests); python3-venv for the tests' Python peers
  # (scripts/test_venv.sh: PyPI, pinned in tests/<name>/requirements.txt)
  libonnx-dev libprotobuf-dev libonnx-testdata python3-venv
  # loom::serve: the model server's and the dashboard's event-driven HTTP layer is Boost.Beast
  # on Boost.Asio (header-only; src/serve/http_server.cpp, docs/serve.md "HTTP")
  libboost-dev
  # cpp-httplib: the HTTP client of the serve and ui unit tests and of bench/serve_load
  libcpp-httplib-dev
  # the dashboard's browser test (tests/ui): headless Chromium driven through selenium, all
  # Debian's (the driver is never downloaded)
  chromium chromium-driver python3-selenium
  # the dashboard draws a model's graph with Graphviz's dot when it is installed (tested when it is)
  graphviz
  # data::BpeTokenizer: PCRE2 runs tokenizer.json's pre-tokenizer expressions (Unicode properties,
  # lookahead); data::SentencePieceTokenizer: Debian's SentencePiece library and trainer
  libpcre2-dev libsentencepiece-dev
  # the Python module (python/, docs/python.md): Python's headers to build it against
  # /usr/bin/python3, pytest to run its tests there (nanobind comes from PyPI, pinned, below)
  python3-dev python3-pytest
  # the text examples' corpus (word2vec, character LSTM): fortune cookies in /usr/share/games/fortunes
  fortunes
)
if [[ ${1:-} == --sanitizers ]]; then
  PACKAGES+=(clang libclang-rt-dev llvm)
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# the tests' Python peers: ONNX Runtime in build/onnx-venv, TensorBoard's reader in
# build/tensorboard-venv, the Triton client in build/serve-venv, tokenizers and sentencepiece in
# build/text-venv, transformers (on Debian's python3-torch, seen through the venv's system site
# packages) in build/hf-venv (each does nothing when it is there already); nanobind, the Python
# module's bindings, in build/python-venv; mypy, scikit-build-core and nanobind, the Python
# package's checks (stubs, mypy, pip install: docs/python.md), in build/pytools-venv
for venv in onnx tensorboard serve text hf; do
  bash "$(dirname "$0")/test_venv.sh" "$venv"
done
bash "$(dirname "$0")/test_venv.sh" python python/requirements-build.txt  # a path from the checkout
bash "$(dirname "$0")/test_venv.sh" pytools python/requirements-tools.txt
