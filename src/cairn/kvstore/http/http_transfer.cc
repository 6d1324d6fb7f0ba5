#include "cairn/kvstore/http/http_transfer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace cairn::http {
namespace {

using Clock = std::chrono::steady_clock;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// The status of the answer being received (its status line has come when
// a header or the body does).
long ResponseCode(Transfer* t) {
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

// Whether this attempt's body goes to the call's destination: a 200/206.
bool IntoDestination(Transfer* t) {
  if (t->call.destination.empty()) return false;
  long status = ResponseCode(t);
  return status == 200 || status == 206;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t bytes = size * n;
  if (IntoDestination(t)) {
    MutableByteView dst = t->call.destination;
    uint64_t& at = t->response.destination_bytes;
    if (bytes > dst.size() - at) {
      t->destination_too_small = true;
      return 0;  // aborts the transfer
    }
    std::memcpy(dst.data() + at, data, bytes);
    at += bytes;
    return bytes;
  }
  Buffer& body = t->response.body;
  size_t old = body.size();
  if (BodyLimit limit = BodyLimitFor(t->call, ResponseCode(t)); old + bytes > limit.bytes) {
    t->body_too_large = true;
    t->limit = limit;
    return 0;  // aborts the transfer
  }
  if (old + bytes > body.capacity()) {
    if (!body.TryResize(std::max(old + bytes, body.capacity() * 2)).ok()) {
      t->body_too_large = true;
      t->limit = {old, "the memory available"};
      return 0;
    }
  }
  body.resize(old + bytes);
  std::memcpy(body.data() + old, data, bytes);
  return bytes;
}

// Room for the announced body, so that it is received without regrowing
// (the announced length is within the body's bound; past kMaxReserve the
// body grows as it arrives).
void ReserveBody(Transfer* t) {
  constexpr uint64_t kMaxReserve = uint64_t{256} << 20;
  if (IntoDestination(t)) return;  // the body has its place already
  uint64_t n = *t->content_length;
  Buffer& body = t->response.body;
  if (n == 0 || n > kMaxReserve || n <= body.capacity()) return;
  size_t old = body.size();
  if (body.TryResize(n).ok()) body.resize(old);
}

// A Content-Length header (steps 2 and 4 of response_limits.h); false when
// it ends the attempt before the body.
bool TakeContentLength(Transfer* t, const std::string& value) {
  std::optional<uint64_t> n = ParseContentLength(value);
  if (!n || (t->content_length && *t->content_length != *n)) {
    t->framing_error = "the answer's Content-Length `" + value.substr(0, 40) + "` " +
                       (n ? "contradicts an earlier one" : "is not a byte count");
    return false;
  }
  t->content_length = n;
  if (t->attempt_request.method == "HEAD") return true;  // the object's size; no body comes
  if (IntoDestination(t) && *n > t->call.destination.size()) {
    t->destination_too_small = true;
    return false;
  }
  if (BodyLimit limit = BodyLimitFor(t->call, ResponseCode(t)); *n > limit.bytes) {
    t->body_too_large = true;
    t->limit = limit;
    t->announced_bytes = n;
    return false;
  }
  ReserveBody(t);
  return true;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.substr(0, 5) == "HTTP/") {
    t->response.headers.clear();  // a new response (after 100 Continue)
    t->content_length.reset();
    t->chunked = false;
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    t->response.headers.emplace_back(Lower(Trim(line.substr(0, colon))),
                                     std::string(Trim(line.substr(colon + 1))));
    const auto& [name, value] = t->response.headers.back();
    if (name == "transfer-encoding" && Lower(value).find("chunked") != std::string::npos) t->chunked = true;
    if (name == "content-length" && !TakeContentLength(t, value)) return 0;  // aborts the transfer
  }
  return size * n;
}

// libcurl's log: it notes, and otherwise drops, bytes that came past the
// Content-Length ("Excess found in a read" up to 7.x, "Excess found
// writing body" since 8.x).
int OnDebug(CURL*, curl_infotype type, char* data, size_t size, void* user) {
  if (type == CURLINFO_TEXT && std::string_view(data, size).substr(0, 12) == "Excess found") {
    static_cast<Transfer*>(user)->excess = true;
  }
  return 0;
}

int OnProgress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(user);
  uint64_t moved = static_cast<uint64_t>(std::max<curl_off_t>(dlnow, 0)) +
                   static_cast<uint64_t>(std::max<curl_off_t>(ulnow, 0));
  if (!t->min_rate->TooSlow(Clock::now() - t->started, moved)) return 0;
  t->too_slow = true;
  t->moved = moved;
  return 1;  // aborts the transfer
}

