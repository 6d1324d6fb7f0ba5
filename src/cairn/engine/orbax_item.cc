#include "cairn/engine/orbax_item.h"

#include <unistd.h>

#include "cairn/codec/zarr2_compressor.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/item_writer.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::engine {
namespace {

// A local path made absolute; URLs ("s3://b/x", "memory://x") as they are.
std::string Absolute(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (!p.empty() && p[0] != '/' && p.find("://") == std::string::npos) {
    char buf[4096];
    if (getcwd(buf, sizeof buf) != nullptr) p = std::string(buf) + "/" + p;
  }
  return p;
}

Result<std::vector<orbax::LeafToWrite>> LeavesFor(const SaveRequest& request) {
  std::vector<orbax::LeafToWrite> out;
  for (const SaveLeaf& l : request.leaves) {
    orbax::LeafToWrite& w = out.emplace_back();
    w.path = l.path;
    w.value_type = l.value_type;
    w.dtype = l.dtype;
    w.shape = l.shape;
    w.write_shape = l.write_shape;
    w.random_key_impl = l.random_key_impl;
    if (l.sharding) {
      CAIRN_ASSIGN_OR_RETURN(w.sharding_json,
                             orbax::ShardingJson(*l.sharding, "leaf `" + orbax::ParamName(l.path) + "`"));
    } else {
      w.sharding_json = l.sharding_json;
    }
    w.string_value = l.string_value;
  }
  return out;
}

}  // namespace

int64_t Now() { return orbax::NowNanos(); }

std::string FinalTopOf(const SaveRequest& request) { return Absolute(request.directory); }

Result<ItemPaths> PathsFor(const SaveRequest& request, const std::string& save_id) {
  ItemPaths p;
  p.final_top = FinalTopOf(request);
  p.save_id = save_id;
  if (request.location) {
    p.final_location = *request.location;
  } else {
    CAIRN_ASSIGN_OR_RETURN(p.final_location, orbax::OpenLocation(p.final_top));
  }
  if (request.caller_commits) {
    if (!request.item_name.empty()) {
      return InvalidArgumentError("saving " + p.final_top + ": an item committed by the caller has no item name");
    }
    p.top.final_location = p.final_location;
    p.top.location = p.final_location;
    p.top.save_id = save_id;
    return p;
  }
  p.top = orbax::PendingCommitFor(p.final_location, save_id);
  if (!request.item_name.empty()) {
    p.item = orbax::PendingCommitFor(p.top.location.Child(request.item_name), save_id);
  }
  return p;
}

Status BeginItem(const SaveRequest& request, const ItemPaths& paths) {
  if (request.caller_commits) return Status::OK();  // the caller made (or makes) the directory
  CAIRN_ASSIGN_OR_RETURN(orbax::PendingCommit top, orbax::BeginCommit(paths.final_location, paths.save_id));
  if (top.location.Path() != paths.top.location.Path()) {
    return InternalError("BeginCommit of " + paths.final_top + " chose " + top.location.Path() +
                         ", expected " + paths.top.location.Path());
  }
  // In place, the item lies below the step BeginCommit just found (or made)
  // empty: there is nothing more to check. Elsewhere it lies below the
  // step's new pending directory and gets its own.
  if (paths.item && !top.final_location.commits_in_place) {
    auto item = orbax::BeginCommit(paths.item->final_location, paths.save_id);
    if (!item.ok()) {
      orbax::AbandonCommit(top);
      return item.status();
    }
  }
  // Step 6 of step.h: other steps' temporaries whose owner is gone (best
  // effort: what it cannot remove now, a later sweep removes).
  orbax::RemoveAbandonedTemporaries(paths.final_location.Parent()).IgnoreError();
  return Status::OK();
}

void AbandonItem(const SaveRequest& request, const ItemPaths& paths) {
  if (request.caller_commits) return;
  if (paths.item) orbax::AbandonCommit(*paths.item);  // stops its lease (its files go with the step's)
  orbax::AbandonCommit(paths.top);
}

Result<std::shared_ptr<KvStore>> OpenProcessStore(const SaveRequest& request, const ItemPaths& paths,
                                                  int process_index, int process_count) {
  return orbax::OpenItemWriteStore(paths.item_tmp(), request.options.use_ocdbt, process_index,
                                   process_count, request.local_tier.ocdbt_value_alignment);
}

