// cairn._core._convert: the one call behind `cairn.convert(...)`, the same
// cairn::Convert (include/cairn/convert.h) that `cairn convert` makes.
// Python only passes the options through.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "interruptible.h"
#include "cairn/convert.h"
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
         int threads, bool verify, bool overwrite, uint64_t max_file_bytes, nb::object progress, bool resume, bool params_only,
         const std::string& rename_preset) {
        ConvertRequest r;
        r.source = source;
        r.dest = dest;
        r.to = to;
        r.from = from;
        r.step = step;
        r.overwrite = overwrite;
        r.max_file_bytes = max_file_bytes;
        r.include = std::move(include);
        r.exclude = std::move(exclude);
        r.renames = std::move(renames);
        r.casts = std::move(casts);
        r.memory_budget = memory_budget;
        r.threads = threads;
        r.verify = verify;
        r.resume = resume;
        r.params_only = params_only;
        r.rename_preset = rename_preset;
        ThrowIfError(ValidateConvertRequest(r));
        if (!progress.is_none()) {
          // Held as the other observers are (bindings.h): the copies of the
          // std::function on the workers' threads never touch the object's
          // reference count without the GIL.
          r.progress = [held = HoldCallable(std::move(progress))](const ConvertProgress& p) {
            CallObserver(held, "cairn.convert progress callback", p.bytes_done, p.bytes_total,
                         p.arrays_done, p.arrays_total);
          };
        }
        Result<ConvertResult> result = RunInterruptibly([&](const Interrupt* interrupt) {
          r.interrupt = interrupt;
          return Convert(r);
        });
        const ConvertResult& out = ValueOrThrow(std::move(result));
        nb::dict d;
        d["source"] = out.source;
        d["source_format"] = out.source_format;
        d["dest"] = out.dest;
        d["arrays"] = out.arrays;
        d["arrays_resumed"] = out.arrays_resumed;
        d["bytes_read"] = out.bytes_read;
        d["bytes_written"] = out.bytes_written;
        d["seconds"] = out.seconds;
        d["verify_seconds"] = out.verify_seconds;
        d["peak_slab_bytes"] = out.peak_slab_bytes;
        return d;
      },
      nb::arg("source"), nb::arg("dest"), nb::arg("to"), nb::arg("from_format"), nb::arg("step"),
      nb::arg("include"), nb::arg("exclude"), nb::arg("renames"), nb::arg("casts"),
      nb::arg("memory_budget"), nb::arg("threads"), nb::arg("verify"), nb::arg("overwrite"),
      nb::arg("max_file_bytes"), nb::arg("progress").none(), nb::arg("resume") = true,
      nb::arg("params_only") = false, nb::arg("rename_preset") = "");
  m.def("_convert_rename_presets", [] { return ConvertRenamePresets(); },
        "The rename presets cairn.convert(rename_preset=...) accepts: [(name, description)].");
}

}  // namespace cairn::python
