// inspect_common.h.
#include "cairn/api/inspect_common.h"

#include "cairn/dtype/dtype.h"
#include "cairn/engine/convert/convert_checkpoint.h"

namespace cairn::api {

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
