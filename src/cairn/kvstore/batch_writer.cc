#include "cairn/kvstore/batch_writer.h"
#include "cairn/kvstore/read_batching.h"

#include "cairn/kvstore/ocdbt/io/ocdbt_batch_writer.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"

namespace cairn {
namespace {

class PutEachBatchWriter final : public KvBatchWriter {
 public:
  explicit PutEachBatchWriter(std::shared_ptr<KvStore> store) : store_(std::move(store)) {}
  Status Add(std::string key, ByteView value) override { return store_->Put(key, value); }
  Status Delete(std::string key) override { return store_->Delete(key); }
  Status Commit() override { return Status::OK(); }

 private:
  std::shared_ptr<KvStore> store_;
};

// The writer of a prefix view: the base store's writer, keys prefixed.
class PrefixBatchWriter final : public KvBatchWriter {
 public:
  PrefixBatchWriter(std::unique_ptr<KvBatchWriter> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}
  Status Add(std::string key, ByteView value) override {
    CAIRN_RETURN_IF_ERROR(ValidateKey(key));
    return base_->Add(prefix_ + key, value);
  }
  Status Delete(std::string key) override {
    CAIRN_RETURN_IF_ERROR(ValidateKey(key));
    return base_->Delete(prefix_ + key);
  }
  Status Commit() override { return base_->Commit(); }

 private:
  std::unique_ptr<KvBatchWriter> base_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<KvBatchWriter> NewPutEachBatchWriter(std::shared_ptr<KvStore> store) {
  return std::make_unique<PutEachBatchWriter>(std::move(store));
}

std::unique_ptr<KvBatchWriter> NewBatchWriter(std::shared_ptr<KvStore> store) {
  if (auto ocdbt = std::dynamic_pointer_cast<ocdbt::OcdbtKvStore>(store)) {
    return ocdbt::NewOcdbtBatchWriter(std::move(ocdbt));
  }
  if (auto view = std::dynamic_pointer_cast<PrefixKvStore>(store)) {
    return std::make_unique<PrefixBatchWriter>(NewBatchWriter(view->base()), view->prefix());
  }
  return NewPutEachBatchWriter(std::move(store));
}

bool PrefersBatchedReads(const KvStore& store) {
  if (dynamic_cast<const ocdbt::OcdbtKvStore*>(&store) != nullptr) return true;
  if (const auto* view = dynamic_cast<const PrefixKvStore*>(&store)) {
    return view->base() != nullptr && PrefersBatchedReads(*view->base());
  }
  return false;
}

}  // namespace cairn
