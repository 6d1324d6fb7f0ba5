#!/usr/bin/env bash
# Builds cairn and runs every test: the Release build's own tests (CLI,
# examples, installed package, crash shim), the C++ unit tests (built once,
# under AddressSanitizer + UBSan), a short run of each fuzz target, then the
# Python package's interop tests against the real peers from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/cairn-ccache}"
# Share cache hits between clones in different folders (CI clones afresh).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# One compiler name for CMake and the wheel build: ccache keys on it, and
# scikit-build-core would otherwise pick g++ where CMake picks c++, so the
# wheel compiled the whole library again on a cold cache (212 of its 225
# objects now come from the Release build).
export CC="${CC:-cc}" CXX="${CXX:-c++}"
jobs="$(nproc)"

echo "== Release build and its tests"
# The unit test binaries are built once, under the sanitizers below: in
# Release too they cost 441 of this build's 1104 CPU seconds on a cold cache
# (docs/TESTING.md). The crash campaign's programs are built here (pytest).
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAIRN_BUILD_TESTS=ON \
  -DCAIRN_BUILD_UNIT_TESTS=OFF >/dev/null
cmake --build build/release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"

echo "== C++ unit tests (AddressSanitizer + UBSan)"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DCAIRN_BUILD_TESTS=ON -DCAIRN_BUILD_CLI=OFF -DCAIRN_SANITIZE=ON >/dev/null
cmake --build build/asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build/asan --output-on-failure -j "$jobs"

# CAIRN_FUZZ_SECONDS: how long each fuzz target runs (default 30, CI stays short).
fuzz_seconds="${CAIRN_FUZZ_SECONDS:-30}"
echo "== Fuzz targets (clang, libFuzzer + ASan + UBSan), ${fuzz_seconds} s each"
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCAIRN_FUZZ=ON \
  -DCAIRN_BUILD_TESTS=OFF -DCAIRN_BUILD_CLI=OFF >/dev/null
cmake --build build/fuzz -j "$jobs" --target cairn_fuzzers
# Inputs up to 1 MiB (deep nesting and large counts need room), the format's
# tokens from tests/fuzz/<name>.dict (every target must have one), seeds from
# the golden files in tests/testdata.
for fuzzer in build/fuzz/cairn_*_fuzz; do
  name="$(basename "$fuzzer")"
  stem="${name#cairn_}"
  dict="tests/fuzz/${stem%_fuzz}.dict"
  [[ -f "$dict" ]] || { echo "FAILED: $name has no dictionary $dict"; exit 1; }
  corpus="build/fuzz/corpus/$name"
  mkdir -p "$corpus"
  log="$corpus.log"
  "$fuzzer" -max_total_time="$fuzz_seconds" -timeout=25 -rss_limit_mb=2048 -max_len=1048576 \
    -dict="$dict" -print_final_stats=1 "$corpus" tests/testdata >"$log" 2>&1 ||
    { cat "$log"; echo "FAILED: $fuzzer"; exit 1; }
  echo "$name: $(grep -m1 -o 'Done [0-9]* runs.*' "$log")"
done

echo "== Python package and interop tests"
python3 -m pip install -q .
# Includes the real multi-process Orbax runs (jax.distributed on localhost) and
# the orbax-checkpoint 0.11.33 tests, whose venv is cached in build/.
status=0
python3 -m pytest -q --tb=short --junitxml=build/pytest-report.xml tests/python || status=$?
if [[ $status -ne 0 ]]; then
  python3 scripts/pytest_failures.py build/pytest-report.xml
fi
exit "$status"
