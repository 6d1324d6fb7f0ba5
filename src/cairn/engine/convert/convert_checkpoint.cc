#include "cairn/engine/convert/convert_checkpoint.h"

#include "cairn/engine/convert/destinations.h"
#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/open_checkpoint.h"

namespace cairn::engine {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// An interrupted conversion's status: what it copied, that nothing was
// committed, and what a re-run keeps.
Status InterruptedConversion(const Status& stopped, const DestinationFormat& format,
                             const std::string& dest) {
  std::string message(stopped.message());
  if (message == kInterruptedAfterCommit) return stopped;
  message += "; nothing was committed at " + dest + ". ";
  message += format.resumes
                 ? "Run the same conversion again to resume: it keeps the arrays this one completed"
                 : "Run the same conversion again to start over (" + std::string(format.name) +
                       " is written front to back, so nothing is kept)";
  return Status(StatusCode::kCancelled, std::move(message));
}

}  // namespace

Result<Location> OpenUserLocation(const std::string& path_or_url) {
  if (path_or_url.empty()) return Status(StatusCode::kInvalidArgument, "empty location");
  if (path_or_url.find("://") != std::string::npos) {
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, OpenKvStore(path_or_url));
    return Location{std::move(store), ""};
  }
  std::string path = AbsoluteUserPath(path_or_url);
  std::string file;
  if (EndsWith(path, ".safetensors") || EndsWith(path, ".json")) {
    size_t slash = path.rfind('/');
    file = path.substr(slash + 1);
    path = path.substr(0, slash);
  }
  if (path.empty() || path.back() != '/') path += '/';
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, OpenKvStore(FileUrlOfPath(path)));
  return Location{std::move(store), file};
}

Result<ConvertCheckpointResult> ConvertCheckpoint(const ConvertCheckpointRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(const DestinationFormat* format, FindDestinationFormat(request.to));
  Coordinator* coordinator =
      request.coordinator != nullptr && request.coordinator->process_count() > 1
          ? request.coordinator
          : nullptr;
  const bool primary = coordinator == nullptr || coordinator->is_primary();
  const auto timeout = request.options.timeout;
  // Every process opens the source and the destination; the primary checks
  // that the destination holds no committed checkpoint. All agree first, so
  // that no process starts while another has already failed.
  Result<layout::OpenedCheckpoint> opened = Status(StatusCode::kInternal, "not opened");
  Result<Location> dst = Status(StatusCode::kInternal, "not opened");
  ConvertCheckpointResult result;
  ConvertOptions options = request.options;
  WriterFactory make_writer, attach_writer;
  ReaderFactory open_dest;
  Status prepared = [&]() -> Status {
    CAIRN_ASSIGN_OR_RETURN(Location src, OpenUserLocation(request.source));
    opened = layout::OpenCheckpoint(src.store, src.prefix, request.from, request.step);
    CAIRN_RETURN_IF_ERROR(opened.status());
    dst = OpenUserLocation(request.dest);
    CAIRN_RETURN_IF_ERROR(dst.status());
    result.source_format = opened->format;
    result.source_location = opened->location;
    DestinationContext context{request, src.store, *opened, *dst, primary, options,
                               make_writer, attach_writer, open_dest, result};
    return format->prepare(context);
  }();
  Result<ConvertStats> stats = Status(StatusCode::kInternal, "not converted");
  if (coordinator == nullptr) {
    CAIRN_RETURN_IF_ERROR(prepared);
    stats = Convert(*opened->reader, make_writer, open_dest, options);
  } else {
    CAIRN_RETURN_IF_ERROR(AgreeOnStatus(*coordinator, "cairn/convert/prepare", prepared, timeout));
    stats = ConvertDistributed(*opened->reader, make_writer, attach_writer, open_dest, options,
                               *coordinator);
  }
  if (WasInterrupted(stats.status(), options.interrupt)) {
    return InterruptedConversion(stats.status(), *format, request.dest);
  }
  CAIRN_ASSIGN_OR_RETURN(result.stats, std::move(stats));
  return result;
}

}  // namespace cairn::engine
