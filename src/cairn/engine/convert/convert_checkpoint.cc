#include "cairn/engine/convert/convert_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "cairn/engine/convert/orbax_destination.h"
#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/open_checkpoint.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"
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

// Orbax destinations (orbax_destination.h). DST is the checkpoint root:
// the step goes to `DST/<step>/default/` as CheckpointManager lays it out;
// a source with an AXLearn index goes to AXLearn's Orbax step instead,
// `DST/step_XXXXXXXX/{state/, index/index, tfds/, python/}`.
Status PrepareOrbaxDestination(const ConvertCheckpointRequest& request,
                               std::shared_ptr<KvStore> source_store,
                               const layout::OpenedCheckpoint& opened, const Location& dst,
                               bool primary, ConvertOptions& options, WriterFactory& make_writer,
                               WriterFactory& attach_writer, ReaderFactory& open_dest,
                               ConvertCheckpointResult& result) {
  options.plan.dest_separator = '.';
  const std::string url = dst.store->url();
  if (url.find('|') != std::string::npos) {
    return Status(StatusCode::kUnimplemented,
                  "Orbax destinations are plain stores (a directory or a " + KvStoreDriverUrlForms() +
                      " URL), not the pipeline " + url);
  }
  std::string dest_prefix = dst.prefix;
  if (!dest_prefix.empty() && dest_prefix.back() != '/') dest_prefix += '/';
  const int64_t step = request.step ? *request.step : opened.step.value_or(0);
  const bool axlearn_layout = opened.axlearn_index.has_value();
  const std::string step_name = axlearn_layout ? axlearn::StepDirName(step) : std::to_string(step);
  const std::string step_prefix = dest_prefix + step_name + "/";
  // A local path for file stores, else the store's URL (orbax::OpenLocation
  // takes both).
  std::string root = FileUrlPath(url).value_or(url) + dest_prefix;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  OrbaxDestinationOptions o;
  o.directory = root + "/" + step_name;
  o.item_name = axlearn_layout ? "state" : "default";
  o.use_zarr3 = request.to == "orbax";
  // Stores that cannot rename write the step in place, where no save id
  // tells one conversion's leftovers from another's: never resumed there
  // (BeginCommit removes an unfinished step instead).
  const bool in_place = dst.store->Capabilities().commits_in_place;
  o.resume = request.options.resume && !in_place;
  o.flush_bytes = std::min<uint64_t>(o.flush_bytes, request.options.memory_budget);
  if (request.coordinator != nullptr) {
    o.process_index = request.coordinator->process_index();
    o.process_count = request.coordinator->process_count();
  }
  if (primary) {
    auto listed = dst.store->List(step_prefix);
    if (!listed.ok()) return listed.status().Annotate("listing " + dst.store->Describe(step_prefix));
    const bool committed = std::any_of(listed->begin(), listed->end(), [&](const KeyInfo& k) {
      return k.key == step_prefix + std::string(orbax::kCommitSuccessFile);
    });
    if (!listed->empty() && (committed || !in_place)) {
      if (!request.overwrite) {
        return Status(StatusCode::kAlreadyExists,
                      o.directory + " exists: the destination holds a committed checkpoint (use overwrite)");
      }
      CAIRN_RETURN_IF_ERROR(dst.store->DeletePrefix(step_prefix));
    }
  }
  // Iterator state and AXLearn's index go where AXLearn's Orbax steps keep
  // them; the commit (a rename of the whole step) publishes them too.
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& [key, relative] : opened.iterator_files) {
    files.emplace_back(key, (relative.rfind("tf_", 0) == 0 ? "tfds/" : "python/") + relative);
  }
  std::optional<axlearn::StepIndex> index = opened.axlearn_index;
  o.before_commit = [source_store, files, index, step](const orbax::Location& step_tmp) -> Status {
    CAIRN_RETURN_IF_ERROR(CopyIteratorFiles(*source_store, files, *step_tmp.store, step_tmp.prefix));
    if (!index) return Status::OK();
    axlearn::StepIndex out = *index;
    out.step = step;
    return step_tmp.store->Put(step_tmp.Key("index/index"), AsBytes(axlearn::FormatIndex(out)));
  };
  // The save id depends on what is converted, so that running the same
  // conversion again finds its own pending directory (resume), and another
  // conversion into the same place starts afresh.
  std::string what = opened.location + "|" + o.directory + "|" + (o.use_zarr3 ? "3" : "2");
  auto writer_factory = [o, what](bool create) -> WriterFactory {
    return [o, what, create](const std::vector<layout::ArrayInfo>& arrays) {
      OrbaxDestinationOptions with_id = o;
      with_id.save_id = ConversionId(what, arrays);
      return NewOrbaxDestination(arrays, with_id, create);
    };
  };
  make_writer = writer_factory(true);
  attach_writer = writer_factory(false);
  std::shared_ptr<KvStore> store = dst.store;
  const std::string item_prefix = step_prefix + o.item_name;
  open_dest = [store, item_prefix]() -> Result<std::unique_ptr<layout::CheckpointReader>> {
    CAIRN_ASSIGN_OR_RETURN(layout::OpenedCheckpoint d,
                           layout::OpenCheckpoint(store, item_prefix, "orbax"));
    return std::move(d.reader);
  };
  result.dest_location = o.directory + "/" + o.item_name;
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
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, OpenKvStore(FileUrl(path)));
  return Location{std::move(store), file};
}

