# Sourced by the bench/*.sh scripts, which set $repo and $build: bench_build TARGET... configures
# $build as a Release build without tests and examples (Ninja when it is installed and $build is
# not already a Makefile build) and builds the targets, quietly.
bench_build() {
  local gen=()
  if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then gen=(-G Ninja); fi
  cmake -S "$repo" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$build" --target "$@" -j"${JOBS:-2}" >/dev/null
}
