// The MPI coordinator (include/cairn/mpi_coordinator.h).
//
// Every collective is one or two non-blocking MPI operations on the
// coordinator's own communicator, polled against one deadline:
//   1. MPI_Iallgather of a header {hash of the collective's kind, name and
//      root; size of this process's value}: every process sees every header,
//      so all of them agree whether the names match and how big the values
//      are. This is also the whole of Barrier.
//   2. AllGather: MPI_Iallgatherv of the values. Broadcast: MPI_Ibcast of the
//      root's value. Skipped when all values are empty.
// A collective that misses its deadline leaves its requests and buffers with
// the coordinator (MPI cannot cancel them) and marks the coordinator broken.
#include "cairn/mpi_coordinator.h"

#if CAIRN_HAVE_MPI

// Only MPI's C API (OpenMPI and MPICH would add their deprecated C++
// bindings, which need another library).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <utility>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cairn/dist/collective_util.h"

namespace cairn {
namespace {

using dist::Clock;
using dist::DeadlineAfter;
using dist::FormatSeconds;
using dist::HashName;

// Values beyond this are refused: the coordinator carries small messages and
// MPI counts are ints.
constexpr uint64_t kMaxTotalBytes = uint64_t{1} << 30;

Status MpiError(int rc, std::string_view what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  return InternalError(std::string(what) + ": MPI error " + std::to_string(rc) + " (" +
                       std::string(text, len) + ")");
}

void FinalizeMpiAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Waits for `req` with MPI_Test until `deadline`: spins briefly, then sleeps
// with a growing pause (up to 1 ms) so that oversubscribed ranks yield the CPU.
// Returns false on timeout (the request is then still pending).
Result<bool> PollUntil(MPI_Request* req, Clock::time_point deadline, std::string_view what) {
  auto pause = std::chrono::microseconds(0);
  for (int spins = 0;; ++spins) {
    int done = 0;
    const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, what);
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(20));
      std::this_thread::sleep_for(pause);
    }
  }
}

// With MPI_THREAD_MULTIPLE each coordinator serializes only its own
// collectives; with MPI_THREAD_SERIALIZED no two threads may be inside MPI at
// once, so all coordinators share one lock.
std::atomic<bool> g_thread_multiple{false};

std::mutex& SharedMpiLock() {
  static std::mutex mu;
  return mu;
}

struct Header {
  uint64_t hash;
  uint64_t size;
};

class MpiCoordinator final : public Coordinator {
 public:
  MpiCoordinator(MPI_Comm comm, int index, int count)
      : comm_(comm), index_(index), count_(count),
        lock_(g_thread_multiple.load() ? own_lock_ : SharedMpiLock()) {}
  ~MpiCoordinator() override {
    // With abandoned requests MPI must keep the communicator (and they their
    // buffers) until MPI_Finalize.
    if (abandoned_.empty()) MPI_Comm_free(&comm_);
  }

  int process_index() const override { return index_; }
  int process_count() const override { return count_; }

  Status Barrier(std::string_view name, Duration timeout) override {
    std::lock_guard<std::mutex> lock(lock_);
    const std::string what = "MPI barrier `" + std::string(name) + "`";
    auto op = std::make_unique<Op>(DeadlineAfter(timeout));
    return ExchangeHeaders(op, what, Hash("barrier", name, 0), 0, timeout);
  }

