// Copies the planned arrays of a conversion (convert_copier.h): tasks of
// slabs of destination chunks, run by worker threads, inside the slab budget.
#include "cairn/engine/convert/convert_copier.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <cstdio>

#include "cairn/dtype/cast.h"
#include "cairn/engine/convert/convert_memory.h"
#include "cairn/util/buffer.h"
#include "cairn/util/buffer_cache.h"
#include "cairn/zarr/stored_chunk.h"

namespace cairn::engine {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One unit of work: slabs of one destination chunk, copied in order by one
// worker (so a chunk is never written by two threads at once).
struct Task {
  size_t mapping = 0;
  std::vector<Box> slabs;
};

// The bytes held by slabs in flight: at most `limit` (the slab share)
// together, except one charge over it, which waits until nothing else is
// in flight and then runs alone, charged at most the whole budget (a
// source chunk too large for two to share the budget: convert_memory.h).
// With `ordered`, tickets are served in order: ticket k gets its bytes
// only after ticket k-1 got its own, so the oldest unwritten slab always
// holds its bytes and the writer can always make progress. Every change of
// the charges in flight moves the block cache's cap to what the memory
// budget leaves beside them (CacheShareBeside, convert_memory.h).
class SlabBudget {
 public:
  SlabBudget(uint64_t limit, bool ordered, uint64_t memory_budget)
      : limit_(limit), ordered_(ordered), memory_budget_(memory_budget) {
    std::lock_guard lock(mu_);
    MoveCacheCap();
  }

  // Returns false when `abort` was raised while waiting.
  bool Acquire(uint64_t bytes, uint64_t ticket, const std::atomic<bool>& abort) {
    bytes = std::min(bytes, memory_budget_);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] {
      return abort.load() || ((!ordered_ || next_ticket_ == ticket) &&
                              (used_ + bytes <= limit_ || used_ == 0));
    });
    if (abort.load()) return false;
    used_ += bytes;
    peak_ = std::max(peak_, used_);
    // Evicts what the new charge may need: cached blocks and charges stay
    // within the memory budget together.
    MoveCacheCap();
    if (ordered_) ++next_ticket_;
    cv_.notify_all();
    return true;
  }

  void Release(uint64_t bytes) {
    bytes = std::min(bytes, memory_budget_);
    std::lock_guard lock(mu_);
    used_ -= bytes;
    MoveCacheCap();
    cv_.notify_all();
  }

  // Releases `bytes` (acquired before) when it goes out of scope.
  struct Held {
    SlabBudget& budget;
    uint64_t bytes;
    ~Held() { budget.Release(bytes); }
  };

  void WakeAll() {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }

  uint64_t peak() {
    std::lock_guard lock(mu_);
    return peak_;
  }

 private:
  // REQUIRES: mu_ held.
  void MoveCacheCap() {
    SetBufferBlockCacheLimit(used_ <= limit_ ? CacheShareBeside(memory_budget_, used_)
                                             : memory_budget_ - used_);
  }

  const uint64_t limit_;
  const bool ordered_;
  const uint64_t memory_budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  uint64_t next_ticket_ = 0;
};

// A buffer from the block cache (convert_memory.h) that reports
// allocation failure instead of throwing.
Result<Buffer> TryAllocate(uint64_t bytes, std::string_view what) {
  return Buffer::TryAllocate(static_cast<size_t>(std::max<uint64_t>(bytes, 1)), what);
}

class Copier {
 public:
  // Copies the tasks whose index is `rank` modulo `ranks`.
  Copier(layout::CheckpointReader& source, layout::CheckpointWriter& writer,
         const std::vector<ArrayMapping>& plan, const ConvertOptions& options, int threads,
         const std::vector<bool>& skip, int rank = 0, int ranks = 1)
      : source_(source), writer_(writer), plan_(plan), options_(options), threads_(threads),
        ordered_(writer.required_order() != nullptr),
        budget_(SlabShare(options.memory_budget), ordered_, options.memory_budget), skip_(skip), rank_(rank), ranks_(ranks) {}

