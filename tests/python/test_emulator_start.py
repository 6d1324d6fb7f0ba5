"""The test emulators start on a port their own process listens on: when the
free port chosen is taken before the server binds it (two suites side by
side, or a client's ephemeral port), the server is started again on another
port, and a foreign listener's answer is never taken for the server's."""

import socket
import sys

import s3_helpers

SERVER = "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); " \
         "s.listen(); time.sleep(60)"


def test_a_taken_port_is_given_up_for_another(monkeypatch):
    with socket.socket() as foreign:
        foreign.bind(("127.0.0.1", 0))
        foreign.listen()
        taken = foreign.getsockname()[1]
        free = [taken, s3_helpers.free_port()]
        monkeypatch.setattr(s3_helpers, "free_port", lambda: free.pop(0))
        proc, port = s3_helpers.start_server(lambda p: [sys.executable, "-c", SERVER, str(p)], "test server")
        try:
            assert port != taken and not free
            assert s3_helpers._listens(proc.pid, port)
            assert not s3_helpers._listens(proc.pid, taken)
        finally:
            proc.kill()
            proc.wait()


def test_a_server_that_never_listens_is_reported(monkeypatch):
    with socket.socket() as foreign:  # every port offered is taken: the server exits each time
        foreign.bind(("127.0.0.1", 0))
        foreign.listen()
        monkeypatch.setattr(s3_helpers, "free_port", lambda: foreign.getsockname()[1])
        try:
            s3_helpers.start_server(lambda p: [sys.executable, "-c", SERVER, str(p)], "test server", attempts=2)
        except AssertionError as e:
            assert "test server exited 2 times before listening" in str(e)
        else:
            raise AssertionError("start_server returned")
