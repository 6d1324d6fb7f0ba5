// The one table of conversion destinations (destinations.h) and the
// helpers they share.
#include "cairn/engine/convert/destinations.h"

#include "cairn/engine/convert/orbax_destination.h"

namespace cairn::engine {
namespace {

const std::vector<DestinationFormat> kDestinations = {
    {"orbax", [](DestinationContext& c) { return PrepareOrbaxDestination(c, /*use_zarr3=*/true); },
     /*resumes=*/true},
    {"orbax-zarr2", [](DestinationContext& c) { return PrepareOrbaxDestination(c, /*use_zarr3=*/false); },
     /*resumes=*/true},
    {"axlearn", &PrepareAxlearnDestination, /*resumes=*/true},
    {"safetensors", &PrepareSafetensorsDestination, /*resumes=*/false},
};

Result<bool> Exists(KvStore& store, const std::string& key) {
  auto listed = store.List(key);
  if (!listed.ok()) return listed.status();
  for (const KeyInfo& k : *listed) {
    if (k.key == key) return true;
  }
  return false;
}

}  // namespace

std::string DestinationContext::DirPrefix() const {
  std::string prefix = dest.prefix;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  return prefix;
}

Status RefuseCommitted(KvStore& store, const std::vector<std::string>& markers, bool overwrite) {
  for (const std::string& key : markers) {
    CAIRN_ASSIGN_OR_RETURN(bool exists, Exists(store, key));
    if (!exists) continue;
    if (!overwrite) {
      return Status(StatusCode::kAlreadyExists,
                    store.Describe(key) +
                        " exists: the destination holds a committed checkpoint (use overwrite)");
    }
    // The marker goes first, so that the old checkpoint stops looking valid
    // before any of its files is replaced.
    CAIRN_RETURN_IF_ERROR(store.Delete(key));
  }
  return Status::OK();
}

// Names a conversion (its source, destination and planned arrays) with 16
// hex digits: a re-run of the same conversion finds what it left.
std::string ConversionId(const std::string& what, const std::vector<layout::ArrayInfo>& arrays) {
  std::string text = what;
  for (const layout::ArrayInfo& a : arrays) {
    text += "|" + a.path + ":" + std::string(DTypeName(a.dtype)) +
            Box::FromShape(a.shape).ToString() + Box::FromShape(a.write_shape).ToString();
  }
  return DeterministicSaveId(text);
}

// Copies each {source key, relative path} to `dest_prefix` + path.
Status CopyIteratorFiles(KvStore& source, const std::vector<std::pair<std::string, std::string>>& files,
                         KvStore& dest, const std::string& dest_prefix) {
  for (const auto& [key, relative] : files) {
    auto value = source.Get(key);
    if (!value.ok()) return value.status().Annotate("reading " + source.Describe(key));
    if (!*value) return Status(StatusCode::kNotFound, source.Describe(key) + " vanished");
    const std::string to = dest_prefix + relative;
    CAIRN_RETURN_IF_ERROR(dest.Put(to, ByteView((*value)->data(), (*value)->size()))
                              .Annotate("writing " + dest.Describe(to)));
  }
  return Status::OK();
}

const std::vector<DestinationFormat>& DestinationFormats() { return kDestinations; }

std::vector<std::string> DestinationFormatNames() {
  std::vector<std::string> out;
  for (const DestinationFormat& f : kDestinations) out.emplace_back(f.name);
  return out;
}

Result<const DestinationFormat*> FindDestinationFormat(std::string_view name) {
  std::string supported;
  for (const DestinationFormat& f : kDestinations) {
    if (f.name == name) return &f;
    supported += (supported.empty() ? "" : ", ") + std::string(f.name);
  }
  return Status(StatusCode::kInvalidArgument,
                "cannot convert to `" + std::string(name) + "` (supported: " + supported + ")");
}

}  // namespace cairn::engine
