#include "cairn/engine/convert/convert_checkpoint.h"

#include <unistd.h>

#include <cstdlib>

#include "cairn/kvstore/url.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/open_checkpoint.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/layout/safetensors/safetensors_writer.h"

namespace cairn::engine {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char* cwd = getcwd(nullptr, 0);
  std::string out = cwd ? std::string(cwd) + "/" + path : path;
  std::free(cwd);
  return out;
}

Result<bool> Exists(KvStore& store, const std::string& key) {
  auto listed = store.List(key);
  if (!listed.ok()) return listed.status();
  for (const KeyInfo& k : *listed) {
    if (k.key == key) return true;
  }
  return false;
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

}  // namespace

Result<Location> OpenUserLocation(const std::string& path_or_url) {
  if (path_or_url.empty()) return Status(StatusCode::kInvalidArgument, "empty location");
  if (path_or_url.find("://") != std::string::npos) {
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, OpenKvStore(path_or_url));
    return Location{std::move(store), ""};
  }
  std::string path = Absolute(path_or_url);
  std::string file;
  if (EndsWith(path, ".safetensors") || EndsWith(path, ".json")) {
    size_t slash = path.rfind('/');
    file = path.substr(slash + 1);
    path = path.substr(0, slash);
  }
  if (path.empty() || path.back() != '/') path += '/';
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, OpenKvStore("file://" + path));
  return Location{std::move(store), file};
}

Result<ConvertCheckpointResult> ConvertCheckpoint(const ConvertCheckpointRequest& request) {
  if (request.to != "safetensors" && request.to != "axlearn") {
    return Status(StatusCode::kInvalidArgument,
                  "cannot convert to `" + request.to + "` (supported: safetensors, axlearn)");
  }
  CAIRN_ASSIGN_OR_RETURN(Location src, OpenUserLocation(request.source));
  CAIRN_ASSIGN_OR_RETURN(layout::OpenedCheckpoint opened,
                         layout::OpenCheckpoint(src.store, src.prefix, request.from, request.step));
  CAIRN_ASSIGN_OR_RETURN(Location dst, OpenUserLocation(request.dest));
  ConvertCheckpointResult result;
  result.source_format = opened.format;
  result.source_location = opened.location;
  ConvertOptions options = request.options;
  WriterFactory make_writer;
  ReaderFactory open_dest;
  std::string dest_prefix = dst.prefix;
  if (!dest_prefix.empty() && dest_prefix.back() != '/') dest_prefix += '/';
  if (request.to == "safetensors") {
    options.plan.dest_separator = '.';
    CAIRN_RETURN_IF_ERROR(RefuseCommitted(
        *dst.store, {dest_prefix + "model.safetensors", dest_prefix + std::string(safetensors::kIndexFile)},
        request.overwrite));
    safetensors::WriterOptions w;
    w.max_file_bytes = request.max_file_bytes;
    // The factories outlive this block: they capture by value.
    make_writer = [store = dst.store, dest_prefix, w](const std::vector<layout::ArrayInfo>& arrays)
        -> Result<std::unique_ptr<layout::CheckpointWriter>> {
      CAIRN_ASSIGN_OR_RETURN(auto writer, safetensors::CreateWriter(store, dest_prefix, arrays, w));
      return std::unique_ptr<layout::CheckpointWriter>(std::move(writer));
    };
    open_dest = [store = dst.store, dest_prefix] { return safetensors::OpenReader(store, dest_prefix); };
    result.dest_location = dst.store->url() + dest_prefix;
  } else {
    options.plan.dest_separator = '/';
    const int64_t step = request.step ? *request.step : opened.step.value_or(0);
    const std::string step_prefix = dest_prefix + axlearn::StepDirName(step) + "/";
    CAIRN_RETURN_IF_ERROR(RefuseCommitted(*dst.store, {step_prefix + std::string(axlearn::kIndexFile)},
                                          request.overwrite));
    axlearn::WriterOptions w;
    w.step = step;
    if (opened.axlearn_index) {
      for (const axlearn::IndexEntry& e : opened.axlearn_index->entries) {
        if (!e.is_tensor) w.other_entries.push_back(e);
      }
    }
    make_writer = [store = dst.store, step_prefix, w](const std::vector<layout::ArrayInfo>& arrays) {
      return axlearn::CreateWriter(store, step_prefix, arrays, w);
    };
    open_dest = [store = dst.store, step_prefix] { return axlearn::OpenReader(store, step_prefix); };
    result.dest_location = dst.store->url() + step_prefix;
  }
  CAIRN_ASSIGN_OR_RETURN(result.stats, Convert(*opened.reader, make_writer, open_dest, options));
  return result;
}

}  // namespace cairn::engine
