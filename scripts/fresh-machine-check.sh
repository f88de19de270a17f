#!/usr/bin/env bash
# Proves the README's two commands on a Debian 12 machine that has never seen
# the project: a minimal bookworm root made with debootstrap, the committed
# tree cloned into it, and `bash scripts/quickstart.sh` then
# `bash scripts/test.sh` run inside it with chroot, as root, with nothing
# from this machine's environment. Slow (packages, a full build): not part of
# CI; run it whenever set-up or dependencies change.
#
#   bash scripts/fresh-machine-check.sh [ROOT]      (default /var/tmp/headroom-fresh)
#
# Needs root and debootstrap (installed here when missing). Prints one line
# per stage and the tail of each command's output; exits non-zero at the
# first stage that fails. The root is made anew on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
root=${1:-/var/tmp/headroom-fresh}
mirror=${HEADROOM_DEBIAN_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" -eq 0 ] || { echo "fresh-machine-check: needs root" >&2; exit 2; }
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "fresh-machine-check: note: uncommitted changes are not checked (the clone takes HEAD)"
fi

mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount_into() {  # mount_into TYPE SOURCE TARGET [options]
  mkdir -p "$3"
  if [ "$1" = bind ]; then mount --bind "$2" "$3"; else mount -t "$1" "$2" "$3" ${4:+-o "$4"}; fi
  mounted+=("$3")
}
stage() { printf '\n== %s  [%s]\n' "$1" "$(date -u +%H:%M:%S)"; }
run_logged() {  # run_logged NAME command...: full output to $root.NAME.log, tail shown
  local log="$root.$1.log"
  shift
  local start=$SECONDS rc=0
  "$@" >"$log" 2>&1 || rc=$?
  tail -n 15 "$log"
  echo "-- exit $rc after $((SECONDS - start)) s (full output: $log)"
  return $rc
}

stage "debootstrap bookworm (minbase) into $root"
rm -rf "$root"
run_logged debootstrap debootstrap --variant=minbase bookworm "$root" "$mirror"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The security and update suites, as a Debian 12 installation has them.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
EOF

# A new machine of this workplace trusts what this one trusts (its package
# registries may be reached through a TLS proxy with a CA of its own): the
# host's bundle becomes a local CA of the new root, which the ca-certificates
# package that setup.sh installs then takes in.
mkdir -p "$root/usr/local/share/ca-certificates"
cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-trust.crt"

stage "clone HEAD ($(git rev-parse --short HEAD)) into $root/root/headroom"
git clone -q "$top" "$root/root/headroom"
echo "what the new machine has: $(chroot "$root" dpkg-query -W -f='.\n' | wc -l) packages," \
  "no compiler: $(chroot "$root" sh -c 'command -v g++ || echo none')," \
  "no CUDA: $(test -e "$root/usr/local/cuda" && echo present || echo absent)"

mount_into proc proc "$root/proc"
mount_into sysfs sys "$root/sys"
mount_into bind /dev "$root/dev"
mount_into devpts devpts "$root/dev/pts" "newinstance,ptmxmode=0666"
mount_into tmpfs tmpfs "$root/dev/shm"
mount_into tmpfs tmpfs "$root/tmp"

in_root() {  # a login-like root shell with nothing from this machine's environment
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/headroom && $1"
}

stage "README command 1: bash scripts/quickstart.sh"
run_logged quickstart in_root "bash scripts/quickstart.sh"

stage "README command 2: bash scripts/test.sh"
run_logged test in_root "bash scripts/test.sh"

stage "fresh-machine-check: both README commands passed on a new Debian 12 root"
