"""MPI and ZeroMQ are not optional where the tests run: configuring the test
build (CAIRN_BUILD_TESTS=ON) without MPI, or without libzmq, fails with the
Debian package to install, unless the transport is turned off explicitly
(-DCAIRN_WITH_MPI=OFF, -DCAIRN_WITH_ZMQ=OFF). Without this a CI machine
lacking them would pass without the MPI and ZeroMQ suites. The Python side:
this build of cairn has both transports (the tests of emergency/ and dist/
fail rather than skip without them)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import cairn
from cairn import _core

ROOT = pathlib.Path(__file__).resolve().parents[2]


def configure(build_dir, *defines):
    cmake = shutil.which("cmake")
    assert cmake, "cmake is not on PATH (scripts/install-deps.sh installs it)"
    return subprocess.run([cmake, "-S", str(ROOT), "-B", str(build_dir), "-DCAIRN_BUILD_TESTS=ON",
                           "-DCAIRN_BUILD_CLI=OFF", *defines], capture_output=True, text=True, timeout=300)


def test_the_test_build_fails_without_mpi_unless_turned_off(tmp_path):
    r = configure(tmp_path / "no-mpi", "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON")
    assert r.returncode != 0, r.stdout[-2000:]
    assert "MPI not found" in r.stderr and "libopenmpi-dev openmpi-bin" in r.stderr, r.stderr[-2000:]
    assert "-DCAIRN_WITH_MPI=OFF" in r.stderr
    r = configure(tmp_path / "mpi-off", "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON", "-DCAIRN_WITH_MPI=OFF")
    assert r.returncode == 0, r.stderr[-2000:]  # turned off on purpose: allowed


def test_the_build_fails_without_zeromq_unless_turned_off(tmp_path):
    r = configure(tmp_path / "no-zmq", "-DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON")
    assert r.returncode != 0, r.stdout[-2000:]
    assert "libzmq not found" in r.stderr and "libzmq3-dev" in r.stderr, r.stderr[-2000:]
    assert "-DCAIRN_WITH_ZMQ=OFF" in r.stderr


def test_this_cairn_has_both_peer_transports():
    assert _core.mpi_available, "cairn was built without MPI: install libopenmpi-dev openmpi-bin"
    assert _core._emergency_zmq_available(), "cairn was built without ZeroMQ: install libzmq3-dev"
    assert shutil.which("mpirun"), "mpirun is not on PATH: install openmpi-bin"
