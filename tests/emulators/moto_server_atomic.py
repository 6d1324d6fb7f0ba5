"""moto's S3 server (`moto_server`) with conditional writes made atomic, as
S3's are. Usage as moto_server: `python3 moto_server_atomic.py -H HOST -p PORT`.

moto checks `If-None-Match: *` and `If-Match: <etag>` and stores the object
in separate steps with no lock between them (moto/s3/responses.py,
`put_object`; the same for completing a multipart upload), and serves each
request on its own thread. Two conditional writes of one key racing on a
loaded machine could then both succeed, which S3 never lets happen: a test
of two saves claiming one step (ConcurrentSaves.S3ExactlyOneWholeStepPerRound)
saw both claims granted at load 14 and neither save publish. Here every
object write and multipart completion runs under one lock, so a condition
and the write it guards are one step. Only the tests use this; the
benchmarks run moto as it is.
"""

from __future__ import annotations

import functools
import sys
import threading

from moto.s3 import responses
from moto.server import main

_WRITE = threading.Lock()


def _atomic(method):
    @functools.wraps(method)
    def locked(*args, **kwargs):
        with _WRITE:
            return method(*args, **kwargs)
    return locked


responses.S3Response.put_object = _atomic(responses.S3Response.put_object)
responses.S3Response._key_response_post = _atomic(responses.S3Response._key_response_post)

if __name__ == "__main__":
    main(sys.argv[1:])
