#!/usr/bin/env bash
# `pip install .` of the checkout into a fresh venv, then the installed package trains
# (tests/python/pip_train.py) from a folder outside the checkout (ctest python_pip_install,
# docs/python.md, "pip install"). Nothing is downloaded: the venv sees Debian's numpy (system
# site packages), and the build runs without isolation on the pinned scikit-build-core and
# nanobind of the tools venv, which a .pth file shows the new venv while pip runs and which is
# removed before the check. The wheel's CMake build folder, WORK/wheel-build, is kept between runs:
# the first builds libloom and the module (several minutes), a later one only what changed.
#   tests/python/pip_install.sh SOURCE_DIR WORK_DIR TOOLS_VENV
set -euo pipefail
src=$(cd "${1:?usage: pip_install.sh SOURCE_DIR WORK_DIR TOOLS_VENV}" && pwd)
work=${2:?usage: pip_install.sh SOURCE_DIR WORK_DIR TOOLS_VENV}
tools=${3:?usage: pip_install.sh SOURCE_DIR WORK_DIR TOOLS_VENV}
[ -x "$tools/bin/python" ] || {
  echo "pip_install: no venv at $tools: run scripts/setup.sh (scripts/test_venv.sh pytools python/requirements-tools.txt)"
  exit 1
}
mkdir -p "$work"
work=$(cd "$work" && pwd)
venv=$work/venv
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tools_site=$("$tools/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$tools_site" > "$site/loom-build-tools.pth"  # after the venv's own site packages: its pip first
unset PYTHONPATH
# two compile jobs unless told (ninja alone would run nproc + 2)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
start=$(date +%s)
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1 PIP_NO_CACHE_DIR=1 \
  "$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index \
  --config-settings build-dir="$work/wheel-build" "$src"
echo "pip_install: pip install . took $(( $(date +%s) - start )) s"
rm "$site/loom-build-tools.pth"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
LOOM_NUM_THREADS=2 "$venv/bin/python" "$src/tests/python/pip_train.py"
