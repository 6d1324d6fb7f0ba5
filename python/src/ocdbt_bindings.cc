// OCDBT in cairn._core: opening a database from a TensorStore-style spec
// dict, reading older generations, batched reads, and merging per-process
// databases. Registered by RegisterOcdbt(m) from module.cc.
//
// Python surface (all GIL-free while the store works):
//   cairn.kvstore.open({"driver": "ocdbt", "base": "file:///x/",
//                       "config": {...}, "version": g, ...})
//       (python/cairn/kvstore.py) calls cairn._core.open_ocdbt(spec): a
//       store with the methods of every cairn kvstore, plus get_many(keys),
//       latest_generation, config.
//   cairn.kvstore.merge_ocdbt(root, children=None, config=None): writes the
//       root database in `root` (a base URL such as "file:///ckpt/7/state/",
//       optionally ending in "|ocdbt:") referring into the child databases
//       (default: every `ocdbt.process_<id>/` found there).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cairn/kvstore/ocdbt/io/merge.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_spec.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/url.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

Json SpecFromPython(nb::handle spec) {
  std::string text;
  if (nb::isinstance<nb::str>(spec)) {
    text = nb::cast<std::string>(spec);
  } else {
    text = nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(spec));
  }
  return ValueOrThrow(ParseJson(text, "OCDBT spec"));
}

nb::object JsonToPython(const Json& j) {
  return nb::module_::import_("json").attr("loads")(DumpJson(j));
}

template <typename F>
auto Unlocked(F&& f) {
  decltype(f()) result = InternalError("not run");
  {
    nb::gil_scoped_release release;
    result = f();
  }
  return result;
}

struct PyOcdbtStore {
  std::shared_ptr<ocdbt::OcdbtKvStore> db;
  std::shared_ptr<KvStore> view;  // db, or db under the spec's path
  std::string prefix;

  static PyOcdbtStore Open(nb::handle spec_obj) {
    Json spec = SpecFromPython(spec_obj);
    Result<ocdbt::OcdbtSpec> parsed = InternalError("not parsed");
    Result<std::shared_ptr<ocdbt::OcdbtKvStore>> db = InternalError("not opened");
    {
      nb::gil_scoped_release release;
      parsed = ocdbt::ParseOcdbtSpec(spec);
      if (parsed.ok()) db = ocdbt::OpenOcdbtSpec(*parsed);
    }
    ocdbt::OcdbtSpec s = ValueOrThrow(std::move(parsed));
    PyOcdbtStore out{ValueOrThrow(std::move(db)), nullptr, s.path};
    out.view = MakePrefixKvStore(out.db, s.path, out.db->url() + s.path);
    return out;
  }

  nb::list List(nb::handle prefix) const {
    std::string p = prefix.is_none() ? std::string() : KeyFromPython(prefix);
    auto infos = ValueOrThrow(Unlocked([&] { return view->List(p); }));
    nb::list out;
    for (const KeyInfo& i : infos) out.append(nb::make_tuple(KeyToPython(i.key), i.size));
    return out;
  }
  nb::list Keys(nb::handle prefix) const {
    std::string p = prefix.is_none() ? std::string() : KeyFromPython(prefix);
    auto infos = ValueOrThrow(Unlocked([&] { return view->List(p); }));
    nb::list out;
    for (const KeyInfo& i : infos) out.append(KeyToPython(i.key));
    return out;
  }
  nb::object Get(nb::handle key, std::optional<int64_t> start, std::optional<int64_t> stop) const {
    std::string k = KeyFromPython(key);
    ByteRange range;
    if (start || stop) {
      int64_t a = start.value_or(0);
      if (!stop) {
        range = a < 0 ? ByteRange::Suffix(static_cast<uint64_t>(-a))
                      : ByteRange::From(static_cast<uint64_t>(a));
      } else if (a < 0 || *stop < a) {
        ThrowStatus(InvalidArgumentError("byte range [" + std::to_string(a) + ", " +
                                         std::to_string(*stop) + ") is not valid"));
      } else {
        range = ByteRange::Range(static_cast<uint64_t>(a), static_cast<uint64_t>(*stop - a));
      }
    }
    auto v = ValueOrThrow(Unlocked([&] { return view->Get(k, range); }));
    if (!v) return nb::none();
    return nb::bytes(reinterpret_cast<const char*>(v->data()), v->size());
  }
  nb::list GetMany(nb::iterable keys) const {
    std::vector<std::string> ks;
    for (nb::handle k : keys) ks.push_back(prefix + KeyFromPython(k));
    auto values = ValueOrThrow(Unlocked([&] { return db->GetMany(ks); }));
    nb::list out;
    for (auto& v : values) {
      if (v) {
        out.append(nb::bytes(reinterpret_cast<const char*>(v->data), v->size));
      } else {
        out.append(nb::none());
      }
    }
    return out;
  }
  void Put(nb::handle key, nb::bytes value) const {
    std::string k = KeyFromPython(key);
    ByteView bytes(reinterpret_cast<const uint8_t*>(value.c_str()), value.size());
    ThrowIfError(Unlocked([&] { return view->Put(k, bytes); }));
  }
  // Values go from the Python bytes objects (kept referenced, immutable)
  // straight into the data files: no intermediate copy.
  void PutMany(nb::iterable items) const {
    std::vector<ocdbt::KvMutationView> mutations;
    std::vector<nb::object> keep_alive;
    for (nb::handle item : items) {
      nb::tuple pair = nb::cast<nb::tuple>(item);
      if (pair.size() != 2) ThrowStatus(InvalidArgumentError("put_many takes (key, value) pairs"));
      ocdbt::KvMutationView m;
      m.key = prefix + KeyFromPython(pair[0]);
      if (!pair[1].is_none()) {
        nb::bytes value = nb::cast<nb::bytes>(pair[1]);
        m.value = ByteView(reinterpret_cast<const uint8_t*>(value.c_str()), value.size());
        keep_alive.push_back(std::move(value));
      }
      mutations.push_back(std::move(m));
    }
    ThrowIfError(Unlocked([&] { return db->ApplyBatchViews(std::move(mutations)); }));
  }
  void Delete(nb::handle key) const {
    std::string k = KeyFromPython(key);
    ThrowIfError(Unlocked([&] { return view->Delete(k); }));
  }
  void DeletePrefix(nb::handle p) const {
    std::string k = p.is_none() ? std::string() : KeyFromPython(p);
    ThrowIfError(Unlocked([&] { return view->DeletePrefix(k); }));
  }
  std::optional<uint64_t> LatestGeneration() const {
    auto m = ValueOrThrow(Unlocked([&] { return db->ReadManifest(); }));
    if (!m || m->versions.empty()) return std::nullopt;
    return m->latest_generation();
  }
  nb::object ConfigDict() const {
    auto m = ValueOrThrow(Unlocked([&] { return db->ReadManifest(); }));
    if (!m) return nb::none();
    return JsonToPython(ocdbt::OcdbtConfigToJson(m->config));
  }
};