  Status Run(ConvertStats& stats) {
    start_ = Clock::now();
    const std::optional<uint64_t> read_before = source_.StoredBytesRead();
    CAIRN_RETURN_IF_ERROR(BuildTasks());
    std::vector<std::thread> workers;
    for (int i = 0; i < threads_; ++i) workers.emplace_back([this] { Work(); });
    for (std::thread& t : workers) t.join();
    if (!first_error_.ok()) return first_error_;
    stats.arrays = plan_.size();
    // What the reader read from storage, when it counts; else the source
    // bytes copied.
    const std::optional<uint64_t> read_after = source_.StoredBytesRead();
    stats.bytes_read = read_before && read_after ? *read_after - *read_before : bytes_read_.load();
    stats.bytes_written = bytes_written_.load();
    stats.peak_slab_bytes = budget_.peak();
    stats.chunks_copied_stored = stored_chunks_.load();
    return Status::OK();
  }

 private:
  Status BuildTasks() {
    std::map<std::string, size_t> by_dest;
    for (size_t i = 0; i < plan_.size(); ++i) by_dest[plan_[i].dest.path] = i;
    std::vector<size_t> order;
    if (ordered_) {
      for (const std::string& path : *writer_.required_order()) {
        auto it = by_dest.find(path);
        if (it == by_dest.end()) {
          return Status(StatusCode::kInternal, "writer orders unknown array `" + path + "`");
        }
        order.push_back(it->second);
      }
    } else {
      for (size_t i = 0; i < plan_.size(); ++i) order.push_back(i);
    }
    const uint64_t max_slab = FitShare(options_.memory_budget);
    remaining_slabs_.assign(plan_.size(), 0);
    stored_.assign(plan_.size(), false);
    rows_.assign(plan_.size(), false);
    for (size_t i : order) {
      const ArrayMapping& m = plan_[i];
      if (i < skip_.size() && skip_[i]) {
        ++arrays_done_;
        continue;
      }
      total_bytes_ += NumElements(m.dest.shape) * DTypeSize(m.dest.dtype);
      // Stored chunks valid as they are in the destination are copied
      // undecoded (the whole-chunk path, convert.h).
      const std::string form = source_.StoredChunkForm(m.source.path);
      stored_[i] = options_.pass_stored_chunks && !form.empty() && m.source_axes.empty() &&
                   form == writer_.StoredChunkForm(m.dest.path);
      // Ordered writers take whole arrays front to back; the others whole
      // destination chunks (fitted to max_slab). Slabs of an ordered
      // writer leave room for the codec memory of their reads, so that
      // two fit in the budget.
      // An ordered writer takes an array whose source pieces are whole
      // rows of it one piece at a time, in storage order: each is decoded
      // once and handed over (CopyOrderedPiece). Otherwise its slabs
      // would cut across pieces and decode each again per slab.
      rows_[i] = ordered_ && RowPieces(m);
      const Shape& chunk =
          rows_[i] ? m.source.read_shape : ordered_ ? m.dest.shape : m.dest.write_shape;
      uint64_t slab_limit = max_slab;
      if (ordered_) {
        const uint64_t codecs = SlabCharge(m, 0, source_.format(), writer_.format());
        slab_limit = std::max<uint64_t>(max_slab > codecs ? max_slab - codecs : 0,
                                        std::min<uint64_t>(max_slab, 1 << 20));
      }
      // A destination chunk of a source that decodes in pieces is made of
      // whole pieces (convert.cc fits it so) and copied as one slab: cut
      // into slabs, each would decode the pieces again.
      const bool whole = (!ordered_ && ReadUnitElements(m.source) > 0) || rows_[i];
      // A transposed array to an ordered writer: bands of whole source
      // pieces' columns (convert_memory.h), each decoded once.
      const Shape band = ordered_ ? TransposedBand(m, slab_limit, options_.memory_budget,
                                                   SlabCharge(m, 0, source_.format(), writer_.format()))
                                  : Shape{};
      for (const Box& box : ChunkBoxes(m.dest.shape, chunk)) {
        std::vector<Box> slabs = whole          ? (box.empty() ? std::vector<Box>{} : std::vector<Box>{box})
                                 : !band.empty() ? ChunkBoxes(m.dest.shape, band)
                                                 : SplitIntoSlabs(box, SlabBytesPerElement(m), slab_limit);
        remaining_slabs_[i] += slabs.size();
        if (ordered_) {
          for (Box& s : slabs) tasks_.push_back({i, {std::move(s)}});
        } else if (!slabs.empty()) {
          if (chunk_counter_++ % ranks_ != static_cast<uint64_t>(rank_)) {
            remaining_slabs_[i] -= slabs.size();  // another process copies it
            continue;
          }
          tasks_.push_back({i, std::move(slabs)});
        }
      }
      if (remaining_slabs_[i] == 0) ++arrays_done_;
    }
    return Status::OK();
  }

