#include "cairn/kvstore/batch_writer.h"

#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

namespace cairn {
namespace {

class PutEachBatchWriter final : public KvBatchWriter {
 public:
  explicit PutEachBatchWriter(std::shared_ptr<KvStore> store) : store_(std::move(store)) {}
  Status Add(std::string key, ByteView value) override { return store_->Put(key, value); }
  Status Commit() override { return Status::OK(); }

 private:
  std::shared_ptr<KvStore> store_;
};

}  // namespace

std::unique_ptr<KvBatchWriter> NewPutEachBatchWriter(std::shared_ptr<KvStore> store) {
  return std::make_unique<PutEachBatchWriter>(std::move(store));
}

std::unique_ptr<KvBatchWriter> NewBatchWriter(std::shared_ptr<KvStore> store) {
  if (auto ocdbt = std::dynamic_pointer_cast<ocdbt::OcdbtKvStore>(store)) {
    return ocdbt::NewOcdbtBatchWriter(std::move(ocdbt));
  }
  return NewPutEachBatchWriter(std::move(store));
}

}  // namespace cairn
