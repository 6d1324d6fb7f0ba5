// AXLearn's regular layout as a conversion destination (a row of
// destinations.cc): `DST/step_XXXXXXXX/` with its index written last.
#include "cairn/engine/convert/destinations.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"

namespace cairn::engine {

Status PrepareAxlearnDestination(DestinationContext& c) {
  const ConvertCheckpointRequest& request = c.request;
  ConvertOptions& options = c.options;
  const bool primary = c.primary;
  std::shared_ptr<KvStore> store = c.dest.store;
  const std::string dest_prefix = c.DirPrefix();
  options.plan.dest_separator = '/';
  const int64_t step = request.step ? *request.step : c.opened.step.value_or(0);
  const std::string step_prefix = dest_prefix + axlearn::StepDirName(step) + "/";
  if (primary) {
    CAIRN_RETURN_IF_ERROR(RefuseCommitted(
        *store, {step_prefix + std::string(axlearn::kIndexFile)}, request.overwrite));
    // Iterator state first: the index, written last, commits it too.
    CAIRN_RETURN_IF_ERROR(CopyIteratorFiles(*c.source_store, c.opened.iterator_files, *store,
                                            step_prefix));
  }
  axlearn::WriterOptions w;
  w.step = step;
  if (c.opened.axlearn_index) {
    for (const axlearn::IndexEntry& e : c.opened.axlearn_index->entries) {
      if (!e.is_tensor) w.other_entries.push_back(e);
    }
  }
  const std::string what = c.opened.location + "|" + store->url() + step_prefix;
  const bool resume = options.resume;
  c.make_writer = [store, step_prefix, w, what, resume](const std::vector<layout::ArrayInfo>& arrays) {
    axlearn::WriterOptions with_token = w;
    if (resume) with_token.resume_token = ConversionId(what, arrays);
    return axlearn::CreateWriter(store, step_prefix, arrays, with_token);
  };
  c.attach_writer = [store, step_prefix, w](const std::vector<layout::ArrayInfo>& arrays) {
    return axlearn::AttachWriter(store, step_prefix, arrays, w);
  };
  c.open_dest = [store, step_prefix] { return axlearn::OpenReader(store, step_prefix); };
  c.result.dest_location = store->url() + step_prefix;
  return Status::OK();
}

}  // namespace cairn::engine
