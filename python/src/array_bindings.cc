// cairn._core.Array: a zarr v2/v3 array opened or created from a URL.
//
// Element buffers cross the boundary as raw bytes: the Python layer
// (python/cairn/array.py) views its numpy arrays as unsigned integers of the
// element size (so bfloat16, float8 and int4 arrays pass too), converts
// non-native byte order first, and gives them the array's numpy dtype back.
// Reads fill a buffer Python allocated; writes take any strides (negative or
// zero too) straight from the caller's array. No copies here; the GIL is
// released around the I/O.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cairn/dtype/dtype.h"
#include "cairn/zarr/array.h"
#include "cairn/zarr/array_url.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

nb::tuple ToTuple(const std::vector<Index>& v) {
  nb::list l;
  for (Index x : v) l.append(x);
  return nb::tuple(l);
}

struct PyArray {
  std::shared_ptr<ZarrArray> array;
  std::string url;

  static PyArray Open(const std::string& url) {
    Result<std::shared_ptr<ZarrArray>> a = InternalError("not opened");
    {
      nb::gil_scoped_release release;
      a = OpenZarrArray(url);
    }
    return PyArray{ValueOrThrow(std::move(a)), url};
  }

  static PyArray Create(const std::string& url, const std::string& metadata_json,
                        bool overwrite) {
    CreateOptions options;
    options.overwrite = overwrite;
    Result<std::shared_ptr<ZarrArray>> a = InternalError("not created");
    {
      nb::gil_scoped_release release;
      a = CreateZarrArrayFromJson(url, metadata_json, options);
    }
    return PyArray{ValueOrThrow(std::move(a)), url};
  }

  size_t itemsize() const { return DTypeSize(array->dtype()); }

  std::string Where() const { return "array " + url; }

  Box CheckedBox(const std::vector<Index>& origin, const std::vector<Index>& shape) const {
    size_t rank = array->shape().size();
    if (origin.size() != rank || shape.size() != rank) {
      ThrowStatus(InvalidArgumentError(Where() + ": origin and shape need " +
                                       std::to_string(rank) + " entries, got " +
                                       std::to_string(origin.size()) + " and " +
                                       std::to_string(shape.size())));
    }
    return Box(origin, shape);
  }

  // Fills `out` (C-contiguous bytes of `shape` elements) with the box at
  // `origin`.
  void ReadInto(const std::vector<Index>& origin, const std::vector<Index>& shape,
                nb::ndarray<nb::device::cpu, nb::c_contig> out) const {
    Box box = CheckedBox(origin, shape);
    auto n = CheckedNumElements(shape);
    size_t needed = 0;
    if (!n || *n < 0 ||
        __builtin_mul_overflow(static_cast<uint64_t>(*n), uint64_t{itemsize()}, &needed)) {
      ThrowStatus(InvalidArgumentError(Where() + ": read shape " + box.ToString() +
                                       " has more bytes than fit in memory"));
    }
    if (out.nbytes() != needed) {
      ThrowStatus(InvalidArgumentError(Where() + ": output buffer has " +
                                       std::to_string(out.nbytes()) + " bytes, the box " +
                                       box.ToString() + " needs " + std::to_string(needed)));
    }
    void* dst = out.data();
    Status st;
    {
      nb::gil_scoped_release release;
      st = array->Read(box, dst);
    }
    ThrowIfError(st);
  }

  // Writes `src` (any strides; elements of the array's size) at `origin`.
  void Write(const std::vector<Index>& origin, nb::ndarray<nb::ro, nb::device::cpu> src) const {
    size_t elem = (src.dtype().bits + 7) / 8;
    if (elem != itemsize()) {
      ThrowStatus(InvalidArgumentError(Where() + ": values have " + std::to_string(elem) +
                                       "-byte elements, the array's dtype " +
                                       std::string(DTypeName(array->dtype())) + " has " +
                                       std::to_string(itemsize())));
    }
    std::vector<Index> shape(src.ndim());
    StridedLayout layout;
    layout.byte_strides.resize(src.ndim());
    for (size_t i = 0; i < src.ndim(); ++i) {
      shape[i] = static_cast<Index>(src.shape(i));
      layout.byte_strides[i] = static_cast<Index>(src.stride(i)) * static_cast<Index>(elem);
    }
    Box box = CheckedBox(origin, shape);
    const void* data = src.data();
    Status st;
    {
      nb::gil_scoped_release release;
      st = array->Write(box, data, layout);
    }
    ThrowIfError(st);
  }
};

}  // namespace

void BindArray(nb::module_& m) {
  nb::class_<PyArray>(m, "Array", "A zarr v2 or v3 array.")
      .def_static("open", &PyArray::Open, nb::arg("url"),
                  "Opens the array a URL names (`...|zarr3:`, `...|zarr2:`, or a kvstore URL "
                  "or path whose format is detected).")
      .def_static("create", &PyArray::Create, nb::arg("url"), nb::arg("metadata_json"),
                  nb::arg("overwrite") = false,
                  "Creates an array from full or partial metadata JSON (the format's own "
                  "fields); missing fields take TensorStore's defaults.")
      .def_prop_ro("url", [](const PyArray& a) { return a.url; })
      .def_prop_ro("shape", [](const PyArray& a) { return ToTuple(a.array->shape()); })
      .def_prop_ro("chunks",
                   [](const PyArray& a) { return ToTuple(a.array->metadata().chunk_shape); })
      .def_prop_ro("dtype_name",
                   [](const PyArray& a) { return std::string(DTypeName(a.array->dtype())); })
      .def_prop_ro("itemsize", &PyArray::itemsize)
      .def_prop_ro("zarr_format",
                   [](const PyArray& a) {
                     return a.array->metadata().format == ZarrFormat::kV3 ? 3 : 2;
                   })
      .def_prop_ro("metadata_json",
                   [](const PyArray& a) { return a.array->metadata().ToJsonString(); })
      .def("read_into", &PyArray::ReadInto, nb::arg("origin"), nb::arg("shape"), nb::arg("out"))
      .def("write", &PyArray::Write, nb::arg("origin"), nb::arg("values"));
}

}  // namespace cairn::python
