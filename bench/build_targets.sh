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

# bench_venv DIR REQUIREMENTS [--system-site-packages]: a Python venv at DIR with the pinned
# REQUIREMENTS installed from PyPI, made again when they changed. With --system-site-packages it
# is made by Debian's /usr/bin/python3 and sees its python3-* packages (python3-torch), else by
# the python3 first on PATH.
bench_venv() {
  local dir="$1" req="$2"
  shift 2
  if [ -x "$dir/bin/python" ] && cmp -s "$req" "$dir/.requirements"; then return; fi
  echo "$(basename "$0"): installing $(basename "$req") into $dir" >&2
  rm -rf "$dir"
  local python=python3
  [ "${1:-}" = --system-site-packages ] && python=/usr/bin/python3
  "$python" -m venv "$@" "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$dir/.requirements"
}
