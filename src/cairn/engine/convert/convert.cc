#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_copier.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "cairn/events.h"
#include "cairn/engine/convert/convert_memory.h"
#include "cairn/util/buffer_cache.h"

namespace cairn::engine {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int ThreadsFor(const ConvertOptions& options) {
  // Twice the cores by default: a worker waiting on a read or on a chunk's
  // fsync leaves its core to one that decodes or encodes.
  return options.threads > 0
             ? options.threads
             : std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
}

std::string ShapeText(const Shape& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

// The refusal of a budget below MinimumBudget(m): names the array, its
// chunks and the least budget, as the CLI and Python take it back.
Status BudgetTooSmall(const ArrayMapping& m, uint64_t budget) {
  const uint64_t n = ReadUnitElements(m.source);
  const uint64_t least = MinimumBudget(m);
  const std::string at_least = FormatBudget(least);
  const uint64_t least_bytes = RoundUpBudget(least);
  const std::string given =
      RoundUpBudget(budget) == budget ? FormatBudget(budget) : std::to_string(budget) + " bytes";
  std::string dest = FormatBudget(n * DTypeSize(m.dest.dtype));
  if (m.dest.dtype != m.source.dtype) dest += " as " + std::string(DTypeName(m.dest.dtype));
  return Status(StatusCode::kInvalidArgument,
                "memory budget of " + given + " is too small for array `" + m.source.path + "` (" +
                    std::string(DTypeName(m.source.dtype)) + " " + ShapeText(m.source.shape) +
                    ", stored in chunks of " + ShapeText(m.source.read_shape) + "): it must hold " +
                    "one source chunk (" + FormatBudget(n * DTypeSize(m.source.dtype)) +
                    " decoded) and one destination chunk (" + dest +
                    ") so that each chunk is read once; the least budget is " + at_least +
                    " (--memory-budget " + at_least + ", memory_budget=" +
                    std::to_string(least_bytes) + ")");
}

// Plans, and fits destination chunks to a slab: chunks that fit are copied
// whole, never read back, modified and written again.
Result<std::vector<ArrayMapping>> PlanAndFit(layout::CheckpointReader& source,
                                             const ConvertOptions& options) {
  if (options.memory_budget < 4096) {
    return Status(StatusCode::kInvalidArgument, "memory budget of " +
                                                    std::to_string(options.memory_budget) +
                                                    " bytes is too small (at least 4096)");
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<ArrayMapping> plan,
                         PlanConversion(source.arrays(), options.plan));
  std::string warning;  // the first array a small budget cuts
  const ArrayMapping* largest = nullptr;  // the array that needs the most
  for (ArrayMapping& m : plan) {
    if (m.dest.write_shape.size() != m.dest.shape.size()) m.dest.write_shape = m.dest.shape;
    const Shape planned = m.dest.write_shape;
    // Never cut across a piece the source decodes at once (convert_memory.h).
    m.dest.write_shape = FitChunkShapeInUnits(m.dest.write_shape, SourceReadShapeInDest(m),
                                              FitBytesPerElement(m),
                                              FitShare(options.memory_budget));
    if (warning.empty()) warning = SlowBudgetWarning(options.memory_budget, m, planned, m.dest.write_shape);
    if (largest == nullptr || MinimumBudget(m) > MinimumBudget(*largest)) largest = &m;
  }
  if (largest != nullptr && MinimumBudget(*largest) > options.memory_budget) {
    return BudgetTooSmall(*largest, options.memory_budget);
  }
  // Said once, before anything is written (issue 29: 4 KiB ran 355 s
  // without a word).
  if (!warning.empty() && options.warning) options.warning(warning);
  return plan;
}

// Which arrays of `plan` an interrupted run already wrote completely.
Result<std::vector<bool>> CompleteArrays(layout::CheckpointWriter& writer,
                                         const std::vector<ArrayMapping>& plan,
                                         const ConvertOptions& options) {
  std::vector<bool> skip(plan.size(), false);
  if (!options.resume) return skip;
  for (size_t i = 0; i < plan.size(); ++i) {
    CAIRN_ASSIGN_OR_RETURN(bool complete, writer.ArrayComplete(plan[i].dest.path));
    skip[i] = complete;
  }
  return skip;
}

std::vector<layout::ArrayInfo> DestArrays(const std::vector<ArrayMapping>& plan) {
  std::vector<layout::ArrayInfo> dest;
  for (const ArrayMapping& m : plan) dest.push_back(m.dest);
  return dest;
}

Status CommitAndVerify(layout::CheckpointReader& source, layout::CheckpointWriter& writer,
                       const ReaderFactory& open_dest, const std::vector<ArrayMapping>& plan,
                       const ConvertOptions& options, ConvertStats& stats) {
  CAIRN_RETURN_IF_ERROR(writer.Commit());
  if (!options.verify) return Status::OK();
  const auto verify_start = Clock::now();
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<layout::CheckpointReader> dest, open_dest());
  Status verified = VerifyConversion(source, *dest, plan, options.memory_budget, options.interrupt);
  if (WasInterrupted(verified, options.interrupt)) {
    return Status(StatusCode::kCancelled, std::string(kInterruptedAfterCommit));
  }
  CAIRN_RETURN_IF_ERROR(verified);
  stats.verify_seconds = SecondsSince(verify_start);
  return Status::OK();
}

// The event (include/cairn/events.h) of a conversion that keeps arrays an
// interrupted run of it completed.
void ReportResumed(const std::vector<bool>& skip) {
  const auto resumed = std::count(skip.begin(), skip.end(), true);
  if (resumed == 0) return;
  EmitEvent(EventLevel::kInfo, "resuming an interrupted conversion: " + std::to_string(resumed) + " of " +
                                   std::to_string(skip.size()) + " arrays are already complete in the destination");
}

}  // namespace

