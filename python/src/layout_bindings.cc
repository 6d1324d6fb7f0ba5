// cairn._core Orbax layout functions: opening an item (its tree rebuilt
// from `_METADATA`'s key_metadata, array info, whole-array reads), the
// commit protocol and step listing, for python/cairn/orbax.py. Saving and
// restoring arrays go through the engine (engine_bindings.cc).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cairn/dtype/dtype.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

using orbax::KeyType;
// Leaf description handed to Python: ("array", param, value_type, dtype, shape)
// / ("string", value) / ("none",) / ("unknown", value_type).
nb::object LeafToPython(const orbax::OrbaxItem& item, const orbax::TreeEntry& e) {
  const std::string& vt = e.value.value_type;
  std::string param = orbax::ParamName(e.path);
  if (vt == orbax::kString) {
    auto it = item.strings.find(param);
    if (it == item.strings.end()) {
      ThrowStatus(NotFoundError("string `" + param + "` missing from _strings.json of " + item.dir));
    }
    return nb::make_tuple("string", it->second);
  }
  if (vt == orbax::kNone) return nb::make_tuple("none");
  if (orbax::IsArrayValueType(vt)) return nb::make_tuple("array", param, vt);
  return nb::make_tuple("unknown", vt);
}

nb::object NodeToPython(const orbax::OrbaxItem& item, const orbax::TreeNode& node) {
  switch (node.kind) {
    case orbax::TreeNode::Kind::kLeaf:
      return LeafToPython(item, *node.leaf);
    case orbax::TreeNode::Kind::kList: {
      nb::list l;
      for (const auto& [name, child] : node.children) l.append(NodeToPython(item, *child));
      return l;
    }
    case orbax::TreeNode::Kind::kDict: {
      nb::dict d;
      for (const auto& [name, child] : node.children) d[nb::str(name.data(), name.size())] = NodeToPython(item, *child);
      return d;
    }
  }
  return nb::none();
}

struct PyOrbaxItem {
  std::shared_ptr<orbax::OrbaxItem> item;

  nb::object Tree() const {
    auto tree = ValueOrThrow(orbax::BuildTree(item->metadata));
    return NodeToPython(*item, *tree);
  }

  // (dtype name, shape, chunk shape) of every array param.
  nb::dict ArrayInfo(const std::vector<std::string>& params) const {
    std::vector<std::shared_ptr<ZarrArray>> arrays(params.size());
    Status status;
    {
      nb::gil_scoped_release release;
      for (size_t i = 0; i < params.size() && status.ok(); ++i) {
        auto a = orbax::OpenItemArray(*item, params[i]);
        if (!a.ok()) status = a.status();
        else arrays[i] = *a;
      }
    }
    ThrowIfError(status);
    nb::dict out;
    for (size_t i = 0; i < params.size(); ++i) {
      const ArrayMetadata& md = arrays[i]->metadata();
      out[nb::str(params[i].data(), params[i].size())] = nb::make_tuple(
          std::string(DTypeName(md.dtype)), nb::tuple(nb::cast(md.shape)), nb::tuple(nb::cast(md.chunk_shape)));
    }
    return out;
  }

  // Reads each whole array `params[i]` into `outs[i]` (C-contiguous, the
  // array's shape and item size).
  void ReadArrays(const std::vector<std::string>& params,
                  std::vector<nb::ndarray<nb::device::cpu, nb::c_contig>> outs) const {
    if (params.size() != outs.size()) ThrowStatus(InvalidArgumentError("params and outputs differ in number"));
    Status status;
    {
      nb::gil_scoped_release release;
      for (size_t i = 0; i < params.size() && status.ok(); ++i) {
        auto a = orbax::OpenItemArray(*item, params[i]);
        if (!a.ok()) { status = a.status(); break; }
        const Shape& shape = (*a)->shape();
        bool ok = outs[i].ndim() == shape.size() && outs[i].itemsize() == DTypeSize((*a)->dtype());
        for (size_t d = 0; ok && d < shape.size(); ++d) ok = static_cast<Index>(outs[i].shape(d)) == shape[d];
        if (!ok) {
          status = InvalidArgumentError("output buffer for `" + params[i] + "` does not match the stored array");
          break;
        }
        status = (*a)->Read(Box(Shape(shape.size(), 0), shape), outs[i].data())
                     .Annotate("reading `" + params[i] + "` of " + item->dir);
      }
    }
    ThrowIfError(status);
  }
};

// Runs `f` (blocking file I/O: fsync, directory scans) with the GIL
// released, so other Python threads run meanwhile.
template <typename F>
auto WithoutGil(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

nb::dict StringMap(const std::map<std::string, std::string>& m) {
  nb::dict d;
  for (const auto& [k, v] : m) d[nb::str(k.data(), k.size())] = nb::str(v.data(), v.size());
  return d;
}

}  // namespace

std::shared_ptr<const orbax::OrbaxItem> OrbaxItemFromPython(nb::handle item) {
  if (item.is_none()) return nullptr;
  return nb::cast<PyOrbaxItem&>(item).item;
}

