# Sourced by the bench/*.sh scripts, which set $repo and $build: bench_build TARGET... configures
# $build as a Release build without tests and examples (Ninja when it is installed and $build is
# not already a Makefile build) and builds the targets, quietly; bench_venv makes a peer's venv.
bench_build() {
  local gen=()
  if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then gen=(-G Ninja); fi
  cmake -S "$repo" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$build" --target "$@" -j"${JOBS:-2}" >/dev/null
}

# bench_venv DIR REQUIREMENTS [--system-site-packages | --torch-site-packages]: a Python venv at
# DIR with the pinned REQUIREMENTS installed from PyPI, made again when they changed. With
# --system-site-packages it is made by Debian's /usr/bin/python3 and sees its python3-* packages
# (python3-torch 1.13); with --torch-site-packages by the python3 first on PATH, seeing what
# bench/requirements.txt installed there (torch 2.15); else by that python3, alone.
bench_venv() {
  local dir="$1" req="$2"
  shift 2
  if [ -x "$dir/bin/python" ] && cmp -s "$req" "$dir/.requirements"; then return; fi
  echo "$(basename "$0"): installing $(basename "$req") into $dir" >&2
  rm -rf "$dir"
  local python=python3 flags=()
  case "${1:-}" in
    --system-site-packages) python=/usr/bin/python3; flags=(--system-site-packages) ;;
    --torch-site-packages) flags=(--system-site-packages) ;;
  esac
  "$python" -m venv "${flags[@]}" "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$dir/.requirements"
}
