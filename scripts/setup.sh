#!/usr/bin/env bash
# Installs what headroom needs from Debian 12 packages, once: a package that is
# already installed is not touched, so running this again costs a dpkg query.
# CUDA (nvcc, cuBLAS, NCCL) is never installed here; it is used when found
# under /usr/local/cuda.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  ccache  # CMakeLists.txt: a clean checkout's builds reuse what any checkout here compiled
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libtomlplusplus-dev
  libboost-program-options-dev
  libgtest-dev
  libdnnl-dev ocl-icd-opencl-dev  # dnnl-config.cmake calls find_package(OpenCL); libdnnl-dev only recommends it
  nlohmann-json3-dev
  libicu-dev
  curl ca-certificates
  python3-h5py python3-numpy python3-pandas  # trace checks, data_tools/
  chromium  # tests/report: the HTML report in headless Chromium
  python3-torch libopenblas0-pthread  # tests/pytorch; without openblas torch gets the reference BLAS (sgemm ~3 GFLOP/s)
  clang-format
  clang libclang-rt-14-dev libomp-14-dev  # the `fuzz` preset (scripts/fuzz.sh): libFuzzer and the sanitizers; OpenMP for clang
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: need root to apt-get install the packages above" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
