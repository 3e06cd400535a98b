#!/usr/bin/env bash
# Runs the README's commands as a newcomer would, in a bare Debian 12 root file system
# (debootstrap --variant=minbase bookworm) under chroot, so that a package missing from
# scripts/setup.sh fails here instead of on a user's machine.
#
#   bash scripts/bare_debian_check.sh           # the README commands: main job, workflow example, tests
#   bash scripts/bare_debian_check.sh --main-job-epochs 3   # the same, the main job trained for 3 epochs
#   bash scripts/bare_debian_check.sh --quick   # setup, configure, build and the unit tests
#
# Needs root (debootstrap, chroot, mounts). The pristine base system and the downloaded .deb
# files are kept in $LOOM_BARE_CACHE (default /var/cache/loom-bare) between runs; every run
# starts from a fresh copy of the base system, so setup.sh must install every package itself.
# The repository's tracked and untracked (not ignored) files are copied in; build outputs are
# not. The chroot compiles through this machine's own ccache directory when it has one (else
# one in $LOOM_BARE_CACHE): the chroot's compiler is the same Debian package as the host's, so a
# file the host built is not compiled again (on 2 cores a cold build of everything takes about
# an hour), and a header missing in the chroot still fails, since ccache checks every header a
# cached object was made from.
#
# LOOM_SIMD, ONEDNN_MAX_CPU_ISA and OPENBLAS_CORETYPE, when set, are passed into the chroot
# (.ci/run caps the run to AVX2 with them).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

mode=full
main_job=(bash scripts/main.sh)
case "${1:-}" in
  "") ;;
  --quick) mode=quick ;;
  --main-job-epochs)
    [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "--main-job-epochs needs a positive whole number of epochs, got '${2:-}'" >&2; exit 2; }
    main_job+=(--epochs "$2")
    mode="full, the main job for $2 epochs" ;;
  *) echo "usage: $0 [--quick | --main-job-epochs N]" >&2; exit 2 ;;
esac
say() { printf 'bare-debian: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  say "needs root (debootstrap, chroot and mounts); run it as root or with sudo" >&2
  exit 1
fi
for tool in debootstrap unshare chroot; do
  if ! command -v "$tool" >/dev/null; then
    say "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    break
  fi
done

cache=${LOOM_BARE_CACHE:-/var/cache/loom-bare}
base="$cache/bookworm-minbase"
mkdir -p "$cache/apt-archives/partial"
ccache_dir="$cache/ccache"
if command -v ccache >/dev/null; then
  ccache_dir=$(ccache -k cache_dir 2>/dev/null || echo "$ccache_dir")
fi
mkdir -p "$ccache_dir"
# the instruction-set caps, passed through env -i below
caps=""
for v in LOOM_SIMD ONEDNN_MAX_CPU_ISA OPENBLAS_CORETYPE; do
  [ -n "${!v:-}" ] && caps="$caps $v=${!v}"
done
[ -n "$caps" ] && say "capped:$caps"

# The Debian mirror this machine's apt already uses (debootstrap's default when none is set).
mirror=$( (grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
           awk '$1 == "deb" {print $2}' /etc/apt/sources.list 2>/dev/null) |
         grep -v -- '-security' | head -n 1 || true)

if [ ! -f "$base/.loom-complete" ]; then
  say "making the base system (debootstrap --variant=minbase bookworm${mirror:+ from $mirror})"
  rm -rf "$base"
  debootstrap --variant=minbase bookworm "$base" ${mirror:+"$mirror"} >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log"; say "debootstrap failed"; exit 1; }
  touch "$base/.loom-complete"
fi

work=$(mktemp -d /var/tmp/loom-bare.XXXXXX)
cleanup() { [ -n "${work:-}" ] && [ -d "$work" ] && rm -rf --one-file-system "$work"; }
trap cleanup EXIT
root="$work/root"
start=$(date +%s)
cp -a "$base" "$root"
rm -f "$root/.loom-complete"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's network as it is: its resolver above, and the certificate authorities it trusts
# (an intercepting proxy's included) for pip's download of the tests' pinned PyPI packages
# (scripts/test_venv.sh). A bare Debian on an open network needs neither.
host_ca=""
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/loom-host-ca.crt"
  host_ca="PIP_CERT=/etc/loom-host-ca.crt"
fi
mkdir -p "$root/loom" "$root/ccache"
git -C "$repo" ls-files -z --cached --others --exclude-standard |
  (cd "$repo" && tar --null --no-recursion -T - -cf - 2>/dev/null) | tar -xf - -C "$root/loom"
say "fresh root file system ready in $(( $(date +%s) - start )) s"

if [ "$mode" != quick ]; then
  commands="${main_job[*]}"' && bash scripts/flow_example.sh && bash scripts/test.sh'
else
  commands='bash scripts/build.sh && cd build && ctest --output-on-failure -j "$(nproc)" -E "pytorch|python|numpy|zoo|main_job"'
fi

# A private mount namespace: the mounts vanish with it, so nothing stays mounted on the host
# even when this script is killed.
set +e
unshare --mount --propagation private bash -euo pipefail -c '
  root=$1; cache=$2; commands=$3; host_ca=$4; ccache_dir=$5; caps=$6
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --rbind /dev "$root/dev"
  mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
  mount --bind "$ccache_dir" "$root/ccache"
  exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM=dumb CI=true CCACHE_DIR=/ccache $host_ca $caps \
    /bin/bash -c "cd /loom && $commands"
' bare "$root" "$cache" "$commands" "$host_ca" "$ccache_dir" "$caps"
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
if [ $rc -ne 0 ]; then
  say "FAILED (exit $rc) after ${elapsed} s: the README's commands do not work on a bare Debian 12"
  exit $rc
fi
say "passed (${mode}) in ${elapsed} s: the README's commands work on a bare Debian 12"
