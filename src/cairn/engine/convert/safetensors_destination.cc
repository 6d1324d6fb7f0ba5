// safetensors as a conversion destination (a row of destinations.cc):
// `model.safetensors` (or a sharded set with its index) in DST.
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