  // The source's pieces of `m` are whole rows (bands spanning every later
  // dimension), copied as they are (no cast).
  static bool RowPieces(const ArrayMapping& m) {
    const Shape& unit = m.source.read_shape;
    if (ReadUnitElements(m.source) == 0 || m.dest.dtype != m.source.dtype || unit.empty() ||
        !m.source_axes.empty()) {
      return false;
    }
    for (size_t d = 1; d < unit.size(); ++d) {
      if (unit[d] != m.source.shape[d]) return false;
    }
    return unit[0] > 0;
  }

  void Work() {
    for (;;) {
      const uint64_t t = next_task_.fetch_add(1);
      if (t >= tasks_.size() || failed_.load()) return;
      const Task& task = tasks_[t];
      for (const Box& slab : task.slabs) {
        Status s = Interrupted();
        if (s.ok()) s = CopySlab(task.mapping, slab, t);
        if (!s.ok()) {
          Fail(std::move(s));
          return;
        }
      }
    }
  }

  Status CopySlab(size_t i, const Box& slab, uint64_t ticket) {
    const ArrayMapping& m = plan_[i];
    const uint64_t n = static_cast<uint64_t>(slab.num_elements());
    if (rows_[i]) return CopyOrderedPiece(i, slab, ticket);
    if (WholeChunkPath(m, slab)) {
      bool copied = false;
      if (stored_[i]) CAIRN_RETURN_IF_ERROR(CopyStoredChunk(i, slab, copied));
      if (!copied) CAIRN_RETURN_IF_ERROR(CopyWholeChunk(i, slab, copied));
      if (copied) return Status::OK();
    }
    const uint64_t bytes = n * SlabBytesPerElement(m);
    // The slab and what the reader and writer hold beside it.
    const uint64_t charge = SlabCharge(m, n, source_.format(), writer_.format());
    if (!budget_.Acquire(charge, ticket, failed_)) return Status::OK();
    const SlabBudget::Held release{budget_, charge};
    CAIRN_ASSIGN_OR_RETURN(Buffer buffer,
                           TryAllocate(bytes, "array `" + m.source.path + "` box " + slab.ToString()));
    CAIRN_RETURN_IF_ERROR(source_.ReadBox(m.source.path, SourceBox(m, slab), buffer.data()));
    const uint8_t* out = buffer.data();
    if (!m.source_axes.empty()) {  // a transposed array: the slab in the destination's axes
      uint8_t* arranged = buffer.data() + n * DTypeSize(m.source.dtype);
      ArrangeAsDest(m, slab, buffer.data(), arranged);
      out = arranged;
    }
    if (m.dest.dtype != m.source.dtype) {
      uint8_t* cast = const_cast<uint8_t*>(out) + n * DTypeSize(m.source.dtype);
      CAIRN_RETURN_IF_ERROR(CastElements(m.source.dtype, out, m.dest.dtype, cast, n));
      out = cast;
    }
    if (ordered_) {
      std::unique_lock lock(turn_mu_);
      turn_cv_.wait(lock, [&] { return failed_.load() || written_upto_ == ticket; });
      if (failed_.load()) return Status::OK();
    }
    Status written = writer_.WriteBox(m.dest.path, slab, out);
    if (ordered_) PassTurn(written);
    CAIRN_RETURN_IF_ERROR(written);
    Done(i, n);
    return Status::OK();
  }

