// include/cairn/convert.h: the public conversion request, turned into the
// engine's (engine/convert/convert_checkpoint.h) in one place.
#include "cairn/convert.h"

#include "cairn/dtype/dtype.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/engine/convert/destinations.h"
#include "cairn/engine/convert/rename_presets.h"

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
  r.options.plan.params_only = request.params_only;
  if (!request.rename_preset.empty()) {
    CAIRN_ASSIGN_OR_RETURN(const engine::RenamePreset* preset,
                           engine::FindRenamePreset(request.rename_preset));
    r.options.plan.preset = preset->rules;
    r.options.plan.preset_adjust = preset->adjust;
  }
  for (const auto& [from_prefix, to_prefix] : request.renames) {
    r.options.plan.renames.push_back({from_prefix, to_prefix});
  }
  for (const auto& [glob, dtype_name] : request.casts) {
    CAIRN_ASSIGN_OR_RETURN(DType dtype, ParseUserDTypeName(dtype_name));
    r.options.plan.casts.push_back({glob, dtype});
  }
  r.options.warning = request.warning;
  if (request.progress) {
    r.options.progress = [progress = request.progress](const engine::ConvertProgress& p) {
      progress(ConvertProgress{p.bytes_done, p.bytes_total, p.arrays_done, p.arrays_total});
    };
  }
  return r;
}

}  // namespace

std::vector<std::string> ConvertDestinationFormats() { return engine::DestinationFormatNames(); }

std::vector<std::pair<std::string, std::string>> ConvertRenamePresets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const engine::RenamePreset& p : engine::RenamePresets()) {
    out.emplace_back(std::string(p.name), std::string(p.description));
  }
  return out;
}

Status ValidateConvertRequest(const ConvertRequest& request) {
  if (!request.rename_preset.empty()) {
    CAIRN_RETURN_IF_ERROR(engine::FindRenamePreset(request.rename_preset).status());
  }
  for (const auto& cast : request.casts) {
    CAIRN_RETURN_IF_ERROR(ParseUserDTypeName(cast.second).status());
  }
  return Status::OK();
}

Result<ConvertResult> Convert(const ConvertRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(engine::ConvertCheckpointRequest r, EngineRequest(request));
  Result<engine::ConvertCheckpointResult> converted = engine::ConvertCheckpoint(r);
  if (!converted.ok() && converted.status().code() == StatusCode::kAlreadyExists) {
    // The one wording of the re-run refusal, with the caller's spelling.
    return Status(StatusCode::kAlreadyExists, std::string(converted.status().message()) + " (pass " +
                                                  request.overwrite_option + " to replace it)");
  }
  CAIRN_RETURN_IF_ERROR(converted.status());
  engine::ConvertCheckpointResult& out = *converted;
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