  Result<std::vector<std::string>> AllGather(std::string_view name, std::string_view value,
                                             Duration timeout) override {
    std::lock_guard<std::mutex> lock(lock_);
    const std::string what = "MPI all-gather `" + std::string(name) + "`";
    auto op = std::make_unique<Op>(DeadlineAfter(timeout));
    CAIRN_RETURN_IF_ERROR(ExchangeHeaders(op, what, Hash("all-gather", name, 0), value.size(), timeout));
    uint64_t total = 0;
    for (const Header& h : op->headers) total += std::min(h.size, kMaxTotalBytes + 1);
    if (total > kMaxTotalBytes) {
      return InvalidArgumentError(what + ": " + std::to_string(total) +
                                  " bytes in all, more than a coordinator carries (1 GiB)");
    }
    std::vector<std::string> out(count_);
    if (total == 0) return out;
    std::vector<int> counts(count_), displs(count_);
    int offset = 0;
    for (int i = 0; i < count_; ++i) {
      counts[i] = static_cast<int>(op->headers[i].size);
      displs[i] = offset;
      offset += counts[i];
    }
    op->send.assign(value.begin(), value.end());
    op->recv.resize(total);
    op->counts = std::move(counts);
    op->displs = std::move(displs);
    int rc = MPI_Iallgatherv(op->send.data(), static_cast<int>(value.size()), MPI_BYTE,
                             op->recv.data(), op->counts.data(), op->displs.data(), MPI_BYTE,
                             comm_, &op->request);
    if (rc != MPI_SUCCESS) return Broken(MpiError(rc, what), what);
    CAIRN_RETURN_IF_ERROR(Wait(op, what, timeout));
    for (int i = 0; i < count_; ++i) {
      out[i].assign(op->recv.data() + op->displs[i], op->counts[i]);
    }
    return out;
  }

  Result<std::string> Broadcast(std::string_view name, int root, std::string_view value,
                                Duration timeout) override {
    std::lock_guard<std::mutex> lock(lock_);
    const std::string what =
        "MPI broadcast `" + std::string(name) + "` from process " + std::to_string(root);
    if (root < 0 || root >= count_) {
      return InvalidArgumentError(what + ": root is not in [0, " + std::to_string(count_) + ")");
    }
    auto op = std::make_unique<Op>(DeadlineAfter(timeout));
    CAIRN_RETURN_IF_ERROR(ExchangeHeaders(op, what, Hash("broadcast", name, root),
                                          root == index_ ? value.size() : 0, timeout));
    const uint64_t size = op->headers[root].size;
    if (size > kMaxTotalBytes) {
      return InvalidArgumentError(what + ": " + std::to_string(size) +
                                  " bytes, more than a coordinator carries (1 GiB)");
    }
    if (size == 0) return std::string();
    if (root == index_) {
      op->recv.assign(value.begin(), value.end());
    } else {
      op->recv.resize(size);
    }
    int rc = MPI_Ibcast(op->recv.data(), static_cast<int>(size), MPI_BYTE, root, comm_,
                        &op->request);
    if (rc != MPI_SUCCESS) return Broken(MpiError(rc, what), what);
    CAIRN_RETURN_IF_ERROR(Wait(op, what, timeout));
    return std::string(op->recv.data(), op->recv.size());
  }

 private:
  // One collective's request and the buffers MPI may use until it ends. On
  // the heap, so that a timed-out one moves to abandoned_ without moving them.
  struct Op {
    explicit Op(Clock::time_point d) : deadline(d) {}
    Clock::time_point deadline;
    MPI_Request request = MPI_REQUEST_NULL;
    Header own{};
    std::vector<Header> headers;
    std::vector<char> send, recv;
    std::vector<int> counts, displs;
  };

  static uint64_t Hash(std::string_view kind, std::string_view name, int root) {
    std::string key(kind);
    key += '\0';
    key.append(name);
    key += '\0';
    key += std::to_string(root);
    return HashName(key);
  }

