// The MPI transport (mpi_transport.h).
#include "cairn/emergency/mpi_transport.h"

#include "cairn/mpi_coordinator.h"

#if CAIRN_HAVE_MPI

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cairn::emergency {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeps a growing pause (up to 1 ms) between polls so that oversubscribed
// ranks yield the CPU.
class Poller {
 public:
  void Pause() {
    if (spins_++ < 64) {
      std::this_thread::yield();
      return;
    }
    pause_ = std::min(std::chrono::microseconds(1000), pause_ + std::chrono::microseconds(20));
    std::this_thread::sleep_for(pause_);
  }

 private:
  int spins_ = 0;
  std::chrono::microseconds pause_{0};
};

Clock::time_point Deadline(PeerTransport::Duration timeout) {
  const auto now = Clock::now();
  if (timeout > Clock::time_point::max() - now) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

class MpiTransport final : public PeerTransport {
 public:
  MpiTransport(MPI_Comm comm, int index, int count) : comm_(comm), index_(index), count_(count) {}
  // The communicator is left to MPI_Finalize (abandoned sends may use it).

  int process_index() const override { return index_; }
  int process_count() const override { return count_; }

  Status Send(int dest, int tag, ByteView bytes, Duration timeout) override {
    const std::string what = "MPI send of " + std::to_string(bytes.size()) + " bytes to process " +
                             std::to_string(dest) + " (tag " + std::to_string(tag) + ")";
    if (dest < 0 || dest >= count_ || tag < 0 || tag >= kMaxTag || bytes.size() > INT_MAX) {
      return InvalidArgumentError(what + ": destination, tag or size out of range");
    }
    auto pending = std::make_unique<Pending>();
    pending->bytes.assign(bytes.begin(), bytes.end());
    int rc = MPI_Isend(pending->bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag,
                       comm_, &pending->request);
    if (rc != MPI_SUCCESS) return InternalError(what + ": MPI_Isend failed (" + std::to_string(rc) + ")");
    const auto deadline = Deadline(timeout);
    Poller poller;
    for (;;) {
      int done = 0;
      rc = MPI_Test(&pending->request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return InternalError(what + ": MPI_Test failed (" + std::to_string(rc) + ")");
      if (done) return Status::OK();
      if (Clock::now() >= deadline) {
        std::lock_guard<std::mutex> lock(mu_);
        abandoned_.push_back(std::move(pending));
        return UnavailableError(what + ": the receiver did not take it in time");
      }
      poller.Pause();
    }
  }

  Expectation Expect(int, int) override { return Expectation(); }  // queues whatever arrives
  Result<Buffer> Receive(int source, int tag, size_t max_bytes, Duration timeout) override {
    const std::string what =
        "MPI receive from process " + std::to_string(source) + " (tag " + std::to_string(tag) + ")";
    if (source < 0 || source >= count_ || tag < 0 || tag >= kMaxTag) {
      return InvalidArgumentError(what + ": source or tag out of range");
    }
    const auto deadline = Deadline(timeout);
    Poller poller;
    MPI_Message message;
    MPI_Status status;
    for (;;) {
      int found = 0;
      int rc = MPI_Improbe(source, tag, comm_, &found, &message, &status);
      if (rc != MPI_SUCCESS) return InternalError(what + ": MPI_Improbe failed (" + std::to_string(rc) + ")");
      if (found) break;
      if (Clock::now() >= deadline) return UnavailableError(what + ": no message in time");
      poller.Pause();
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count < 0 || static_cast<size_t>(count) > max_bytes) {
      // Take the message off the wire, then refuse it.
      std::vector<char> sink(count > 0 ? count : 0);
      MPI_Mrecv(sink.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
      return ResourceExhaustedError(what + ": a message of " + std::to_string(count) +
                                    " bytes exceeds the limit of " + std::to_string(max_bytes));
    }
    CAIRN_ASSIGN_OR_RETURN(Buffer out, Buffer::TryAllocate(count, "an MPI message"));
    int rc = MPI_Mrecv(out.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return InternalError(what + ": MPI_Mrecv failed (" + std::to_string(rc) + ")");
    return out;
  }

 private:
  struct Pending {
    std::vector<uint8_t> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  MPI_Comm comm_;
  const int index_, count_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Pending>> abandoned_;
};

}  // namespace

Result<std::shared_ptr<PeerTransport>> NewMpiTransport() {
  CAIRN_RETURN_IF_ERROR(InitializeMpiIfNeeded());
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    return FailedPreconditionError(
        "the MPI peer transport needs MPI_THREAD_MULTIPLE (transfers run beside the coordinator's "
        "collectives); MPI provides level " + std::to_string(provided));
  }
  MPI_Comm comm;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return InternalError("MPI_Comm_dup(MPI_COMM_WORLD) failed");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int index = 0, count = 0;
  MPI_Comm_rank(comm, &index);
  MPI_Comm_size(comm, &count);
  return std::shared_ptr<PeerTransport>(new MpiTransport(comm, index, count));
}

}  // namespace cairn::emergency

#else  // !CAIRN_HAVE_MPI

namespace cairn::emergency {

Result<std::shared_ptr<PeerTransport>> NewMpiTransport() {
  return UnimplementedError("cairn was built without MPI (CMake did not find it)");
}

}  // namespace cairn::emergency

#endif
