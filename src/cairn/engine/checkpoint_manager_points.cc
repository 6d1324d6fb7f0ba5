// Implements checkpoint_manager_points.h.
#include "cairn/engine/checkpoint_manager_points.h"

#include "cairn/engine/checkpoint_manager.h"
#include "cairn/layout/orbax/metadata_files.h"

namespace cairn::engine {
namespace {

class PointReportingKvStore final : public KvStore {
 public:
  PointReportingKvStore(std::shared_ptr<KvStore> base, std::string item_name,
                        std::function<void(std::string_view)> at_point)
      : base_(std::move(base)), item_(std::move(item_name)), at_(std::move(at_point)) {}

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range) override {
    return base_->Get(key, range);
  }
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override { return base_->GetInto(key, dst); }
  Status Put(std::string_view key, ByteView value) override {
    BeforeWrite(key);
    return base_->Put(key, value);
  }
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override {
    BeforeWrite(key);
    return base_->PutIfAbsent(key, value);
  }
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected, ByteView value) override {
    BeforeWrite(key);
    return base_->CompareAndPut(key, expected, value);
  }
  Status Delete(std::string_view key) override { return base_->Delete(key); }
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override { return base_->List(prefix); }
  Status ApplyBatch(std::vector<KvMutation> mutations) override { return base_->ApplyBatch(std::move(mutations)); }
  Status DeletePrefix(std::string_view prefix) override { return base_->DeletePrefix(prefix); }
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override {
    BeforeWrite(key);
    return base_->OpenWriter(key);
  }
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override {
    return base_->ListChildren(prefix);
  }
  Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix, std::string_view pending_prefix) override {
    return base_->BeginPrefixCommit(final_prefix, pending_prefix);
  }
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name, ByteView marker) override {
    std::string_view name = commit.final_prefix;
    name.remove_suffix(1);  // the '/'
    name = name.substr(name.rfind('/') + 1);  // npos + 1 == 0
    if (!marker_name.empty()) at_(name == item_ ? kPointBeforeItemCommit : kPointBeforeStepCommit);
    return base_->FinishPrefixCommit(commit, marker_name, marker);
  }
  std::string url() const override { return base_->url(); }

 private:
  void BeforeWrite(std::string_view key) {
    const std::string_view md = orbax::kTreeMetadataFile;
    if (key.size() > md.size() && key.ends_with(md) && key[key.size() - md.size() - 1] == '/') {
      at_(kPointDataWritten);
    }
  }

  std::shared_ptr<KvStore> base_;
  std::string item_;
  std::function<void(std::string_view)> at_;
};

}  // namespace

std::shared_ptr<KvStore> NewPointReportingKvStore(std::shared_ptr<KvStore> base, std::string item_name,
                                                  std::function<void(std::string_view)> at_point) {
  return std::make_shared<PointReportingKvStore>(std::move(base), std::move(item_name), std::move(at_point));
}

}  // namespace cairn::engine
