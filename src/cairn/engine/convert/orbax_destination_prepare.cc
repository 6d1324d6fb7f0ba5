#include <algorithm>

#include "cairn/engine/convert/destinations.h"
#include "cairn/engine/convert/orbax_destination.h"
#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::engine {

// Orbax destinations (orbax_destination.h). DST is the checkpoint root:
// the step goes to `DST/<step>/default/` as CheckpointManager lays it out;
// a source with an AXLearn index goes to AXLearn's Orbax step instead,
// `DST/step_XXXXXXXX/{state/, index/index, tfds/, python/}`.
Status PrepareOrbaxDestination(DestinationContext& c, bool use_zarr3) {
  const ConvertCheckpointRequest& request = c.request;
  std::shared_ptr<KvStore> source_store = c.source_store;
  const layout::OpenedCheckpoint& opened = c.opened;
  const Location& dst = c.dest;
  const bool primary = c.primary;
  ConvertOptions& options = c.options;
  options.plan.dest_separator = '.';
  const std::string url = dst.store->url();
  if (url.find('|') != std::string::npos) {
    return Status(StatusCode::kUnimplemented,
                  "Orbax destinations are plain stores (a directory or a " + KvStoreDriverUrlForms() +
                      " URL), not the pipeline " + url);
  }
  const std::string dest_prefix = c.DirPrefix();
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
  o.use_zarr3 = use_zarr3;
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
                      o.directory + " exists: the destination holds a committed checkpoint");
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
  c.make_writer = writer_factory(true);
  c.attach_writer = writer_factory(false);
  std::shared_ptr<KvStore> store = dst.store;
  const std::string item_prefix = step_prefix + o.item_name;
  c.open_dest = [store, item_prefix]() -> Result<std::unique_ptr<layout::CheckpointReader>> {
    CAIRN_ASSIGN_OR_RETURN(layout::OpenedCheckpoint d,
                           layout::OpenCheckpoint(store, item_prefix, "orbax"));
    return std::move(d.reader);
  };
  c.result.dest_location = o.directory + "/" + o.item_name;
  return Status::OK();
}

}  // namespace cairn::engine
