// cairn._core._convert: the one call behind `cairn.convert(...)`, the same
// engine::ConvertCheckpoint that `cairn convert` makes. Python only passes
// the options through.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {

void RegisterConvert(nb::module_& m) {
  m.def(
      "_convert",
      [](const std::string& source, const std::string& dest, const std::string& to,
         const std::string& from, std::optional<int64_t> step, std::vector<std::string> include,
         std::vector<std::string> exclude,
         std::vector<std::pair<std::string, std::string>> renames,
         std::vector<std::pair<std::string, std::string>> casts, uint64_t memory_budget,
         int threads, bool verify, bool overwrite, uint64_t max_file_bytes, nb::object progress, bool resume) {
        engine::ConvertCheckpointRequest r;
        r.source = source;
        r.dest = dest;
        r.to = to;
        r.from = from;
        r.step = step;
        r.overwrite = overwrite;
        r.max_file_bytes = max_file_bytes;
        r.options.plan.include = std::move(include);
        r.options.plan.exclude = std::move(exclude);
        for (auto& [from_prefix, to_prefix] : renames) {
          r.options.plan.renames.push_back({from_prefix, to_prefix});
        }
        for (auto& [glob, dtype] : casts) {
          r.options.plan.casts.push_back({glob, ValueOrThrow(ParseDTypeName(dtype))});
        }
        r.options.memory_budget = memory_budget;
        r.options.threads = threads;
        r.options.verify = verify;
        r.options.resume = resume;
        if (!progress.is_none()) {
          r.options.progress = [progress](const engine::ConvertProgress& p) {
            nb::gil_scoped_acquire gil;
            try {
              progress(p.bytes_done, p.bytes_total, p.arrays_done, p.arrays_total);
            } catch (nb::python_error& e) {
              e.discard_as_unraisable("cairn.convert progress callback");
            }
          };
        }
        Result<engine::ConvertCheckpointResult> result = [&] {
          nb::gil_scoped_release release;
          return engine::ConvertCheckpoint(r);
        }();
        const engine::ConvertCheckpointResult& out = ValueOrThrow(std::move(result));
        nb::dict d;
        d["source"] = out.source_location;
        d["source_format"] = out.source_format;
        d["dest"] = out.dest_location;
        d["arrays"] = out.stats.arrays;
        d["arrays_resumed"] = out.stats.arrays_resumed;
        d["bytes_read"] = out.stats.bytes_read;
        d["bytes_written"] = out.stats.bytes_written;
        d["seconds"] = out.stats.seconds;
        d["verify_seconds"] = out.stats.verify_seconds;
        d["peak_slab_bytes"] = out.stats.peak_slab_bytes;
        return d;
      },
      nb::arg("source"), nb::arg("dest"), nb::arg("to"), nb::arg("from_format"), nb::arg("step"),
      nb::arg("include"), nb::arg("exclude"), nb::arg("renames"), nb::arg("casts"),
      nb::arg("memory_budget"), nb::arg("threads"), nb::arg("verify"), nb::arg("overwrite"),
      nb::arg("max_file_bytes"), nb::arg("progress").none(), nb::arg("resume") = true);
}

}  // namespace cairn::python
