// inspect_common.h.
#include "cairn/api/inspect_common.h"

#include <filesystem>
#include <system_error>

#include "cairn/dtype/dtype.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/kvstore/file/file_url.h"
#include "cairn/layout/axlearn/axlearn_index.h"
#include "cairn/layout/orbax/metadata_files.h"

namespace cairn::api {
namespace {

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// "step_" and 8 digits: an AXLearn step directory's name.
bool IsAxlearnStepName(std::string_view name) {
  if (name.size() != 13 || name.substr(0, 5) != "step_") return false;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

Status CheckExists(const std::string& address) {
  const std::string first = address.substr(0, address.find('|'));
  std::optional<std::string> path = inspect::LocalPathOf(first);
  if (!path || path->empty()) return Status();
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(AbsoluteUserPath(*path), ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    return NotFoundError(*path + ": no such file or directory");
  }
  const bool named_file = address.size() > 12 && (address.ends_with(".safetensors") || address.ends_with(".json"));
  if (st.type() == std::filesystem::file_type::regular && !named_file) {
    return InvalidArgumentError("not a checkpoint: " + *path +
                                " is a file, neither a directory nor a .safetensors file");
  }
  return Status();
}

Status NoCheckpoint(const std::string& address, const Status& orbax_error) {
  if (orbax_error.code() != StatusCode::kNotFound) return orbax_error;
  auto where = engine::OpenUserLocation(address);
  if (!where.ok()) return orbax_error;
  std::string dir = where->prefix;
  if (!dir.empty() && dir.back() != '/') dir += '/';
  auto keys = where->store->List(dir);
  if (!keys.ok()) return orbax_error;
  bool axlearn = false, orbax = false;
  for (const KeyInfo& k : *keys) {
    const std::string_view rest = std::string_view(k.key).substr(dir.size());
    const std::string_view top = rest.substr(0, rest.find('/'));
    if (IsAxlearnStepName(top) || rest.substr(0, 4) == "gda/") axlearn = true;
    if (Contains(rest, orbax::kTreeMetadataFile) || Contains(rest, orbax::kCheckpointMetadataFile) ||
        Contains(rest, orbax::kOcdbtManifestFile) || Contains(rest, ".orbax-checkpoint-tmp")) {
      orbax = true;
    }
  }
  const std::string described = address;
  if (axlearn && !orbax) {
    return InvalidArgumentError(
        "looks like an AXLearn checkpoint but its index is missing: no committed step "
        "(step_XXXXXXXX/" + std::string(axlearn::kIndexFile) + ") at " + described +
        " (AXLearn writes a step's index last: this one was never committed)");
  }
  if (orbax) return orbax_error;
  return NotFoundError("not a checkpoint: no Orbax, AXLearn or safetensors files in " + described);
}

std::optional<Result<layout::OpenedCheckpoint>> OpenOtherFormat(const std::string& address) {
  if (address.find('|') != std::string::npos) return std::nullopt;
  auto where = engine::OpenUserLocation(address);
  if (!where.ok()) return std::nullopt;
  auto format = layout::DetectFormat(*where->store, where->prefix);
  if (!format.ok() || *format == "orbax") return std::nullopt;
  return layout::OpenCheckpoint(where->store, where->prefix, *format);
}

ArrayListing ToListing(const inspect::ArrayEntry& e) {
  return ArrayListing{e.path, std::string(DTypeName(e.dtype)), e.shape, e.chunks, e.bytes};
}

ArrayListing ToListing(const layout::ArrayInfo& a) {
  return ArrayListing{a.path, std::string(DTypeName(a.dtype)), a.shape, a.write_shape, a.stored_bytes};
}

Json RowJson(const ArrayListing& row) {
  return {{"path", row.path}, {"dtype", row.dtype}, {"shape", row.shape}, {"chunks", row.chunks},
          {"bytes", row.bytes}};
}

Json FromJsonLine(const std::string& text) {
  if (text.empty()) return Json();
  // Text this layer dumped: it parses (replaced UTF-8 included).
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace cairn::api
