#!/usr/bin/env bash
# Installs everything cairn's build, tests and benchmarks need on a fresh
# Debian 12 machine: system packages with apt-get, Python packages with pip.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_pkgs=(build-essential cmake ninja-build ccache pkg-config
  libzstd-dev libblosc-dev zlib1g-dev libisal-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev clang libclang-rt-14-dev fio
  libcurl4-openssl-dev libssl-dev  # the s3:// driver: HTTP (libcurl) and SigV4 signing (OpenSSL)
  libopenmpi-dev openmpi-bin  # required by the test build (or -DCAIRN_WITH_MPI=OFF): the MPI coordinator and transport, tested under mpirun
  libzmq3-dev  # required (or -DCAIRN_WITH_ZMQ=OFF): the ZeroMQ peer transport of the emergency checkpoints
  python3-venv)  # python3-venv: tests build an orbax-checkpoint 0.11.33 venv (--system-site-packages)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
python3 -m pip install -q -r requirements-dev.txt
# tests/python/test_orbax_compat_0_11.py creates build/venv-orbax-checkpoint-0.11.33-py*/
# itself on first run (python -m venv --system-site-packages + pip install
# orbax-checkpoint==0.11.33 from PyPI); check here that venv + ensurepip work.
python3 -c "import venv, ensurepip"
