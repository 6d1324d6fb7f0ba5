#include "cairn/kvstore/http/http_client.h"

#include <curl/curl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <queue>
#include <random>
#include <thread>

#include "cairn/kvstore/http/http_transfer.h"

namespace cairn::http {

using Clock = std::chrono::steady_clock;

namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// A curl error that says the request never reached the server.
bool NothingSent(CURLcode code) {
  return code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
         code == CURLE_COULDNT_RESOLVE_PROXY;
}

bool TransientCurlError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

// A TLS failure that trusting other certificate authorities may fix.
bool CertificateError(CURLcode code) {
  return code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
         code == CURLE_SSL_CERTPROBLEM || code == CURLE_SSL_ISSUER_ERROR;
}

bool TransientHttpStatus(long status) { return status == 429 || status >= 500; }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// Faults in the pages of a call's destination on the caller's thread, before
// the call is queued. Otherwise the transfer thread, the one thread that
// drives every socket of the process, takes a page fault per 4 KiB as it
// copies each body into fresh memory (a restore's new array), and every
// other transfer waits meanwhile: zarr3 restores of 256 MiB at 64 in flight
// ran at 0.87x TensorStore, whose transfer thread only appends to buffers it
// reuses. The callers are many (a restore's chunk jobs), so the faults are
// taken in parallel. Only the whole pages inside the destination are
// populated (the pages at its ends may be shared with memory something else
// writes); the kernel's MADV_POPULATE_WRITE (Linux 5.14) faults them in as a
// write would, without changing a byte. Best effort: other kernels, or
// mappings it refuses, leave the faults to the transfer thread as before.
void PrefaultDestination(MutableByteView dst) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kMinBytes = size_t{256} << 10;  // smaller: not worth a system call
  if (dst.size() < kMinBytes) return;
  uintptr_t begin = (reinterpret_cast<uintptr_t>(dst.data()) + page - 1) & ~(page - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(dst.data()) + dst.size()) & ~(page - 1);
  if (end <= begin) return;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

}  // namespace


struct Batch {
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
};

