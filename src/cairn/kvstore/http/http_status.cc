// The free helpers of http_client.h: a response's headers, HTTP statuses as
// cairn Status codes and error messages, and URI encoding.
#include "cairn/kvstore/http/http_client.h"

#include <string>

#include "cairn/util/hex.h"

namespace cairn::http {

std::optional<std::string> HttpResponse::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return std::nullopt;
}

StatusCode StatusForHttp(long status) {
  if (status == 400) return StatusCode::kInvalidArgument;
  if (status == 401 || status == 403) return StatusCode::kFailedPrecondition;
  if (status == 404) return StatusCode::kNotFound;
  if (status == 409 || status == 412) return StatusCode::kFailedPrecondition;
  if (status == 429 || status >= 500) return StatusCode::kUnavailable;
  return StatusCode::kInternal;
}

Status HttpStatusError(const HttpCall& call, const HttpResponse& response,
                       std::string_view detail) {
  std::string msg = call.operation + " (" + call.request.method + " " + call.request.url +
                    "): HTTP " + std::to_string(response.status);
  // The service's own explanation, shortened and kept printable.
  std::string_view body = response.body.as_string_view().substr(0, 400);
  std::string snippet;
  for (char c : body) snippet += (c >= 32 && c < 127) ? c : ' ';
  if (!snippet.empty()) msg += ": " + snippet;
  msg += detail;
  return Status(StatusForHttp(response.status), std::move(msg));
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  return PercentEncode(s, keep_slash ? "-._~/" : "-._~");
}

std::string FormEncode(std::initializer_list<std::pair<const char*, std::string>> fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    if (!out.empty()) out += '&';
    out += std::string(name) + "=" + UriEncode(value, /*keep_slash=*/false);
  }
  return out;
}

}  // namespace cairn::http
