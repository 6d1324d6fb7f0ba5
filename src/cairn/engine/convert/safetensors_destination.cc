// safetensors as a conversion destination (a row of destinations.cc):
// `model.safetensors` (or a sharded set with its index) in DST, each file
// with the `__metadata__` transformers expects plus the source's step.
#include "cairn/engine/convert/destinations.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/layout/safetensors/safetensors_writer.h"

namespace cairn::engine {

Status PrepareSafetensorsDestination(DestinationContext& c) {
  const ConvertCheckpointRequest& request = c.request;
  ConvertOptions& options = c.options;
  const bool primary = c.primary;
  std::shared_ptr<KvStore> store = c.dest.store;
  const std::string dest_prefix = c.DirPrefix();
  options.plan.dest_separator = '.';
  if (primary) {
    CAIRN_RETURN_IF_ERROR(RefuseCommitted(
        *store, {dest_prefix + "model.safetensors", dest_prefix + std::string(safetensors::kIndexFile)},
        request.overwrite));
  }
  safetensors::WriterOptions w;
  w.max_file_bytes = request.max_file_bytes;
  // Every file's `__metadata__`: a safetensors source's own entries, then
  // "format": "pt" as transformers writes it (its loader checks the key),
  // and the source's format and step (not its location: a local path has
  // no place in a file that gets shared).
  w.metadata = c.opened.metadata;
  w.metadata["format"] = "pt";
  w.metadata["cairn.source_format"] = c.opened.format;
  if (c.opened.step) w.metadata["cairn.source_step"] = std::to_string(*c.opened.step);
  // The factories outlive this block: they capture by value. A
  // safetensors writer touches storage only when written to, so the
  // other processes can hold one too.
  c.make_writer = [store, dest_prefix, w](const std::vector<layout::ArrayInfo>& arrays)
      -> Result<std::unique_ptr<layout::CheckpointWriter>> {
    CAIRN_ASSIGN_OR_RETURN(auto writer, safetensors::CreateWriter(store, dest_prefix, arrays, w));
    return std::unique_ptr<layout::CheckpointWriter>(std::move(writer));
  };
  c.attach_writer = c.make_writer;
  c.open_dest = [store, dest_prefix] { return safetensors::OpenReader(store, dest_prefix); };
  c.result.dest_location = store->url() + dest_prefix;
  return Status::OK();
}

}  // namespace cairn::engine