// A retry waiting for its backoff to end; the earliest on top.
struct Delayed {
  Clock::time_point at;
  uint64_t seq;  // ties keep the order the retries were scheduled in
  Transfer* transfer;
  bool operator>(const Delayed& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

struct HttpClient::Impl {
  HttpClientOptions options;
  CURLM* multi = nullptr;
  std::mutex mu;
  // Guarded by mu. Calls not started yet, started in this order as room
  // frees up (new calls, and retries whose backoff has ended), and retries
  // still backing off. The loop takes from the front of `ready` and the top
  // of `delayed` only, so a turn costs O(calls started) whatever the queue's
  // length (it once looked at every queued call on every turn: a batch of N
  // calls with few in flight cost O(N^2)).
  std::deque<Transfer*> ready;
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<>> delayed;
  uint64_t delayed_seq = 0;
  bool stopping = false;
  std::vector<Transfer*> active;  // loop thread only
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> loop_iterations{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> queue_visits{0};
  std::mt19937_64 rng{std::random_device{}()};  // loop thread only
  std::thread thread;

  void Submit(std::vector<Transfer*> transfers) {
    {
      std::lock_guard<std::mutex> lock(mu);
      for (Transfer* t : transfers) ready.push_back(t);
    }
    curl_multi_wakeup(multi);
  }

  static void Complete(Transfer* t, Result<HttpResponse> result) {
    if (t->easy != nullptr) {
      curl_easy_cleanup(t->easy);
      t->easy = nullptr;
    }
    if (t->header_list != nullptr) {
      curl_slist_free_all(t->header_list);
      t->header_list = nullptr;
    }
    *t->result = std::move(result);
    Batch* b = t->batch;
    std::lock_guard<std::mutex> lock(b->mu);
    if (--b->remaining == 0) b->cv.notify_all();
  }

  std::string Where(const Transfer& t) const {
    return t.call.operation + " (" + t.call.request.method + " " + t.call.request.url + ")";
  }

  // Sets up and adds the next attempt of `t`; false when it completed instead.
  bool Start(Transfer* t) {
    ++t->attempt;
    t->attempt_request = t->call.request;
    if (t->call.prepare) {
      Status s = t->call.prepare(t->attempt_request);
      if (!s.ok()) {
        Complete(t, s.Annotate(Where(*t)));
        return false;
      }
    }
    ResetAttempt(t, &options.min_rate);
    CURL* e = curl_easy_init();
    if (e == nullptr) {
      Complete(t, ResourceExhaustedError(Where(*t) + ": curl_easy_init failed"));
      return false;
    }
    t->easy = e;
    const HttpRequest& r = t->attempt_request;
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (!t->call.idempotent || t->call.fresh_connection) curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    SetTransferCallbacks(t, /*sends_body=*/r.method == "PUT" || r.method == "POST");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options.connect_timeout.count()));
    // Larger socket reads and writes than curl's 16 KiB / 64 KiB defaults:
    // fewer callbacks for values of megabytes.
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L << 10);
    curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
    if (!options.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options.ca_bundle.c_str());
    if (!options.ca_path.empty()) curl_easy_setopt(e, CURLOPT_CAPATH, options.ca_path.c_str());
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.stall_timeout.count()));
    if (options.attempt_timeout.count() > 0) {
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options.attempt_timeout.count()));
    }
    if (r.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (r.method == "PUT" || r.method == "POST") {
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
      if (r.method == "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (r.method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    curl_slist* list = curl_slist_append(nullptr, "Expect:");
    for (const std::string& h : r.headers) list = curl_slist_append(list, h.c_str());
    t->header_list = list;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
    curl_multi_add_handle(multi, e);
    active.push_back(t);
    return true;
  }

  std::chrono::milliseconds Backoff(const RetryPolicy& p, int attempt) {
    auto d = p.initial_backoff;
    for (int i = 1; i < attempt && d < p.max_backoff; ++i) d *= 2;
    d = std::min(d, p.max_backoff);
    std::uniform_int_distribution<int64_t> jitter(d.count() / 2, std::max<int64_t>(d.count(), 1));
    return std::chrono::milliseconds(jitter(rng));
  }

  // An attempt of `t` ended with curl status `code`.
  void Finished(Transfer* t, CURLcode code) {
    curl_multi_remove_handle(multi, t->easy);
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(t->easy);
    t->easy = nullptr;
    curl_slist_free_all(t->header_list);
    t->header_list = nullptr;
    active.erase(std::find(active.begin(), active.end(), t));
    if (Status received = ReceiveError(*t, status, Where(*t)); !received.ok()) {
      Complete(t, std::move(received));
      return;
    }
    if (t->too_slow) {  // a timeout, retried as one
      std::snprintf(t->error, sizeof(t->error), "%s", TooSlowMessage(*t).c_str());
      code = CURLE_OPERATION_TIMEDOUT;
    }
    if (code == CURLE_OK) {
      if (Status framing = CheckFraming(*t, status, Where(*t)); !framing.ok()) {
        Complete(t, std::move(framing));
        return;
      }
    }
    t->response.status = status;
    bool transient = code != CURLE_OK ? TransientCurlError(code) : TransientHttpStatus(status);
    bool may_retry = t->call.idempotent || (code != CURLE_OK && NothingSent(code)) ||
                     (code == CURLE_OK && status == 429);
    if (transient && may_retry && t->attempt < t->call.retry.max_attempts) {
      retries.fetch_add(1, std::memory_order_relaxed);
      t->not_before = Clock::now() + Backoff(t->call.retry, t->attempt);
      std::lock_guard<std::mutex> lock(mu);
      delayed.push(Delayed{t->not_before, delayed_seq++, t});
      return;
    }
    std::string attempts = " after " + std::to_string(t->attempt) +
                           (t->attempt == 1 ? " attempt" : " attempts");
    if (code != CURLE_OK) {
      std::string what = t->error[0] != '\0' ? t->error : curl_easy_strerror(code);
      if (CertificateError(code)) {
        std::string trusted = options.ca_variables.empty()
                                  ? "the system's certificate authorities"
                                  : "the certificate authorities of " + options.ca_variables;
        Complete(t, FailedPreconditionError(
                        Where(*t) + ": " + what + " (verified against " + trusted +
                        "; set CAIRN_CA_BUNDLE to a PEM file of the authority that signed the server's "
                        "certificate)"));
        return;
      }
      Complete(t, UnavailableError(Where(*t) + ": " + what + attempts));
      return;
    }
    if (transient) {
      Complete(t, HttpStatusError(t->call, t->response, attempts));
      return;
    }
    Complete(t, std::move(t->response));
  }


  void Loop() {
    while (true) {
      std::vector<Transfer*> to_start;
      auto next_wake = Clock::now() + std::chrono::milliseconds(1000);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        auto now = Clock::now();
        uint64_t visits = 0;
        while (!delayed.empty() && delayed.top().at <= now) {
          ready.push_back(delayed.top().transfer);
          delayed.pop();
          ++visits;
        }
        size_t room = static_cast<size_t>(options.max_in_flight) - std::min(
            active.size(), static_cast<size_t>(options.max_in_flight));
        while (!ready.empty() && to_start.size() < room) {
          to_start.push_back(ready.front());
          ready.pop_front();
          ++visits;
        }
        if (!delayed.empty()) next_wake = std::min(next_wake, delayed.top().at);
        queue_visits.fetch_add(visits, std::memory_order_relaxed);
      }
      for (Transfer* t : to_start) Start(t);
      int running = 0;
      curl_multi_perform(multi, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
        Finished(t, msg->data.result);
      }
      {
        // Calls that can start now (room freed just now) or retries
        // scheduled just now may be due before `next_wake`. Calls that wait
        // for room do not count: a finishing transfer wakes the poll below
        // anyway, and counting them made the loop spin with a zero timeout
        // while more calls were queued than max_in_flight.
        std::lock_guard<std::mutex> lock(mu);
        if (!delayed.empty()) next_wake = std::min(next_wake, delayed.top().at);
        if (active.size() < static_cast<size_t>(options.max_in_flight) && !ready.empty()) {
          next_wake = Clock::now();
        }
      }
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_wake - Clock::now());
      int timeout = static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 1000));
      if (!active.empty()) timeout = std::min(timeout, 100);
      curl_multi_poll(multi, nullptr, 0, timeout, nullptr);
      loop_iterations.fetch_add(1, std::memory_order_relaxed);
    }
    // Stopping: fail everything still here.
    for (Transfer* t : active) {
      curl_multi_remove_handle(multi, t->easy);
      Complete(t, UnavailableError(Where(*t) + ": the HTTP client was shut down"));
    }
    active.clear();
    std::lock_guard<std::mutex> lock(mu);
    for (; !delayed.empty(); delayed.pop()) ready.push_back(delayed.top().transfer);
    for (Transfer* t : ready) {
      Complete(t, UnavailableError(Where(*t) + ": the HTTP client was shut down"));
    }
    ready.clear();
  }
};

