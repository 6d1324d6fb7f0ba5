// The Status -> Python exception table.
//
//   InvalidArgument     ValueError
//   NotFound            FileNotFoundError
//   AlreadyExists       FileExistsError
//   FailedPrecondition  RuntimeError
//   ResourceExhausted   OSError             (out of space, over a memory budget:
//                                            storage-side exhaustion, not the
//                                            Python heap, so not MemoryError)
//   Unavailable         OSError
//   DataLoss            cairn.CorruptDataError (a subclass of OSError: corrupt
//                                            stored bytes are an I/O failure,
//                                            and `except OSError` catches it)
//   Unimplemented       NotImplementedError
//   Internal            RuntimeError
//
// An error that came from a system call (Status::error_number() != 0, as
// ErrnoError makes them) is raised as Python raises that errno:
// OSError(errno, message), which Python turns into PermissionError (EACCES,
// EPERM), FileNotFoundError (ENOENT), FileExistsError (EEXIST),
// IsADirectoryError (EISDIR), NotADirectoryError (ENOTDIR), ... with
// `errno` set; EINVAL stays ValueError and corrupt data CorruptDataError.
//
// The exception's message is the status message, which says what failed and
// where (key and URL).
#include "status_translation.h"

#include <cerrno>
#include <string>

namespace nb = nanobind;

namespace cairn::python {
namespace {

PyObject* corrupt_data_error = nullptr;

PyObject* ExceptionFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return PyExc_ValueError;
    case StatusCode::kNotFound: return PyExc_FileNotFoundError;
    case StatusCode::kAlreadyExists: return PyExc_FileExistsError;
    case StatusCode::kFailedPrecondition: return PyExc_RuntimeError;
    case StatusCode::kResourceExhausted: return PyExc_OSError;
    case StatusCode::kUnavailable: return PyExc_OSError;
    case StatusCode::kDataLoss: return corrupt_data_error;
    case StatusCode::kUnimplemented: return PyExc_NotImplementedError;
    case StatusCode::kInternal: return PyExc_RuntimeError;
    case StatusCode::kCancelled: return PyExc_KeyboardInterrupt;
    case StatusCode::kOk: break;
  }
  return PyExc_RuntimeError;
}

}  // namespace

void RegisterExceptions(nb::module_& m) {
  corrupt_data_error = PyErr_NewExceptionWithDoc(
      "cairn.CorruptDataError",
      "Stored bytes are corrupt or truncated (a checksum mismatch, a chunk shorter than its "
      "codecs require, an index pointing past the end of a shard). Subclass of OSError.",
      PyExc_OSError, nullptr);
  if (corrupt_data_error == nullptr) throw nb::python_error();
  m.attr("CorruptDataError") = nb::handle(corrupt_data_error);
}

void ThrowStatus(const Status& status) {
  // The whole message, by its length (a NUL inside does not cut it), and
  // any byte that is not UTF-8 as a backslash escape.
  const std::string_view message = status.message();
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "backslashreplace");
  if (text == nullptr) throw nb::python_error();
  const int err = status.error_number();
  if (err != 0 && err != EINVAL && status.code() != StatusCode::kDataLoss) {
    // OSError(errno, text) is an instance of the subclass Python picks for
    // errno, with e.errno and e.strerror set.
    PyObject* args = Py_BuildValue("(iO)", err, text);
    Py_DECREF(text);
    if (args == nullptr) throw nb::python_error();
    PyObject* exc = PyObject_Call(PyExc_OSError, args, nullptr);
    Py_DECREF(args);
    if (exc == nullptr) throw nb::python_error();
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
    Py_DECREF(exc);
    throw nb::python_error();
  }
  PyErr_SetObject(ExceptionFor(status.code()), text);
  Py_DECREF(text);
  throw nb::python_error();
}

}  // namespace cairn::python
