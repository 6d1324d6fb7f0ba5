// cairn._core.KvStore: a KvStore opened from a URL. The GIL is released
// around every call into the store.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/url.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {

std::string KeyFromPython(nb::handle key) {
  if (!PyUnicode_Check(key.ptr())) {
    PyErr_Format(PyExc_TypeError, "a key must be str, not %s", Py_TYPE(key.ptr())->tp_name);
    throw nb::python_error();
  }
  PyObject* encoded = PyUnicode_AsEncodedString(key.ptr(), "utf-8", "surrogateescape");
  if (encoded == nullptr) throw nb::python_error();
  nb::bytes b = nb::steal<nb::bytes>(encoded);
  return std::string(b.c_str(), b.size());
}

nb::str KeyToPython(std::string_view key) {
  PyObject* s = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()),
                                     "surrogateescape");
  if (s == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(s);
}

namespace {

// Python's slice-like (start, stop) as a ByteRange: (None, None) all,
// (a, None) from a, (-n, None) the last n bytes, (a, b) bytes [a, b).
ByteRange ToByteRange(std::optional<int64_t> start, std::optional<int64_t> stop) {
  int64_t a = start.value_or(0);
  if (!stop) {
    if (a < 0) return ByteRange::Suffix(static_cast<uint64_t>(-a));
    return ByteRange::From(static_cast<uint64_t>(a));
  }
  if (a < 0 || *stop < a) {
    ThrowStatus(InvalidArgumentError("byte range [" + std::to_string(a) + ", " +
                                     std::to_string(*stop) +
                                     ") is not a range of non-negative offsets"));
  }
  return ByteRange::Range(static_cast<uint64_t>(a), static_cast<uint64_t>(*stop - a));
}

struct PyKvStore {
  std::shared_ptr<KvStore> store;

  static PyKvStore Open(const std::string& url) {
    Result<std::shared_ptr<KvStore>> store = InternalError("not opened");
    {
      nb::gil_scoped_release release;
      store = OpenKvStore(url);
    }
    return PyKvStore{ValueOrThrow(std::move(store))};
  }

  std::vector<KeyInfo> ListInfos(nb::handle prefix) const {
    std::string p = KeyOrEmpty(prefix);
    Result<std::vector<KeyInfo>> infos = InternalError("not listed");
    {
      nb::gil_scoped_release release;
      infos = store->List(p);
    }
    return ValueOrThrow(std::move(infos));
  }

  nb::list List(nb::handle prefix) const {
    nb::list out;
    for (const KeyInfo& info : ListInfos(prefix)) {
      out.append(nb::make_tuple(KeyToPython(info.key), info.size));
    }
    return out;
  }

  nb::list Keys(nb::handle prefix) const {
    nb::list out;
    for (const KeyInfo& info : ListInfos(prefix)) out.append(KeyToPython(info.key));
    return out;
  }

  nb::object Get(nb::handle key, std::optional<int64_t> start, std::optional<int64_t> stop) const {
    std::string k = KeyFromPython(key);
    ByteRange range = ToByteRange(start, stop);
    Result<std::optional<Buffer>> value = InternalError("not read");
    {
      nb::gil_scoped_release release;
      value = store->Get(k, range);
    }
    std::optional<Buffer> v = ValueOrThrow(std::move(value));
    if (!v) return nb::none();
    return nb::bytes(reinterpret_cast<const char*>(v->data()), v->size());
  }

  void Put(nb::handle key, nb::bytes value) const {
    std::string k = KeyFromPython(key);
    ByteView bytes(reinterpret_cast<const uint8_t*>(value.c_str()), value.size());
    Status st;
    {
      nb::gil_scoped_release release;
      st = store->Put(k, bytes);
    }
    ThrowIfError(st);
  }

  // `items`: a sequence of (key, bytes or None); None deletes the key.
  void PutMany(nb::iterable items) const {
    std::vector<KvMutation> mutations;
    for (nb::handle item : items) {
      nb::tuple pair = nb::cast<nb::tuple>(item);
      if (pair.size() != 2) {
        ThrowStatus(InvalidArgumentError("put_many takes (key, value) pairs"));
      }
      KvMutation m;
      m.key = KeyFromPython(pair[0]);
      if (!pair[1].is_none()) {
        nb::bytes value = nb::cast<nb::bytes>(pair[1]);
        m.value = Buffer::CopyOf(std::string_view(value.c_str(), value.size()));
      }
      mutations.push_back(std::move(m));
    }
    Status st;
    {
      nb::gil_scoped_release release;
      st = store->ApplyBatch(std::move(mutations));
    }
    ThrowIfError(st);
  }

  void Delete(nb::handle key) const {
    std::string k = KeyFromPython(key);
    Status st;
    {
      nb::gil_scoped_release release;
      st = store->Delete(k);
    }
    ThrowIfError(st);
  }

  void DeletePrefix(nb::handle prefix) const {
    std::string p = KeyOrEmpty(prefix);
    Status st;
    {
      nb::gil_scoped_release release;
      st = store->DeletePrefix(p);
    }
    ThrowIfError(st);
  }

  static std::string KeyOrEmpty(nb::handle prefix) {
    return prefix.is_none() ? std::string() : KeyFromPython(prefix);
  }
};

}  // namespace

void BindKvStore(nb::module_& m) {
  nb::class_<PyKvStore>(m, "KvStore", "A key-value store opened from a URL.")
      .def_static("open", &PyKvStore::Open, nb::arg("url"),
                  "Opens the store a kvstore URL names (file://, memory://, |ocdbt: ...).")
      .def_prop_ro("url", [](const PyKvStore& s) { return s.store->url(); })
      .def("list", &PyKvStore::List, nb::arg("prefix") = nb::none(),
           "[(key, size)] of the keys starting with prefix, sorted bytewise.")
      .def("keys", &PyKvStore::Keys, nb::arg("prefix") = nb::none(),
           "The keys starting with prefix, sorted bytewise.")
      .def("get", &PyKvStore::Get, nb::arg("key"), nb::arg("start") = nb::none(),
           nb::arg("stop") = nb::none(),
           "The value (or the byte range [start, stop); a negative start alone means the last "
           "-start bytes) as bytes, or None when the key is missing.")
      .def("put", &PyKvStore::Put, nb::arg("key"), nb::arg("value"))
      .def("put_many", &PyKvStore::PutMany, nb::arg("items"),
           "Applies (key, bytes-or-None) pairs as one batch (one commit where the driver "
           "supports it); None deletes.")
      .def("delete", &PyKvStore::Delete, nb::arg("key"))
      .def("delete_prefix", &PyKvStore::DeletePrefix, nb::arg("prefix"));
}

}  // namespace cairn::python
