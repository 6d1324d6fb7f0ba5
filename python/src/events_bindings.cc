// cairn._core._set_event_sink: the library's events (include/cairn/events.h)
// go to a Python callable, `sink(levelno, message)` with the logging level
// number (INFO 20, WARNING 30); python/cairn/_events.py passes them on to
// logging.getLogger("cairn"). Called from whichever thread reached the event:
// the GIL is taken for the call; an exception the sink raises is reported as
// unraisable and the library goes on. Also the progress callbacks of
// cairn.save and cairn.restore (ProgressObserver).
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include <nanobind/nanobind.h>

#include "bindings.h"
#include "cairn/events.h"

namespace nb = nanobind;

namespace cairn::python {

std::function<void(uint64_t, uint64_t)> ProgressObserver(nb::object f, const char* what) {
  if (f.is_none()) return {};
  return [held = HoldCallable(std::move(f)), what](uint64_t done, uint64_t total) {
    CallObserver(held, what, done, total);
  };
}

void RegisterEvents(nb::module_& m) {
  m.def(
      "_set_event_sink",
      [](nb::object sink) {
        if (sink.is_none()) {
          SetEventSink({});
          return;
        }
        SetEventSink([held = HoldCallable(std::move(sink))](EventLevel level, std::string_view message) {
          if (!nb::is_alive()) return;
          nb::gil_scoped_acquire gil;
          PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                                "backslashreplace");
          if (text == nullptr) {
            PyErr_Clear();
            return;
          }
          try {
            (*held)(level == EventLevel::kWarning ? 30 : 20, nb::steal<nb::str>(text));
          } catch (nb::python_error& e) {
            e.discard_as_unraisable("cairn event sink");
          }
        });
      },
      nb::arg("sink").none(),
      "Sends the library's events to sink(levelno, message); None drops them.");
}

}  // namespace cairn::python
