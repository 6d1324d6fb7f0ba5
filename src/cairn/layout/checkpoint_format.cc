#include "cairn/layout/checkpoint_format.h"

#include <algorithm>

namespace cairn::layout {

const ArrayInfo* FindArray(const std::vector<ArrayInfo>& arrays, std::string_view path) {
  auto it = std::lower_bound(arrays.begin(), arrays.end(), path,
                             [](const ArrayInfo& a, std::string_view p) { return a.path < p; });
  return it != arrays.end() && it->path == path ? &*it : nullptr;
}

std::vector<std::string> SplitTreePath(std::string_view path, char separator) {
  std::vector<std::string> keys;
  size_t start = 0;
  for (;;) {
    size_t end = path.find(separator, start);
    keys.emplace_back(path.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return keys;
    start = end + 1;
  }
}

std::string JoinTreePath(const std::vector<std::string>& keys, char separator) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += separator;
    out += keys[i];
  }
  return out;
}

Status CheckBoxInArray(const Box& box, const Shape& shape, std::string_view what) {
  bool ok = box.rank() == shape.size() && box.origin.size() == shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = box.origin[d] >= 0 && box.shape[d] >= 0 && box.origin[d] <= shape[d] &&
         box.shape[d] <= shape[d] - box.origin[d];
  }
  if (ok) return Status::OK();
  return Status(StatusCode::kInvalidArgument,
                std::string(what) + ": box " + box.ToString() + " is outside the array's shape " +
                    Box::FromShape(shape).ToString());
}

}  // namespace cairn::layout