Result<ConvertStats> Convert(layout::CheckpointReader& source, const WriterFactory& make_writer,
                             const ReaderFactory& open_dest, const ConvertOptions& options) {
  const auto start = Clock::now();
  const BlockCacheLimit cache_limit(options.memory_budget);
  const int threads = ThreadsFor(options);
  CAIRN_ASSIGN_OR_RETURN(std::vector<ArrayMapping> plan, PlanAndFit(source, options));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<layout::CheckpointWriter> writer,
                         make_writer(DestArrays(plan)));
  ConvertStats stats;
  CAIRN_ASSIGN_OR_RETURN(std::vector<bool> skip, CompleteArrays(*writer, plan, options));
  ReportResumed(skip);
  Status copied = CopyPlannedArrays(source, *writer, plan, options, threads, skip, stats);
  if (WasInterrupted(copied, options.interrupt)) {
    // The arrays completed so far are made durable (an OCDBT batch is
    // committed only now and then), so that a re-run keeps them.
    Status kept = writer->Flush();
    if (!kept.ok()) {
      return Status(copied.code(), std::string(copied.message()) +
                                       " (keeping the arrays it completed failed: " +
                                       kept.ToString() + ")");
    }
  }
  CAIRN_RETURN_IF_ERROR(copied);
  stats.arrays_resumed = std::count(skip.begin(), skip.end(), true);
  stats.seconds = SecondsSince(start);
  CAIRN_RETURN_IF_ERROR(CommitAndVerify(source, *writer, open_dest, plan, options, stats));
  stats.seconds = SecondsSince(start) - stats.verify_seconds;
  return stats;
}

Result<ConvertStats> ConvertDistributed(layout::CheckpointReader& source,
                                        const WriterFactory& make_writer,
                                        const WriterFactory& attach_writer,
                                        const ReaderFactory& open_dest,
                                        const ConvertOptions& options, Coordinator& coordinator) {
  const auto start = Clock::now();
  const BlockCacheLimit cache_limit(options.memory_budget);
  const int rank = coordinator.process_index(), ranks = coordinator.process_count();
  const auto timeout = options.timeout;
  const int threads = ThreadsFor(options);
  // Step 1.
  auto plan = PlanAndFit(source, options);
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator, "cairn/convert/plan", plan.status(), timeout));
  // Step 2.
  Result<std::unique_ptr<layout::CheckpointWriter>> writer =
      Status(StatusCode::kInternal, "no writer");
  if (rank == 0) writer = make_writer(DestArrays(*plan));
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator, "cairn/convert/create",
                                      rank == 0 ? writer.status() : Status::OK(), timeout));
  if (rank != 0) writer = attach_writer(DestArrays(*plan));
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator, "cairn/convert/attach", writer.status(), timeout));
  // Step 3.
  std::string skipped(plan->size(), '0');
  Status checked = Status::OK();
  if (rank == 0) {
    auto complete = CompleteArrays(**writer, *plan, options);
    if (complete.ok()) {
      for (size_t i = 0; i < complete->size(); ++i) skipped[i] = (*complete)[i] ? '1' : '0';
    }
    checked = complete.status();
  }
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator, "cairn/convert/resume", checked, timeout));
  CAIRN_ASSIGN_OR_RETURN(skipped, coordinator.Broadcast("cairn/convert/skip", 0, skipped, timeout));
  std::vector<bool> skip(plan->size(), false);
  for (size_t i = 0; i < skip.size() && i < skipped.size(); ++i) skip[i] = skipped[i] == '1';
  if (rank == 0) ReportResumed(skip);
  ConvertStats stats;
  Status copied = Status::OK();
  if (rank == 0 || (*writer)->required_order() == nullptr) {
    copied = CopyPlannedArrays(source, **writer, *plan, options, threads, skip, stats, rank,
                               (*writer)->required_order() == nullptr ? ranks : 1);
  }
  if (copied.ok()) copied = (*writer)->Flush();
  stats.arrays_resumed = std::count(skip.begin(), skip.end(), true);
  // Step 4.
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator, "cairn/convert/copied", copied, timeout));
  auto totals = coordinator.AllGather(
      "cairn/convert/bytes",
      std::to_string(stats.bytes_read) + " " + std::to_string(stats.bytes_written) + " " +
          std::to_string(stats.peak_slab_bytes) + " " + std::to_string(stats.chunks_copied_stored),
      timeout);
  if (!totals.ok()) return totals.status();
  stats.bytes_read = stats.bytes_written = stats.peak_slab_bytes = stats.chunks_copied_stored = 0;
  for (const std::string& t : *totals) {
    unsigned long long r = 0, w = 0, p = 0, c = 0;
    if (std::sscanf(t.c_str(), "%llu %llu %llu %llu", &r, &w, &p, &c) == 4) {
      stats.bytes_read += r;
      stats.bytes_written += w;
      stats.peak_slab_bytes = std::max<uint64_t>(stats.peak_slab_bytes, p);
      stats.chunks_copied_stored += c;
    }
  }
  stats.arrays = plan->size();
  Status committed = Status::OK();
  if (rank == 0) committed = CommitAndVerify(source, **writer, open_dest, *plan, options, stats);
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator, "cairn/convert/committed", committed, timeout));
  stats.seconds = SecondsSince(start) - stats.verify_seconds;
  return stats;
}

}  // namespace cairn::engine