  // Step 1 (see the top of the file).
  Status ExchangeHeaders(std::unique_ptr<Op>& op, const std::string& what, uint64_t hash, uint64_t size,
                         Duration timeout) {
    if (!broken_.empty()) {
      return FailedPreconditionError(what + ": the MPI coordinator is unusable since " + broken_ +
                                     " timed out or failed");
    }
    op->own = Header{hash, size};
    op->headers.resize(count_);
    int rc = MPI_Iallgather(&op->own, 2, MPI_UINT64_T, op->headers.data(), 2, MPI_UINT64_T,
                            comm_, &op->request);
    if (rc != MPI_SUCCESS) return Broken(MpiError(rc, what), what);
    CAIRN_RETURN_IF_ERROR(Wait(op, what, timeout));
    for (int i = 0; i < count_; ++i) {
      if (op->headers[i].hash != hash) {
        return FailedPreconditionError(
            what + ": process " + std::to_string(i) +
            " called a different collective at this point (processes must call the same "
            "collectives, with the same names and roots, in the same order)");
      }
    }
    return Status::OK();
  }

  // An MPI error inside a collective leaves the processes out of step: the
  // coordinator is unusable from then on, as after a timeout.
  Status Broken(Status error, const std::string& what) {
    if (broken_.empty()) broken_ = what;
    return error;
  }

  // On timeout, keeps `op` in abandoned_ (leaving `op` null).
  Status Wait(std::unique_ptr<Op>& op, const std::string& what, Duration timeout) {
    Result<bool> done = PollUntil(&op->request, op->deadline, what);
    if (!done.ok()) return Broken(done.status(), what);
    if (*done) return Status::OK();
    broken_ = what;
    abandoned_.push_back(std::move(op));
    return UnavailableError(what + ": not every one of the " + std::to_string(count_) +
                            " processes arrived within " + FormatSeconds(timeout));
  }

  MPI_Comm comm_;
  const int index_;
  const int count_;
  std::mutex own_lock_;
  std::mutex& lock_;  // own_lock_ or SharedMpiLock()
  std::string broken_;       // the collective that timed out, if any
  std::vector<std::unique_ptr<Op>> abandoned_;  // its pending request and buffers
};

}  // namespace

Status InitializeMpiIfNeeded() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return FailedPreconditionError("MPI was already finalized");
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
    std::atexit(FinalizeMpiAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  if (provided < MPI_THREAD_SERIALIZED) {
    return FailedPreconditionError(
        "MPI was initialized with a thread level below MPI_THREAD_SERIALIZED (" +
        std::to_string(provided) + "); cairn calls MPI from its own threads");
  }
  return Status::OK();
}

Result<std::unique_ptr<Coordinator>> NewMpiCoordinator(Coordinator::Duration timeout) {
  CAIRN_RETURN_IF_ERROR(InitializeMpiIfNeeded());
  // On the heap: if the duplication times out, MPI may still write the
  // handle later, so both are then left allocated (like a timed-out
  // collective's buffers).
  auto pending = std::make_unique<std::pair<MPI_Comm, MPI_Request>>(MPI_COMM_NULL, MPI_REQUEST_NULL);
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, &pending->first, &pending->second);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_idup(MPI_COMM_WORLD)");
  CAIRN_ASSIGN_OR_RETURN(bool done,
                         PollUntil(&pending->second, DeadlineAfter(timeout), "MPI_Comm_idup"));
  if (!done) {
    pending.release();  // NOLINT: deliberately leaked, see above
    return UnavailableError("creating the MPI coordinator: not every process joined within " +
                            FormatSeconds(timeout));
  }
  MPI_Comm comm = pending->first;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int index = 0, count = 0;
  MPI_Comm_rank(comm, &index);
  MPI_Comm_size(comm, &count);
  return std::unique_ptr<Coordinator>(new MpiCoordinator(comm, index, count));
}

bool MpiCoordinatorAvailable() { return true; }

}  // namespace cairn

#else  // !CAIRN_HAVE_MPI

namespace cairn {

Status InitializeMpiIfNeeded() {
  return UnimplementedError("cairn was built without MPI (CMake did not find it)");
}

Result<std::unique_ptr<Coordinator>> NewMpiCoordinator(Coordinator::Duration) {
  return UnimplementedError("cairn was built without MPI (CMake did not find it)");
}

bool MpiCoordinatorAvailable() { return false; }

}  // namespace cairn

#endif  // CAIRN_HAVE_MPI
