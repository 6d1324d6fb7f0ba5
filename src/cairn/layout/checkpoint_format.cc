#include "cairn/layout/checkpoint_format.h"

#include <algorithm>

namespace cairn::layout {

const ArrayInfo* FindArray(const std::vector<ArrayInfo>& arrays, std::string_view path) {
  auto it = std::lower_bound(arrays.begin(), arrays.end(), path,
                             [](const ArrayInfo& a, std::string_view p) { return a.path < p; });
  return it != arrays.end() && it->path == path ? &*it : nullptr;
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
