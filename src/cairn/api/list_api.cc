// include/cairn/inspect.h, `ls`: what an address holds. Checked in order:
//   1. an Orbax checkpoint (item with `_METADATA`, step, root);
//   2. an AXLearn or safetensors checkpoint;
//   3. a zarr array (the URL names one, or its metadata is at the root);
//   4. else the kvstore's keys.
#include <optional>
#include <string>
#include <vector>

#include "cairn/api/inspect_common.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/inspect.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/zarr/array_url.h"

namespace cairn {
namespace {

// Sets *context (when asked for) and returns `status`.
Status Failed(std::string* context, std::string what, Status status) {
  if (context != nullptr) *context = std::move(what);
  return status;
}

uint64_t TotalBytes(const std::vector<KeyInfo>& keys) {
  uint64_t total = 0;
  for (const KeyInfo& k : keys) total += k.size;
  return total;
}

// The Orbax checkpoint `address` names, when it names one.
std::optional<orbax::Location> CheckpointLocation(const std::string& address) {
  std::optional<std::string> where = inspect::CheckpointPathOf(address);
  if (!where) return std::nullopt;
  auto loc = orbax::OpenLocation(*where);
  if (!loc.ok()) return std::nullopt;
  auto kind = inspect::ClassifyCheckpoint(*loc);
  if (!kind.ok()) return std::nullopt;
  // A bare OCDBT database (manifest.ocdbt, no _METADATA) lists as a kvstore.
  if (*kind == inspect::CheckpointKind::kItem && !orbax::HasKey(*loc, orbax::kTreeMetadataFile)) {
    return std::nullopt;
  }
  return *loc;
}

Result<Listing> ListOrbax(const orbax::Location& loc, std::string* context) {
  const std::string path = loc.Path();
  auto info = inspect::DescribeCheckpoint(loc);
  if (!info.ok()) return Failed(context, "`" + path + "`", info.status());
  size_t pytree_items = 0;
  for (const inspect::ItemInfo& item : info->items) pytree_items += item.is_pytree ? 1 : 0;
  if (pytree_items == 0) {
    return Failed(context, "`" + path + "`",
                  NotFoundError("no PyTree item with arrays in " +
                                (info->step_dir.empty() ? path : info->step_dir)));
  }
  Listing listing;
  listing.kind = ListingKind::kCheckpoint;
  listing.format = "orbax";
  if (info->kind == inspect::CheckpointKind::kRoot) {
    const std::string listed = info->step_dir.substr(info->step_dir.find_last_of('/') + 1);
    for (const inspect::StepEntry& s : info->steps) {
      if (!s.finalized) continue;
      ++listing.committed_steps;
      if (s.name == listed) listing.root_step = s.step;
    }
  }
  for (const inspect::ItemInfo& item : info->items) {
    if (!item.is_pytree) continue;
    if (!item.error.empty()) {
      listing.unreadable_item = item.dir;
      listing.unreadable_item_error = item.error;
      break;
    }
    const std::string prefix = pytree_items > 1 ? item.name + "/" : "";
    for (const inspect::ArrayEntry& a : item.arrays) {
      listing.arrays.push_back(api::ToListing(a));
      listing.arrays.back().path = prefix + a.path;
    }
  }
  return listing;
}

// An AXLearn or safetensors checkpoint; nullopt when there is none.
std::optional<Result<Listing>> ListOtherFormat(const std::string& address, std::string* context) {
  auto other = api::OpenOtherFormat(address);
  if (!other) return std::nullopt;
  if (!other->ok()) return Result<Listing>(Failed(context, "`" + address + "`", other->status()));
  Listing listing;
  listing.kind = ListingKind::kCheckpoint;
  listing.format = (*other)->format;
  if (listing.format == "axlearn") {
    // A root when it holds committed steps (a step holds none).
    if (auto where = engine::OpenUserLocation(address); where.ok()) {
      std::string dir = where->prefix;
      if (!dir.empty() && dir.back() != '/') dir += '/';
      auto steps = layout::ListAxlearnSteps(*where->store, dir);
      if (steps.ok() && !steps->empty()) {
        listing.committed_steps = steps->size();
        listing.root_step = (*other)->step;
      }
    }
  }
  for (const layout::ArrayInfo& a : (*other)->reader->arrays()) listing.arrays.push_back(api::ToListing(a));
  return Result<Listing>(std::move(listing));
}

}  // namespace

Result<Listing> ListAddress(const std::string& address, std::string* context) {
  if (Status exists = api::CheckExists(address); !exists.ok()) return Failed(context, "", exists);
  if (std::optional<orbax::Location> ckpt = CheckpointLocation(address)) return ListOrbax(*ckpt, context);
  if (auto listed = ListOtherFormat(address, context)) return std::move(*listed);
  // A local path becomes a file:// URL (array URLs need a scheme).
  auto parsed = ParseArrayUrl(NormalizeUrl(address));
  if (!parsed.ok()) return Failed(context, "`" + address + "`", parsed.status());
  auto store = OpenKvStore(parsed->kvstore_url);
  if (!store.ok()) return Failed(context, "opening `" + parsed->kvstore_url + "`", store.status());
  std::optional<ZarrFormat> format = parsed->format;
  if (!format) {
    // An array when its metadata is at the root: zarr.json first, as
    // TensorStore's format detection does.
    for (ZarrFormat f : {ZarrFormat::kV3, ZarrFormat::kV2}) {
      auto meta = (*store)->Get(MetadataKey(f), ByteRange::Range(0, 0));
      if (!meta.ok()) return Failed(context, "reading " + (*store)->Describe(MetadataKey(f)), meta.status());
      if (meta->has_value()) {
        format = f;
        break;
      }
    }
  }
  auto keys = (*store)->List("");
  if (!keys.ok()) return Failed(context, "listing `" + (*store)->url() + "`", keys.status());
  Listing listing;
  if (format) {
    auto array = ZarrArray::Open(*store, "", format);
    if (!array.ok()) return Failed(context, "opening array `" + address + "`", array.status());
    std::string path = NormalizeUrl(address);
    if (!parsed->format) {
      // Printed as a directory, the way the zarr drivers read it
      // ("file:///a" names the array in /a/, as "file:///a/|zarr3:" does).
      std::string base = parsed->kvstore_url;
      if (base.back() != '/' && base.back() != ':') base += '/';
      path = base + (*format == ZarrFormat::kV3 ? "|zarr3:" : "|zarr2:");
    }
    const ArrayMetadata& md = (*array)->metadata();
    listing.kind = ListingKind::kArray;
    listing.arrays.push_back(
        ArrayListing{path, std::string(DTypeName(md.dtype)), md.shape, md.chunk_shape, TotalBytes(*keys)});
    return listing;
  }
  listing.kind = ListingKind::kKeys;
  for (const KeyInfo& k : *keys) listing.keys.push_back(KeyListing{k.key, k.size});
  return listing;
}

std::string ToJson(const Listing& listing) {
  Json rows = Json::array();
  if (listing.kind == ListingKind::kKeys) {
    for (const KeyListing& k : listing.keys) rows.push_back({{"key", k.key}, {"bytes", k.bytes}});
    return api::JsonLine(rows);
  }
  const bool other_format = listing.kind == ListingKind::kCheckpoint && listing.format != "orbax";
  for (const ArrayListing& a : listing.arrays) {
    Json row = api::RowJson(a);
    if (other_format) row["format"] = listing.format;
    rows.push_back(std::move(row));
  }
  return api::JsonLine(rows);
}

}  // namespace cairn