void RegisterLayout(nb::module_& m) {
  nb::class_<PyOrbaxItem>(m, "_OrbaxItem")
      .def_prop_ro("dir", [](const PyOrbaxItem& i) { return i.item->dir; })
      .def_prop_ro("use_ocdbt", [](const PyOrbaxItem& i) { return i.item->use_ocdbt; })
      .def_prop_ro("use_zarr3", [](const PyOrbaxItem& i) { return i.item->use_zarr3; })
      .def_prop_ro("variant", [](const PyOrbaxItem& i) { return std::string(orbax::StorageVariantName(i.item->variant())); })
      .def_prop_ro("shardings", [](const PyOrbaxItem& i) { return StringMap(i.item->shardings); })
      .def_prop_ro("custom_metadata", [](const PyOrbaxItem& i) { return DumpJson(i.item->metadata.custom_metadata); })
      .def_prop_ro("random_key_impls", [](const PyOrbaxItem& i) {
        std::map<std::string, std::string> m;
        for (const auto& [k, r] : i.item->array_metadatas) if (r.random_key_impl) m[k] = *r.random_key_impl;
        return StringMap(m);
      })
      .def("tree", &PyOrbaxItem::Tree)
      .def("array_info", &PyOrbaxItem::ArrayInfo)
      .def("read_arrays", &PyOrbaxItem::ReadArrays);

  m.def("_orbax_open_item", [](const std::string& path, const std::string& item_name) {
    Result<orbax::OrbaxItem> item = InternalError("not opened");
    {
      nb::gil_scoped_release release;
      auto loc = orbax::OpenLocation(path);
      auto dir = loc.ok() ? orbax::ResolveItemLocation(*loc, item_name) : Result<orbax::Location>(loc.status());
      item = dir.ok() ? orbax::OpenItem(*dir) : Result<orbax::OrbaxItem>(dir.status());
    }
    return PyOrbaxItem{std::make_shared<orbax::OrbaxItem>(ValueOrThrow(std::move(item)))};
  }, nb::arg("path"), nb::arg("item_name") = "");

  // Commit protocol (step.h). begin: (pending path, save id); a new save id
  // unless one is given. pending_path / find_pending: for the processes that
  // do not begin the commit.
  m.def("_orbax_begin_commit", [](const std::string& final_path, const std::string& save_id) {
    Result<orbax::PendingCommit> pending = InternalError("not begun");
    {
      nb::gil_scoped_release release;
      auto loc = orbax::OpenLocation(final_path);
      pending = loc.ok() ? orbax::BeginCommit(*loc, save_id.empty() ? orbax::NewSaveId() : save_id)
                         : Result<orbax::PendingCommit>(loc.status());
    }
    auto p = ValueOrThrow(std::move(pending));
    return std::make_pair(p.location.Path(), p.save_id);
  }, nb::arg("final_path"), nb::arg("save_id") = "");
  m.def("_orbax_pending_path", [](const std::string& final_path, const std::string& save_id) {
    auto loc = ValueOrThrow(orbax::OpenLocation(final_path));
    return orbax::PendingCommitFor(loc, save_id).location.Path();
  });
  m.def("_orbax_find_pending", [](const std::string& final_path) {
    Result<orbax::PendingCommit> pending = InternalError("not found");
    {
      nb::gil_scoped_release release;
      auto loc = orbax::OpenLocation(final_path);
      pending = loc.ok() ? orbax::FindPendingCommit(*loc) : Result<orbax::PendingCommit>(loc.status());
    }
    auto p = ValueOrThrow(std::move(pending));
    return std::make_pair(p.location.Path(), p.save_id);
  });
  m.def("_orbax_finish_commit", [](const std::string& final_path, const std::string& save_id) {
    Status s;
    {
      nb::gil_scoped_release release;
      auto loc = orbax::OpenLocation(final_path);
      s = loc.ok() ? orbax::FinishCommit(orbax::PendingCommitFor(*loc, save_id)) : loc.status();
    }
    ThrowIfError(s);
  });
  // Step 5: a caller that began a commit and cannot finish it stops the
  // save's lease and removes its temporary directory (best effort).
  m.def("_orbax_abandon_commit", [](const std::string& final_path, const std::string& save_id) {
    nb::gil_scoped_release release;
    auto loc = orbax::OpenLocation(final_path);
    if (loc.ok()) orbax::AbandonCommit(orbax::PendingCommitFor(*loc, save_id));
  });
  m.def("_orbax_write_checkpoint_metadata",
        [](const std::string& dir, const std::string& handler, const std::vector<std::string>& items,
           int64_t init_ns, const std::string& custom) {
          orbax::CheckpointMetadata md;
          if (items.empty()) {
            md.item_handlers = handler;
          } else {
            std::map<std::string, std::string> m;
            for (const std::string& i : items) m[i] = handler;
            md.item_handlers = std::move(m);
          }
          md.init_timestamp_nsecs = init_ns;
          md.commit_timestamp_nsecs = orbax::NowNanos();
          md.custom_metadata = ValueOrThrow(ParseJson(custom, "custom_metadata"));
          auto loc = ValueOrThrow(orbax::OpenLocation(dir));
          const std::string text = orbax::EmitCheckpointMetadata(md);
          ThrowIfError(WithoutGil(
              [&] { return orbax::WriteSmallFile(loc, orbax::kCheckpointMetadataFile, text); }));
        });
  m.def("_orbax_list_steps", [](const std::string& root) {
    Result<std::vector<orbax::StepInfo>> found = InternalError("not listed");
    {
      nb::gil_scoped_release release;
      auto loc = orbax::OpenLocation(root);
      found = loc.ok() ? orbax::DiscoverSteps(*loc) : Result<std::vector<orbax::StepInfo>>(loc.status());
    }
    auto steps = ValueOrThrow(std::move(found));
    nb::list out;
    for (const auto& s : steps) out.append(nb::make_tuple(s.step, s.path()));
    return out;
  });
  m.def("_orbax_step_name", [](int64_t step, const std::string& prefix, std::optional<int> width) {
    return orbax::StepName(step, {prefix, width});
  });
  m.def("_now_nanos", &orbax::NowNanos);
}

}  // namespace cairn::python
