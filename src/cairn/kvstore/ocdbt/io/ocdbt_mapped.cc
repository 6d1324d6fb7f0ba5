// OcdbtKvStore::MapRange (mapped_read.h): a value's bytes mapped from its
// data file through the base store's capability; DescribeStored names that
// data file. The key is looked up in
// the tree as for Get; an inline value (in a B+tree node) is not mapped.
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

namespace cairn::ocdbt {

std::string OcdbtKvStore::DescribeStored(std::string_view key) {
  std::string s = Describe(key);
  if (!ValidateKey(key).ok()) return s;
  auto view = ReadViewNow();
  if (!view.ok() || !view->root) return s;
  auto value = FindKey(*view->root, key, Reader(), view->limits);
  if (!value.ok() || !*value) return s;
  if ((*value)->is_inline) return s + " (inline in a B+tree node)";
  return s + " (bytes [" + std::to_string((*value)->ref.offset) + ", +" + std::to_string((*value)->ref.length) +
         ") of " + base_->Describe((*value)->ref.file_id.FullPath()) + ")";
}

Result<std::shared_ptr<MappedBytes>> OcdbtKvStore::MapRange(std::string_view key, uint64_t offset,
                                                            uint64_t length) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  MappedReadStore* base = AsMappedReadStore(base_.get());
  if (base == nullptr) return std::shared_ptr<MappedBytes>();
  CAIRN_ASSIGN_OR_RETURN(ReadView view, ReadViewNow());
  std::optional<LeafValue> value;
  if (view.root) {
    CAIRN_ASSIGN_OR_RETURN(value, FindKey(*view.root, key, Reader(), view.limits));
  }
  if (!value) return NotFoundError("mapping key `" + std::string(key) + "` of " + url() + ": no such key");
  if (offset > value->size() || length > value->size() - offset) {
    return InvalidArgumentError("mapping key `" + std::string(key) + "` of " + url() + ": bytes [" +
                                std::to_string(offset) + ", +" + std::to_string(length) +
                                ") lie outside its value of " + std::to_string(value->size()) + " bytes");
  }
  if (value->is_inline) return std::shared_ptr<MappedBytes>();
  const std::string path = value->ref.file_id.FullPath();
  if (Status valid = ValidateKey(path); !valid.ok()) {
    return DataLossError("OCDBT data file path `" + path + "` of " + base_->url() +
                         " is not a valid key: " + std::string(valid.message()));
  }
  auto mapped = base->MapRange(path, value->ref.offset + offset, length);
  if (!mapped.ok() && (mapped.status().code() == StatusCode::kNotFound ||
                       mapped.status().code() == StatusCode::kInvalidArgument)) {
    return DataLossError(base_->Describe(path) + ": reference to bytes [" +
                         std::to_string(value->ref.offset) + ", +" + std::to_string(value->ref.length) +
                         ") of key `" + std::string(key) + "` outside the data file: " +
                         std::string(mapped.status().message()));
  }
  if (mapped.ok() && *mapped != nullptr) (*mapped)->set_value_size(value->size());
  return mapped;
}

}  // namespace cairn::ocdbt
