#include "cairn/kvstore/batch_writer.h"
#include "cairn/kvstore/read_batching.h"


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
  if (store->Capabilities().batch_writer) {
    if (std::unique_ptr<KvBatchWriter> own = store->OpenBatchWriter()) return own;
  }
  return NewPutEachBatchWriter(std::move(store));
}

std::unique_ptr<KvBatchWriter> NewPrefixedBatchWriter(std::unique_ptr<KvBatchWriter> base, std::string prefix) {
  if (base == nullptr) return nullptr;
  return std::make_unique<PrefixBatchWriter>(std::move(base), std::move(prefix));
}

std::unique_ptr<KvBatchWriter> KvStore::OpenBatchWriter() { return nullptr; }

bool PrefersBatchedReads(const KvStore& store) { return store.Capabilities().batched_reads; }

}  // namespace cairn
