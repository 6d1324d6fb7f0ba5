// include/cairn/inspect.h, `diff`: two checkpoints or arrays of any formats,
// compared by the layout's differ (layout/inspect/diff.h).
#include <cmath>
#include <string>

#include "cairn/api/inspect_common.h"
#include "cairn/inspect.h"
#include "cairn/layout/inspect/diff.h"
#include "cairn/zarr/array_url.h"

namespace cairn {

Result<DiffReport> Diff(const std::string& a, const std::string& b, const DiffOptions& options) {
  inspect::DiffOptions o;
  o.atol = options.atol;
  o.rtol = options.rtol;
  if (options.progress) o.progress = options.progress;
  o.include = options.include;
  for (const auto& [from, to] : options.renames) o.renames.push_back({from, to});
  CAIRN_RETURN_IF_ERROR(api::CheckExists(a).Annotate("diff: A"));
  CAIRN_RETURN_IF_ERROR(api::CheckExists(b).Annotate("diff: B"));
  // Local paths become file:// URLs: array URLs need a scheme (as in
  // TensorStore), and checkpoint directories are found from either form.
  CAIRN_ASSIGN_OR_RETURN(inspect::DiffReport r, inspect::Diff(NormalizeUrl(a), NormalizeUrl(b), o));
  DiffReport report;
  // Before the paths are moved out: identical() reads them (moved first,
  // arrays only in A or B counted as identical).
  // inspect's identical() takes the tolerance; exact also means the same
  // dtypes and no difference at all (two NaNs are equal: max_abs stays 0).
  report.equal_within_tolerance = r.identical();
  report.identical = report.equal_within_tolerance;
  report.a = std::move(r.a);
  report.b = std::move(r.b);
  report.format_a = std::move(r.format_a);
  report.format_b = std::move(r.format_b);
  report.only_in_a = std::move(r.only_in_a);
  report.only_in_b = std::move(r.only_in_b);
  report.strings_differ = std::move(r.strings_differ);
  for (const inspect::ArrayDiff& d : r.arrays) {
    report.arrays.push_back({d.path, d.dtype_a, d.dtype_b, d.shape_a, d.shape_b, d.values_compared,
                             d.num_different, d.nan_mismatches, d.max_abs, d.max_rel, d.same()});
    if (d.dtype_a != d.dtype_b || d.max_abs != 0) report.identical = false;
  }
  return report;
}

std::string ToJson(const DiffReport& r) {
  Json arrays = Json::array();
  for (const ArrayDifference& d : r.arrays) {
    Json j = {{"path", d.path}, {"same", d.same}, {"dtype_a", d.dtype_a},
              {"dtype_b", d.dtype_b}, {"shape_a", d.shape_a}, {"shape_b", d.shape_b},
              {"values_compared", d.values_compared}, {"num_different", d.num_different},
              {"nan_mismatches", d.nan_mismatches}};
    // JSON has no infinity: an infinite difference is written as null.
    j["max_abs"] = std::isinf(d.max_abs) ? Json(nullptr) : Json(d.max_abs);
    j["max_rel"] = d.max_rel;
    arrays.push_back(std::move(j));
  }
  return api::JsonLine({{"a", r.a}, {"b", r.b}, {"format_a", r.format_a}, {"format_b", r.format_b},
                        {"identical", r.identical},
                        {"equal_within_tolerance", r.equal_within_tolerance}, {"only_in_a", r.only_in_a},
                        {"only_in_b", r.only_in_b}, {"strings_differ", r.strings_differ},
                        {"arrays", arrays}});
}

}  // namespace cairn
