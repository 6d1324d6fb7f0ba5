// include/cairn/convert.h: the public conversion request, turned into the
// engine's (engine/convert/convert_checkpoint.h) in one place.
#include "cairn/convert.h"

#include "cairn/dtype/dtype.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/engine/convert/destinations.h"

namespace cairn {
namespace {

Result<engine::ConvertCheckpointRequest> EngineRequest(const ConvertRequest& request) {
  engine::ConvertCheckpointRequest r;
  r.source = request.source;
  r.dest = request.dest;
  r.to = request.to;
  r.from = request.from;
  r.step = request.step;
  r.overwrite = request.overwrite;
  r.max_file_bytes = request.max_file_bytes;
  r.coordinator = request.coordinator;
  r.options.memory_budget = request.memory_budget;
  r.options.threads = request.threads;
  r.options.verify = request.verify;
  r.options.resume = request.resume;
  r.options.interrupt = request.interrupt;
  r.options.plan.include = request.include;
  r.options.plan.exclude = request.exclude;
  for (const auto& [from_prefix, to_prefix] : request.renames) {
    r.options.plan.renames.push_back({from_prefix, to_prefix});
  }
  for (const auto& [glob, dtype_name] : request.casts) {
    CAIRN_ASSIGN_OR_RETURN(DType dtype, ParseDTypeName(dtype_name));
    r.options.plan.casts.push_back({glob, dtype});
  }
  if (request.progress) {
    r.options.progress = [progress = request.progress](const engine::ConvertProgress& p) {
      progress(ConvertProgress{p.bytes_done, p.bytes_total, p.arrays_done, p.arrays_total});
    };
  }
  return r;
}

}  // namespace

std::vector<std::string> ConvertDestinationFormats() { return engine::DestinationFormatNames(); }

Status ValidateConvertRequest(const ConvertRequest& request) {
  for (const auto& cast : request.casts) {
    CAIRN_RETURN_IF_ERROR(ParseDTypeName(cast.second).status());
  }
  return Status::OK();
}

Result<ConvertResult> Convert(const ConvertRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(engine::ConvertCheckpointRequest r, EngineRequest(request));
  CAIRN_ASSIGN_OR_RETURN(engine::ConvertCheckpointResult out, engine::ConvertCheckpoint(r));
  ConvertResult result;
  result.source = std::move(out.source_location);
  result.source_format = std::move(out.source_format);
  result.dest = std::move(out.dest_location);
  result.arrays = out.stats.arrays;
  result.arrays_resumed = out.stats.arrays_resumed;
  result.bytes_read = out.stats.bytes_read;
  result.bytes_written = out.stats.bytes_written;
  result.seconds = out.stats.seconds;
  result.verify_seconds = out.stats.verify_seconds;
  result.peak_slab_bytes = out.stats.peak_slab_bytes;
  return result;
}

}  // namespace cairn