  // The whole-chunk path: `slab` is one source chunk and one destination
  // chunk of the same grid and dtype, so the chunk the reader decodes is
  // handed to the writer as it is, which encodes straight from it: no slab
  // is allocated and nothing is copied.
  bool WholeChunkPath(const ArrayMapping& m, const Box& slab) const {
    if (ordered_ || m.dest.dtype != m.source.dtype || !m.source_axes.empty() ||
        m.source.write_shape != m.dest.write_shape ||
        slab.rank() != m.source.shape.size() || m.source.write_shape.size() != slab.rank()) {
      return false;
    }
    for (size_t d = 0; d < slab.rank(); ++d) {
      const Index c = m.source.write_shape[d];
      if (c <= 0 || slab.shape[d] != c || slab.origin[d] % c != 0) return false;
    }
    return true;
  }

  // Sets `copied` when the reader could hand the chunk over; otherwise the
  // caller copies through a slab.
  Status CopyWholeChunk(size_t i, const Box& slab, bool& copied) {
    const ArrayMapping& m = plan_[i];
    const uint64_t n = static_cast<uint64_t>(slab.num_elements());
    const uint64_t charge = WholeChunkCharge(m, n, writer_.format());
    if (!budget_.Acquire(charge, 0, failed_)) {
      copied = true;  // failed elsewhere: nothing more to do
      return Status::OK();
    }
    const SlabBudget::Held release{budget_, charge};
    CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> chunk, source_.ReadWholeChunk(m.source.path, slab));
    if (!chunk) return Status::OK();
    CAIRN_RETURN_IF_ERROR(writer_.WriteBox(m.dest.path, slab, chunk->data()));
    copied = true;
    Done(i, n);
    return Status::OK();
  }

  // One source piece of whole rows to an ordered writer, in its turn: the
  // decoded piece is handed over (charged as the whole-chunk path); a
  // piece the reader cannot hand over (missing, or clipped at the array's
  // end) is read into a slab of its own (charged as a slab).
  Status CopyOrderedPiece(size_t i, const Box& slab, uint64_t ticket) {
    const ArrayMapping& m = plan_[i];
    const uint64_t n = static_cast<uint64_t>(slab.num_elements());
    const bool full = slab.shape[0] == m.source.read_shape[0];
    const uint64_t charge = full ? WholeChunkCharge(m, n, writer_.format())
                                 : SlabCharge(m, n, source_.format(), writer_.format());
    if (!budget_.Acquire(charge, ticket, failed_)) return Status::OK();
    const SlabBudget::Held release{budget_, charge};
    std::optional<Buffer> piece;
    if (full) {
      CAIRN_ASSIGN_OR_RETURN(piece, source_.ReadWholeChunk(m.source.path, slab));
    }
    if (!piece) {
      CAIRN_ASSIGN_OR_RETURN(Buffer own, TryAllocate(n * DTypeSize(m.source.dtype),
                                                     "array `" + m.source.path + "` box " +
                                                         slab.ToString()));
      CAIRN_RETURN_IF_ERROR(source_.ReadBox(m.source.path, slab, own.data()));
      piece = std::move(own);
    }
    {
      std::unique_lock lock(turn_mu_);
      turn_cv_.wait(lock, [&] { return failed_.load() || written_upto_ == ticket; });
      if (failed_.load()) return Status::OK();
    }
    Status written = writer_.WriteBox(m.dest.path, slab, piece->data());
    PassTurn(written);
    CAIRN_RETURN_IF_ERROR(written);
    Done(i, n);
    return Status::OK();
  }

  // A chunk whose stored bytes the writer takes as they are: read and
  // stored without decoding, charged its stored bytes. Sets `copied` when
  // it was (not for a missing chunk, or one that fails the reader's cheap
  // checks: the caller decodes it).
  Status CopyStoredChunk(size_t i, const Box& slab, bool& copied) {
    const ArrayMapping& m = plan_[i];
    const uint64_t n = static_cast<uint64_t>(slab.num_elements());
    const uint64_t charge = StoredBound(n * DTypeSize(m.source.dtype));
    if (!budget_.Acquire(charge, 0, failed_)) {
      copied = true;  // failed elsewhere: nothing more to do
      return Status::OK();
    }
    const SlabBudget::Held release{budget_, charge};
    CAIRN_ASSIGN_OR_RETURN(std::optional<StoredChunk> chunk,
                           source_.ReadStoredChunk(m.source.path, slab));
    if (!chunk) return Status::OK();
    CAIRN_RETURN_IF_ERROR(writer_.WriteStoredChunk(m.dest.path, slab, chunk->view()));
    copied = true;
    ++stored_chunks_;
    Done(i, n);
    return Status::OK();
  }

  // StatusCode::kCancelled, saying how far the copy got, once the interrupt is
  // requested (checked before each slab).
  Status Interrupted() {
    if (options_.interrupt == nullptr || !options_.interrupt->requested()) return Status::OK();
    std::lock_guard lock(progress_mu_);
    char done[96];
    std::snprintf(done, sizeof(done), "%.1f of %.1f MiB", bytes_written_.load() / 1048576.0,
                  total_bytes_ / 1048576.0);
    return Status(StatusCode::kCancelled,
                  "the conversion was interrupted after " + std::to_string(arrays_done_) + " of " +
                      std::to_string(plan_.size()) + " arrays (" + done + ")");
  }

  // Ends an ordered writer's turn. A failed write ends every turn (the
  // conversion has failed, and its error is the one reported) before the
  // next slab's thread wakes: that slab would follow a hole, and the
  // writer's complaint about it would hide the real error.
  void PassTurn(const Status& written) {
    if (!written.ok()) {
      Fail(written);
      return;
    }
    std::lock_guard lock(turn_mu_);
    ++written_upto_;
    turn_cv_.notify_all();
  }

  void Done(size_t i, uint64_t n) {
    const ArrayMapping& m = plan_[i];
    bytes_read_ += n * DTypeSize(m.source.dtype);
    bytes_written_ += n * DTypeSize(m.dest.dtype);
    Report(i);
  }

  void Report(size_t i) {
    std::lock_guard lock(progress_mu_);
    if (--remaining_slabs_[i] == 0) ++arrays_done_;
    if (!options_.progress) return;
    ConvertProgress p;
    p.bytes_done = bytes_written_.load();
    p.bytes_total = total_bytes_;
    p.arrays_done = arrays_done_;
    p.arrays_total = plan_.size();
    p.seconds = SecondsSince(start_);
    options_.progress(p);
  }

  void Fail(Status s) {
    {
      std::lock_guard lock(progress_mu_);
      if (first_error_.ok()) first_error_ = std::move(s);
    }
    failed_ = true;
    budget_.WakeAll();
    std::lock_guard lock(turn_mu_);
    turn_cv_.notify_all();
  }

  layout::CheckpointReader& source_;
  layout::CheckpointWriter& writer_;
  const std::vector<ArrayMapping>& plan_;
  const ConvertOptions& options_;
  const int threads_;
  const bool ordered_;
  SlabBudget budget_;
  const std::vector<bool>& skip_;
  const int rank_, ranks_;
  uint64_t chunk_counter_ = 0;
  Clock::time_point start_;
  std::vector<Task> tasks_;
  std::vector<bool> stored_;  // by mapping: stored chunks pass as they are
  std::vector<bool> rows_;    // by mapping: an ordered writer takes whole pieces
  std::atomic<uint64_t> next_task_{0};
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> bytes_read_{0}, bytes_written_{0};
  std::atomic<uint64_t> stored_chunks_{0};
  std::mutex turn_mu_;
  std::condition_variable turn_cv_;
  uint64_t written_upto_ = 0;  // guarded by turn_mu_
  std::mutex progress_mu_;
  std::vector<size_t> remaining_slabs_;  // guarded by progress_mu_
  size_t arrays_done_ = 0;               // guarded by progress_mu_
  uint64_t total_bytes_ = 0;
  Status first_error_;  // guarded by progress_mu_
};


}  // namespace

Status CopyPlannedArrays(layout::CheckpointReader& source, layout::CheckpointWriter& writer,
                         const std::vector<ArrayMapping>& plan, const ConvertOptions& options,
                         int threads, const std::vector<bool>& skip, ConvertStats& stats, int rank,
                         int ranks) {
  Copier copier(source, writer, plan, options, threads, skip, rank, ranks);
  return copier.Run(stats);
}

}  // namespace cairn::engine
