// A moto S3 server for tests: `moto_server` (PyPI moto[server]; the command
// CAIRN_MOTO_SERVER names, else the one on PATH) started once per test process
// on a free localhost port, stopped at exit.
//
// Thread safety: MotoEndpoint may be called concurrently.
#pragma once

#include <string>

#include "cairn/util/result.h"

namespace cairn {

// "http://127.0.0.1:<port>" of the running server; starts it on first use.
// Unavailable (naming the command) when it does not come up within 30 s.
Result<std::string> MotoEndpoint();

}  // namespace cairn