HttpClient::HttpClient(HttpClientOptions options)
    : options_(options), impl_(std::make_unique<Impl>()) {
  GlobalInit();
  if (options_.max_in_flight < 1) options_.max_in_flight = 1;
  impl_->options = options_;
  impl_->multi = curl_multi_init();
  curl_multi_setopt(impl_->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                    static_cast<long>(options_.max_in_flight));
  // Keep as many idle connections as there may be transfers. libcurl's
  // default pool keeps 4 per transfer still added to the multi handle, so
  // as a batch drained (transfers removed one by one as they finish) it
  // closed all but a few connections, and the next batch connected again.
  curl_multi_setopt(impl_->multi, CURLMOPT_MAXCONNECTS,
                    static_cast<long>(options_.max_in_flight));
  impl_->thread = std::thread([this] { impl_->Loop(); });
}

HttpClient::~HttpClient() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  curl_multi_wakeup(impl_->multi);
  impl_->thread.join();
  curl_multi_cleanup(impl_->multi);
}


uint64_t HttpClient::retries() const { return impl_->retries.load(); }

uint64_t HttpClient::loop_iterations() const { return impl_->loop_iterations.load(); }

uint64_t HttpClient::calls() const { return impl_->calls.load(); }

uint64_t HttpClient::queue_visits() const { return impl_->queue_visits.load(); }

Result<HttpResponse> HttpClient::Execute(HttpCall call) {
  std::vector<HttpCall> calls;
  calls.push_back(std::move(call));
  return std::move(ExecuteAll(std::move(calls))[0]);
}

std::vector<Result<HttpResponse>> HttpClient::ExecuteAll(std::vector<HttpCall> calls) {
  impl_->calls.fetch_add(calls.size(), std::memory_order_relaxed);
  Batch batch;
  batch.remaining = calls.size();
  std::vector<std::optional<Result<HttpResponse>>> slots(calls.size());
  std::vector<std::unique_ptr<Transfer>> transfers;
  std::vector<Transfer*> raw;
  for (const HttpCall& c : calls) PrefaultDestination(c.destination);
  for (size_t i = 0; i < calls.size(); ++i) {
    auto t = std::make_unique<Transfer>();
    t->call = std::move(calls[i]);
    if (t->call.retry.max_attempts < 1) t->call.retry.max_attempts = 1;
    t->result = &slots[i];
    t->batch = &batch;
    raw.push_back(t.get());
    transfers.push_back(std::move(t));
  }
  if (!raw.empty()) impl_->Submit(std::move(raw));
  {
    std::unique_lock<std::mutex> lock(batch.mu);
    batch.cv.wait(lock, [&] { return batch.remaining == 0; });
  }
  std::vector<Result<HttpResponse>> out;
  out.reserve(slots.size());
  for (auto& s : slots) out.push_back(std::move(*s));
  return out;
}

}  // namespace cairn::http