Result<std::shared_ptr<KvStore>> OpenProcessStore(const SaveRequest& request, const ItemPaths& paths,
                                                  const std::string& process_name) {
  return orbax::OpenItemWriteStore(paths.item_tmp(), request.options.use_ocdbt, process_name,
                                   request.local_tier.ocdbt_value_alignment);
}

Result<ArrayFormat> FormatFor(const SaveLeaf& leaf, const Shape& chunk, const SaveOptions& options,
                              bool compress) {
  const Json md = orbax::OrbaxArrayMetadata(leaf.dtype, leaf.shape, chunk, options.use_zarr3, compress);
  const ZarrFormat format = options.use_zarr3 ? ZarrFormat::kV3 : ZarrFormat::kV2;
  CAIRN_ASSIGN_OR_RETURN(ArrayMetadata m, MetadataFromPartial(format, md));
  ArrayFormat out;
  out.stored_key = MetadataKey(format);
  ArrayMetadata stored = m;
  if (stored.v2_compressor.is_object()) {  // cairn's own members (zarr2_compressor.h)
    stored.v2_compressor.erase("checksum");
    stored.v2_compressor.erase(kZstdStoredMember);
  }
  out.stored_text = stored.ToJsonString();
  out.encode = std::move(m);
  return out;
}

Status WriteArrayMetadatas(const SaveRequest& request, const SavePlan& plan, const ItemPaths& paths,
                           int process_index) {
  return WriteArrayMetadatas(request, plan, paths, std::to_string(process_index));
}

Status WriteArrayMetadatas(const SaveRequest& request, const SavePlan& plan, const ItemPaths& paths,
                           const std::string& process_name) {
  std::vector<orbax::ArrayMetadataRecord> records;
  for (const ArrayPlan& a : plan.arrays) {
    const SaveLeaf& leaf = request.leaves[a.leaf];
    if (leaf.value_type != orbax::kJaxArray) continue;
    records.push_back({a.param, leaf.write_shape.empty() ? leaf.shape : leaf.write_shape, a.chunk_shape,
                       leaf.random_key_impl});
  }
  return orbax::WriteSmallFile(paths.item_tmp().Child(orbax::kArrayMetadatasDir),
                               "process_" + process_name, orbax::EmitArrayMetadatas(records));
}

Status FinalizeAndCommit(const SaveRequest& request, const ItemPaths& paths, int process_count,
                         int64_t init_timestamp_nsecs, const std::vector<std::string>& process_names) {
  orbax::ItemWriteOptions o;
  o.use_ocdbt = request.options.use_ocdbt;
  o.use_zarr3 = request.options.use_zarr3;
  o.process_count = process_count;
  if (request.local_tier.own_process_index >= 0) {
    o.first_process_index = request.local_tier.own_process_index;
    o.process_count = request.local_tier.own_process_index + 1;
  }
  o.process_names = process_names;
  o.custom_metadata = request.options.custom_metadata;
  CAIRN_ASSIGN_OR_RETURN(std::vector<orbax::LeafToWrite> leaves, LeavesFor(request));
  CAIRN_RETURN_IF_ERROR(orbax::FinalizeItem(paths.item_tmp(), leaves, o));
  if (request.caller_commits) return Status::OK();
  orbax::CheckpointMetadata md;
  if (request.item_name.empty()) {
    md.item_handlers = std::string(orbax::kPyTreeHandler);
  } else {
    CAIRN_RETURN_IF_ERROR(orbax::FinishCommit(*paths.item));
    std::map<std::string, std::string> handlers = request.extra_item_handlers;
    handlers[request.item_name] = std::string(orbax::kPyTreeHandler);
    md.item_handlers = std::move(handlers);
  }
  md.init_timestamp_nsecs = init_timestamp_nsecs;
  md.commit_timestamp_nsecs = orbax::NowNanos();
  md.custom_metadata = request.step_custom_metadata.is_null() ? Json::object() : request.step_custom_metadata;
  CAIRN_RETURN_IF_ERROR(orbax::WriteSmallFile(paths.top.location, orbax::kCheckpointMetadataFile,
                                              orbax::EmitCheckpointMetadata(md)));
  for (const auto& [relative, content] : request.extra_files) {
    orbax::Location dir = paths.top.location;
    std::string_view rest = relative;
    for (size_t slash; (slash = rest.find('/')) != std::string_view::npos; rest.remove_prefix(slash + 1)) {
      dir = dir.Child(rest.substr(0, slash));
    }
    CAIRN_RETURN_IF_ERROR(orbax::WriteSmallFile(dir, rest, content));
  }
  return orbax::FinishCommit(paths.top);
}

}  // namespace cairn::engine
