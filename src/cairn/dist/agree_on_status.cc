// AgreeOnStatus: every process learns the first failure of any process.
//
// Wire format of one process's contribution (an AllGather value):
//   "<decimal status code>:<message>"   ("0:" for OK).
// In a one-process job the failure is returned as it is: "process 0 of 1:"
// would say nothing. A contribution that does not parse (a process of a different cairn
// version, a bug) becomes an Internal error attributed to that process.
#include <charconv>
#include <string>
#include <vector>

#include "cairn/coordinator.h"

namespace cairn {
namespace {

std::string EncodeStatus(const Status& status) {
  std::string out = std::to_string(static_cast<int>(status.code()));
  out += ':';
  out.append(status.message());
  return out;
}

Status DecodeStatus(std::string_view bytes) {
  const size_t colon = bytes.find(':');
  int code = -1;
  if (colon != std::string_view::npos) {
    auto [end, ec] = std::from_chars(bytes.data(), bytes.data() + colon, code);
    if (ec != std::errc() || end != bytes.data() + colon) code = -1;
  }
  if (code < static_cast<int>(StatusCode::kOk) ||
      code > static_cast<int>(StatusCode::kUnimplemented)) {
    return InternalError("malformed status message (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (code == static_cast<int>(StatusCode::kOk)) return Status::OK();
  return Status(static_cast<StatusCode>(code), std::string(bytes.substr(colon + 1)));
}

}  // namespace

Status AgreeOnStatus(Coordinator& coordinator, std::string_view name, const Status& local,
                     Coordinator::Duration timeout) {
  const int n = coordinator.process_count();
  auto where = [n](int i) {
    return "process " + std::to_string(i) + " of " + std::to_string(n);
  };
  Result<std::vector<std::string>> all = coordinator.AllGather(name, EncodeStatus(local), timeout);
  if (!all.ok()) {
    // Without the others' answers, this process's own failure (if any) is
    // the most useful thing to report; otherwise the exchange's failure.
    if (!local.ok()) return n == 1 ? local : local.Annotate(where(coordinator.process_index()));
    return all.status().Annotate("agreeing on the outcome of `" + std::string(name) + "`");
  }
  if (static_cast<int>(all->size()) != n) {
    return InternalError("agreeing on the outcome of `" + std::string(name) + "`: got " +
                         std::to_string(all->size()) + " answers from " + std::to_string(n) +
                         " processes");
  }
  for (int i = 0; i < n; ++i) {
    // One process: nothing to say which; its own failure comes back as it
    // was (with its errno, which the wire format does not carry).
    if (n == 1) return local;
    Status s = DecodeStatus((*all)[i]);
    if (!s.ok()) return i == coordinator.process_index() ? local.Annotate(where(i)) : s.Annotate(where(i));
  }
  return Status::OK();
}

}  // namespace cairn