void MergeOcdbt(nb::handle root_obj, std::optional<std::vector<std::string>> children,
                nb::handle config) {
  std::string root = nb::cast<std::string>(nb::module_::import_("cairn._core")
                                               .attr("normalize_url")(root_obj));
  constexpr std::string_view kSuffix = "|ocdbt:";
  if (root.size() > kSuffix.size() && root.ends_with(kSuffix)) {
    root.resize(root.size() - kSuffix.size());
  }
  ocdbt::OcdbtOptions options;
  if (!config.is_none()) {
    ThrowIfError(ocdbt::ParseOcdbtConfig(SpecFromPython(config), &options.config));
  }
  ThrowIfError(Unlocked([&]() -> Status {
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> base, OpenKvStore(root));
    std::vector<std::string> dirs;
    if (children) {
      dirs = *children;
    } else {
      CAIRN_ASSIGN_OR_RETURN(dirs, ocdbt::FindProcessDatabases(*base));
      if (dirs.empty()) {
        return NotFoundError("no ocdbt.process_<id>/ databases under " + base->url());
      }
    }
    return ocdbt::MergeOcdbtDatabases(base, dirs, options);
  }));
}

}  // namespace

void RegisterOcdbt(nb::module_& m) {
  nb::class_<PyOcdbtStore>(m, "OcdbtKvStore",
                           "An OCDBT database opened from a TensorStore-style spec.")
      .def_prop_ro("url", [](const PyOcdbtStore& s) { return s.view->url(); })
      .def("list", &PyOcdbtStore::List, nb::arg("prefix") = nb::none())
      .def("keys", &PyOcdbtStore::Keys, nb::arg("prefix") = nb::none())
      .def("get", &PyOcdbtStore::Get, nb::arg("key"), nb::arg("start") = nb::none(),
           nb::arg("stop") = nb::none())
      .def("get_many", &PyOcdbtStore::GetMany, nb::arg("keys"),
           "Values of many keys (None when absent) from one manifest read, each node once.")
      .def("put", &PyOcdbtStore::Put, nb::arg("key"), nb::arg("value"))
      .def("put_many", &PyOcdbtStore::PutMany, nb::arg("items"))
      .def("delete", &PyOcdbtStore::Delete, nb::arg("key"))
      .def("delete_prefix", &PyOcdbtStore::DeletePrefix, nb::arg("prefix"))
      .def_prop_ro("latest_generation", &PyOcdbtStore::LatestGeneration)
      .def_prop_ro("config", &PyOcdbtStore::ConfigDict);
  m.def("open_ocdbt", &PyOcdbtStore::Open, nb::arg("spec"),
        "Opens an OCDBT database from a TensorStore-style spec (dict or JSON text).");
  m.def("merge_ocdbt", &MergeOcdbt, nb::arg("root"), nb::arg("children") = nb::none(),
        nb::arg("config") = nb::none(),
        "Writes the root OCDBT database in `root` referring into the per-process child "
        "databases (default: every ocdbt.process_<id>/ there), copying no value bytes.");
}

}  // namespace cairn::python
