#include "cairn/api/options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "cairn/options.h"
#include "cairn/util/json.h"

namespace cairn {
namespace api {

Result<engine::Compression> ParseCompression(std::string_view name) {
  if (name == "default" || name == "zstd") return engine::Compression::kOrbaxDefault;
  if (name == "none") return engine::Compression::kNone;
  if (name == "auto") return engine::Compression::kAuto;
  return InvalidArgumentError("compression `" + std::string(name) +
                              "` is not one of default, zstd, none, auto");
}

Result<engine::SaveOptions> EngineSaveOptions(const SaveCheckpointOptions& options) {
  engine::SaveOptions o;
  o.use_ocdbt = options.use_ocdbt;
  o.use_zarr3 = options.use_zarr3;
  o.replica_parallel = options.replica_parallel;
  CAIRN_ASSIGN_OR_RETURN(o.compression, ParseCompression(options.compression));
  o.memory_budget_bytes = options.memory_budget_bytes;
  o.target_data_file_size = options.target_data_file_size;
  o.chunk_byte_size = options.chunk_byte_size;
  o.timeout = options.timeout;
  o.progress = options.progress;
  o.interrupt = options.interrupt;
  CAIRN_ASSIGN_OR_RETURN(o.custom_metadata, ParseJson(options.custom_metadata_json, "custom_metadata"));
  return o;
}

}  // namespace api

Result<uint64_t> ParseByteSize(std::string_view text) {
  const std::string quoted = "`" + std::string(text) + "`";
  double value = 0;
  const char* begin = text.data();
  if (!text.empty() && text[0] == '+') ++begin;  // as std::stod took it
  const char* end = text.data() + text.size();
  auto [used, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || !std::isfinite(value)) {
    return InvalidArgumentError(quoted + " is not a size like 512MiB");
  }
  std::string unit(used, end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else return InvalidArgumentError("unknown size unit in " + quoted + " (B, KiB, MiB, GiB, KB, MB, GB)");
  if (value < 0) return InvalidArgumentError("negative size " + quoted);
  const double bytes = value * scale;
  if (bytes >= 18446744073709551616.0) return InvalidArgumentError("size " + quoted + " is too large");
  return static_cast<uint64_t>(bytes);
}

}  // namespace cairn
