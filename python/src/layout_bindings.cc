// cairn._core Orbax layout functions: opening an item (its tree rebuilt
// from `_METADATA`'s key_metadata, array info, whole-array reads), the
// commit protocol and step listing, for python/cairn/orbax.py, over
// include/cairn/orbax.h. Saving and restoring arrays go through the engine
// (engine_bindings.cc).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
#include "cairn/orbax.h"
#include "status_translation.h"

namespace nb = nanobind;

namespace cairn::python {
namespace {

// Leaf description handed to Python: ("array", param, value_type)
// / ("string", value) / ("none",) / ("unknown", value_type).
nb::object NodeToPython(const ItemTreeNode& node) {
  switch (node.kind) {
    case ItemTreeNode::Kind::kLeaf:
      if (node.leaf_kind == "string") return nb::make_tuple("string", node.string_value);
      if (node.leaf_kind == "none") return nb::make_tuple("none");
      if (node.leaf_kind == "array") return nb::make_tuple("array", node.param, node.value_type);
      return nb::make_tuple("unknown", node.value_type);
    case ItemTreeNode::Kind::kList: {
      nb::list l;
      for (const auto& [name, child] : node.children) l.append(NodeToPython(*child));
      return l;
    }
    case ItemTreeNode::Kind::kDict: {
      nb::dict d;
      for (const auto& [name, child] : node.children) d[nb::str(name.data(), name.size())] = NodeToPython(*child);
      return d;
    }
  }
  return nb::none();
}

// Runs `f` (blocking I/O: reads, fsync, directory scans) with the GIL
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

struct PyOrbaxItem {
  std::shared_ptr<const CheckpointItem> item;

  nb::object Tree() const { return NodeToPython(*ValueOrThrow(item->Tree())); }

  // (dtype name, shape, chunk shape) of every array param.
  nb::dict ArrayInfo(const std::vector<std::string>& params) const {
    std::vector<ItemArrayInfo> info = ValueOrThrow(WithoutGil([&] { return item->ArrayInfo(params); }));
    nb::dict out;
    for (size_t i = 0; i < params.size(); ++i) {
      out[nb::str(params[i].data(), params[i].size())] =
          nb::make_tuple(info[i].dtype, nb::tuple(nb::cast(info[i].shape)), nb::tuple(nb::cast(info[i].chunk_shape)));
    }
    return out;
  }

  // Reads each whole array `params[i]` into `outs[i]` (C-contiguous, the
  // array's shape and item size).
  void ReadArrays(const std::vector<std::string>& params,
                  std::vector<nb::ndarray<nb::device::cpu, nb::c_contig>> outs) const {
    if (params.size() != outs.size()) ThrowStatus(InvalidArgumentError("params and outputs differ in number"));
    std::vector<WholeArrayOut> request;
    for (size_t i = 0; i < params.size(); ++i) {
      WholeArrayOut& o = request.emplace_back();
      o.param = params[i];
      o.data = outs[i].data();
      for (size_t d = 0; d < outs[i].ndim(); ++d) o.shape.push_back(static_cast<int64_t>(outs[i].shape(d)));
      o.item_size = static_cast<int64_t>(outs[i].itemsize());
    }
    ThrowIfError(WithoutGil([&] { return item->ReadArrays(request); }));
  }
};

}  // namespace

std::shared_ptr<const CheckpointItem> OrbaxItemFromPython(nb::handle item) {
  if (item.is_none()) return nullptr;
  return nb::cast<PyOrbaxItem&>(item).item;
}

void RegisterLayout(nb::module_& m) {
  nb::class_<PyOrbaxItem>(m, "_OrbaxItem")
      .def_prop_ro("dir", [](const PyOrbaxItem& i) { return i.item->dir(); })
      .def_prop_ro("use_ocdbt", [](const PyOrbaxItem& i) { return i.item->use_ocdbt(); })
      .def_prop_ro("use_zarr3", [](const PyOrbaxItem& i) { return i.item->use_zarr3(); })
      .def_prop_ro("variant", [](const PyOrbaxItem& i) { return i.item->variant(); })
      .def_prop_ro("shardings", [](const PyOrbaxItem& i) { return StringMap(i.item->shardings()); })
      .def_prop_ro("custom_metadata", [](const PyOrbaxItem& i) { return i.item->custom_metadata_json(); })
      .def_prop_ro("random_key_impls", [](const PyOrbaxItem& i) { return StringMap(i.item->random_key_impls()); })
      .def("tree", &PyOrbaxItem::Tree)
      .def("array_info", &PyOrbaxItem::ArrayInfo)
      .def("read_arrays", &PyOrbaxItem::ReadArrays);

  m.def("_orbax_open_item", [](const std::string& path, const std::string& item_name) {
    auto item = WithoutGil([&] { return OpenCheckpointItem(path, item_name); });
    return PyOrbaxItem{ValueOrThrow(std::move(item))};
  }, nb::arg("path"), nb::arg("item_name") = "");

  // Commit protocol (include/cairn/orbax.h). begin: (pending path, save
  // id); a new save id unless one is given. pending_path / find_pending:
  // for the processes that do not begin the commit.
  m.def("_orbax_begin_commit", [](const std::string& final_path, const std::string& save_id) {
    auto p = ValueOrThrow(WithoutGil([&] { return BeginOrbaxCommit(final_path, save_id); }));
    return std::make_pair(p.path, p.save_id);
  }, nb::arg("final_path"), nb::arg("save_id") = "");
  m.def("_orbax_pending_path", [](const std::string& final_path, const std::string& save_id) {
    return ValueOrThrow(OrbaxPendingPath(final_path, save_id));
  });
  m.def("_orbax_find_pending", [](const std::string& final_path) {
    auto p = ValueOrThrow(WithoutGil([&] { return FindOrbaxPendingCommit(final_path); }));
    return std::make_pair(p.path, p.save_id);
  });
  m.def("_orbax_finish_commit", [](const std::string& final_path, const std::string& save_id) {
    ThrowIfError(WithoutGil([&] { return FinishOrbaxCommit(final_path, save_id); }));
  });
  // Step 5: a caller that began a commit and cannot finish it stops the
  // save's lease and removes its temporary directory (best effort).
  m.def("_orbax_abandon_commit", [](const std::string& final_path, const std::string& save_id) {
    WithoutGil([&] { AbandonOrbaxCommit(final_path, save_id); });
  });
  m.def("_orbax_write_checkpoint_metadata",
        [](const std::string& dir, const std::string& handler, const std::vector<std::string>& items,
           int64_t init_ns, const std::string& custom) {
          ThrowIfError(
              WithoutGil([&] { return WriteOrbaxCheckpointMetadata(dir, handler, items, init_ns, custom); }));
        });
  m.def("_orbax_list_steps", [](const std::string& root) {
    auto steps = ValueOrThrow(WithoutGil([&] { return ListOrbaxSteps(root); }));
    nb::list out;
    for (const auto& s : steps) out.append(nb::make_tuple(s.step, s.path));
    return out;
  });
  m.def("_orbax_step_name", [](int64_t step, const std::string& prefix, std::optional<int> width) {
    return OrbaxStepName(step, prefix, width);
  });
  m.def("_now_nanos", &OrbaxNowNanos);
}

}  // namespace cairn::python