Result<ConvertCheckpointResult> ConvertCheckpoint(const ConvertCheckpointRequest& request) {
  if (request.to != "safetensors" && request.to != "axlearn" && request.to != "orbax" &&
      request.to != "orbax-zarr2") {
    return Status(StatusCode::kInvalidArgument,
                  "cannot convert to `" + request.to +
                      "` (supported: orbax, orbax-zarr2, axlearn, safetensors)");
  }
  Coordinator* coordinator =
      request.coordinator != nullptr && request.coordinator->process_count() > 1
          ? request.coordinator
          : nullptr;
  const bool primary = coordinator == nullptr || coordinator->is_primary();
  const auto timeout = request.options.timeout;
  // Every process opens the source and the destination; the primary checks
  // that the destination holds no committed checkpoint. All agree first, so
  // that no process starts while another has already failed.
  Result<layout::OpenedCheckpoint> opened = Status(StatusCode::kInternal, "not opened");
  Result<Location> dst = Status(StatusCode::kInternal, "not opened");
  ConvertCheckpointResult result;
  ConvertOptions options = request.options;
  WriterFactory make_writer, attach_writer;
  ReaderFactory open_dest;
  Status prepared = [&]() -> Status {
    CAIRN_ASSIGN_OR_RETURN(Location src, OpenUserLocation(request.source));
    opened = layout::OpenCheckpoint(src.store, src.prefix, request.from, request.step);
    CAIRN_RETURN_IF_ERROR(opened.status());
    dst = OpenUserLocation(request.dest);
    CAIRN_RETURN_IF_ERROR(dst.status());
    result.source_format = opened->format;
    result.source_location = opened->location;
    std::string dest_prefix = dst->prefix;
    if (!dest_prefix.empty() && dest_prefix.back() != '/') dest_prefix += '/';
    std::shared_ptr<KvStore> store = dst->store;
    if (request.to == "safetensors") {
      options.plan.dest_separator = '.';
      if (primary) {
        CAIRN_RETURN_IF_ERROR(RefuseCommitted(
            *store, {dest_prefix + "model.safetensors", dest_prefix + std::string(safetensors::kIndexFile)},
            request.overwrite));
      }
      safetensors::WriterOptions w;
      w.max_file_bytes = request.max_file_bytes;
      // The factories outlive this block: they capture by value. A
      // safetensors writer touches storage only when written to, so the
      // other processes can hold one too.
      make_writer = [store, dest_prefix, w](const std::vector<layout::ArrayInfo>& arrays)
          -> Result<std::unique_ptr<layout::CheckpointWriter>> {
        CAIRN_ASSIGN_OR_RETURN(auto writer, safetensors::CreateWriter(store, dest_prefix, arrays, w));
        return std::unique_ptr<layout::CheckpointWriter>(std::move(writer));
      };
      attach_writer = make_writer;
      open_dest = [store, dest_prefix] { return safetensors::OpenReader(store, dest_prefix); };
      result.dest_location = store->url() + dest_prefix;
    } else if (request.to == "orbax" || request.to == "orbax-zarr2") {
      CAIRN_RETURN_IF_ERROR(PrepareOrbaxDestination(request, src.store, *opened, *dst, primary,
                                                    options, make_writer, attach_writer,
                                                    open_dest, result));
    } else {
      options.plan.dest_separator = '/';
      const int64_t step = request.step ? *request.step : opened->step.value_or(0);
      const std::string step_prefix = dest_prefix + axlearn::StepDirName(step) + "/";
      if (primary) {
        CAIRN_RETURN_IF_ERROR(RefuseCommitted(
            *store, {step_prefix + std::string(axlearn::kIndexFile)}, request.overwrite));
        // Iterator state first: the index, written last, commits it too.
        CAIRN_RETURN_IF_ERROR(CopyIteratorFiles(*src.store, opened->iterator_files, *store,
                                                step_prefix));
      }
      axlearn::WriterOptions w;
      w.step = step;
      if (opened->axlearn_index) {
        for (const axlearn::IndexEntry& e : opened->axlearn_index->entries) {
          if (!e.is_tensor) w.other_entries.push_back(e);
        }
      }
      const std::string what = opened->location + "|" + store->url() + step_prefix;
      const bool resume = options.resume;
      make_writer = [store, step_prefix, w, what, resume](const std::vector<layout::ArrayInfo>& arrays) {
        axlearn::WriterOptions with_token = w;
        if (resume) with_token.resume_token = ConversionId(what, arrays);
        return axlearn::CreateWriter(store, step_prefix, arrays, with_token);
      };
      attach_writer = [store, step_prefix, w](const std::vector<layout::ArrayInfo>& arrays) {
        return axlearn::AttachWriter(store, step_prefix, arrays, w);
      };
      open_dest = [store, step_prefix] { return axlearn::OpenReader(store, step_prefix); };
      result.dest_location = store->url() + step_prefix;
    }
    return Status::OK();
  }();
  if (coordinator == nullptr) {
    CAIRN_RETURN_IF_ERROR(prepared);
    CAIRN_ASSIGN_OR_RETURN(result.stats,
                           Convert(*opened->reader, make_writer, open_dest, options));
    return result;
  }
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(*coordinator, "cairn/convert/prepare", prepared, timeout));
  CAIRN_ASSIGN_OR_RETURN(result.stats, ConvertDistributed(*opened->reader, make_writer,
                                                          attach_writer, open_dest, options,
                                                          *coordinator));
  return result;
}

}  // namespace cairn::engine
