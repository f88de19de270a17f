#!/usr/bin/env bash
# Packs what the device check runs into one archive that travels to a lent
# GPU machine (docs/backend.md, "The device check"). That machine is bare: it
# has the NVIDIA driver, CUDA 13 (libcublasLt) and PyTorch's NCCL wheel, and
# none of the Debian libraries headroom links (HDF5, oneDNN, ICU, Open MPI,
# Boost, TOML++), nothing to fetch, and only 64 MiB may travel. So the
# binaries built here go with every shared library they load except glibc's
# own (the device image's glibc is newer than Debian 12's, and glibc is
# backward compatible) and except the GPU stack, which must be the device's:
# libcuda (the driver's), libnccl (218 MB; PyTorch's wheel there has it) and
# libcublasLt (dlopen()ed at the first cuda context). scripts/device-check.sh
# inside the archive finds those at run time.
#
#   bash scripts/device-bundle.sh [BUILD]   (default build; writes build-device-bundle/)
#
# Then, on the device: run(command = "bash build-device-bundle/run.sh",
# carry = ["build-device-bundle"]). run.sh unpacks the archive to /tmp and
# runs scripts/device-check.sh there. The archive is checked here first: its
# binaries must start with only the bundled libraries and glibc
# (HEADROOM_BUNDLE_ROOT=<a bare Debian 12 root> runs that check inside it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=build-device-bundle
binaries=(headroom tests/backend/test_op_harness tests/cuda/test_cuda tests/cuda/test_nccl
  bench/flash_attention_bench)

for b in "${binaries[@]}"; do
  [[ -x $build/$b ]] || { echo "device-bundle: $build/$b is missing (build it first: cmake --build $build)" >&2; exit 2; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bundle/bin" "$stage/bundle/lib" "$stage/bundle/scripts"

# Not bundled: glibc (the device's), the GPU stack (the device's), the vdso.
is_system_library() {
  case $(basename "$1") in
    linux-vdso.so.* | ld-linux-x86-64.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libresolv.so.* | libutil.so.* | libcuda.so.* | libnccl.so.* | libcublas*.so.*)
      return 0 ;;
  esac
  return 1
}

for b in "${binaries[@]}"; do
  # Debug info is most of each binary (-g); the device check needs none.
  objcopy --strip-debug "$build/$b" "$stage/bundle/bin/$(basename "$b")"
  ldd "$build/$b" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    is_system_library "$lib" && continue
    [[ -e $stage/bundle/lib/$(basename "$lib") ]] && continue
    objcopy --strip-debug "$(readlink -f "$lib")" "$stage/bundle/lib/$(basename "$lib")"
  done
done
# Open MPI opens its components (mca_*.so) and help files at run time from
# paths under its prefix (/usr); OPAL_PREFIX relocates that prefix, so the
# same tree under ompi/ is found there.
if [[ -d /usr/lib/x86_64-linux-gnu/openmpi ]]; then
  mkdir -p "$stage/bundle/ompi/lib/x86_64-linux-gnu" "$stage/bundle/ompi/share" "$stage/bundle/ompi/etc"
  cp -a /usr/lib/x86_64-linux-gnu/openmpi "$stage/bundle/ompi/lib/x86_64-linux-gnu/"
  cp -a /usr/share/openmpi "$stage/bundle/ompi/share/"
  cp -a /etc/openmpi "$stage/bundle/ompi/etc/" 2>/dev/null || true
fi
cp scripts/device-check.sh "$stage/bundle/scripts/"
# PyTorch's side of the speed comparison (the device has PyTorch).
mkdir -p "$stage/bundle/bench" && cp bench/torch_qwen3_step.py bench/torch_attention_bench.py "$stage/bundle/bench/"
# The quickstart experiment (also embedded in headroom), for the cuda run.
cp experiments/quickstart.toml "$stage/bundle/"

mkdir -p "$out"
tar -C "$stage" -cf - bundle | xz -T2 -6 > "$out/bundle.tar.xz.partial"
mv "$out/bundle.tar.xz.partial" "$out/bundle.tar.xz"
cat > "$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# On the device machine: unpack the bundle next to /tmp and run its check.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/headroom-bundle && mkdir -p /tmp/headroom-bundle
tar -C /tmp/headroom-bundle -xJf "$here/bundle.tar.xz"
exec bash /tmp/headroom-bundle/bundle/scripts/device-check.sh --bundle /tmp/headroom-bundle/bundle "$@"
EOF
chmod +x "$out/run.sh"

# Every binary must find every library it needs in the bundle (or glibc,
# or the GPU stack the device supplies).
check_root=${HEADROOM_BUNDLE_ROOT:-}
mkdir -p "$stage/unpacked"
tar -C "$stage/unpacked" -xJf "$out/bundle.tar.xz"
missing=0
for b in "$stage"/unpacked/bundle/bin/*; do
  if [[ -n $check_root ]]; then
    rm -rf "$check_root/tmp/bundle-check" && cp -r "$stage/unpacked/bundle" "$check_root/tmp/bundle-check"
    report=$(chroot "$check_root" env LD_LIBRARY_PATH=/tmp/bundle-check/lib \
      ldd "/tmp/bundle-check/bin/$(basename "$b")" 2>&1 || true)
  else
    report=$(LD_LIBRARY_PATH=$stage/unpacked/bundle/lib ldd "$b" 2>&1 || true)
  fi
  if grep -v -E 'libcuda|libnccl|libcublas' <<<"$report" | grep -q 'not found'; then
    echo "device-bundle: $(basename "$b") does not find: $(grep 'not found' <<<"$report" | awk '{print $1}' | xargs)" >&2
    missing=1
  fi
done
[[ $missing -eq 0 ]] || exit 1
echo "device-bundle: $out/bundle.tar.xz $(du -h "$out/bundle.tar.xz" | cut -f1) ($(ls "$stage/unpacked/bundle/lib" | wc -l) libraries, ${#binaries[@]} binaries)"