size_t OnRead(char* buf, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  ByteView body = t->attempt_request.body;
  size_t len = std::min(size * n, body.size() - t->read_pos);
  if (len > 0) std::memcpy(buf, body.data() + t->read_pos, len);
  t->read_pos += len;
  return len;
}

// curl rewinds the body when it must resend it (a reused connection that
// turned out closed, an authentication round).
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<uint64_t>(offset) > t->attempt_request.body.size()) {
    return CURL_SEEKFUNC_FAIL;
  }
  t->read_pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

}  // namespace

void ResetAttempt(Transfer* t, const MinimumRateRule* min_rate) {
  t->response = HttpResponse();
  t->read_pos = 0;
  t->body_too_large = false;
  t->announced_bytes.reset();
  t->destination_too_small = false;
  t->content_length.reset();
  t->chunked = false;
  t->excess = false;
  t->framing_error.clear();
  t->min_rate = min_rate;
  t->started = Clock::now();
  t->too_slow = false;
  t->error[0] = '\0';
}

void SetTransferCallbacks(Transfer* t, bool sends_body) {
  CURL* e = t->easy;
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, &OnProgress);
  curl_easy_setopt(e, CURLOPT_XFERINFODATA, t);
  // The log goes to OnDebug only (for bytes past the Content-Length).
  curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
  curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, &OnDebug);
  curl_easy_setopt(e, CURLOPT_DEBUGDATA, t);
  if (sends_body) {
    curl_easy_setopt(e, CURLOPT_READFUNCTION, &OnRead);
    curl_easy_setopt(e, CURLOPT_READDATA, t);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, &OnSeek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, t);
  }
}

Status ReceiveError(const Transfer& t, long status, const std::string& where) {
  if (t.body_too_large) {
    std::string what = t.announced_bytes ? "a Content-Length of " + std::to_string(*t.announced_bytes)
                                         : std::string("more than that");
    return ResourceExhaustedError(where + ": HTTP " + std::to_string(status) + " whose body is over " +
                                  t.limit.what + " (" + std::to_string(t.limit.bytes) + " bytes): " + what +
                                  "; not read further");
  }
  if (t.destination_too_small) {
    return DataLossError(where + ": the value has more than the " + std::to_string(t.call.destination.size()) +
                         " bytes expected");
  }
  if (!t.framing_error.empty()) return DataLossError(where + ": " + t.framing_error);
  return Status::OK();
}

Status CheckFraming(const Transfer& t, long status, const std::string& where) {
  if (t.attempt_request.method == "HEAD" || status == 204 || status == 304) return Status::OK();
  const bool into_destination = !t.call.destination.empty() && (status == 200 || status == 206);
  const uint64_t received = into_destination ? t.response.destination_bytes : t.response.body.size();
  if (t.excess) {
    return DataLossError(where + ": HTTP " + std::to_string(status) + " with more bytes than its Content-Length of " +
                         std::to_string(t.content_length.value_or(0)) + " (the answer is not taken)");
  }
  if (t.content_length && !t.chunked && received != *t.content_length) {
    return DataLossError(where + ": HTTP " + std::to_string(status) + " with " + std::to_string(received) +
                         " bytes, but a Content-Length of " + std::to_string(*t.content_length));
  }
  return Status::OK();
}

std::string TooSlowMessage(const Transfer& t) {
  double secs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.started).count() / 1000.0;
  char text[256];
  std::snprintf(text, sizeof(text),
                "%llu bytes moved in %.1f s: under the minimum average of %llu bytes/s after the first %lld s "
                "(CAIRN_HTTP_MIN_RATE_BYTES_S, CAIRN_HTTP_RATE_GRACE_S)",
                static_cast<unsigned long long>(t.moved), secs,
                static_cast<unsigned long long>(t.min_rate->min_bytes_per_second),
                static_cast<long long>(t.min_rate->grace.count()));
  return text;
}

}  // namespace cairn::http
