// Implements checkpoint_manager_points.h.
#include "cairn/engine/checkpoint_manager_points.h"

#include "cairn/engine/checkpoint_manager.h"
#include "cairn/kvstore/forwarding_kvstore.h"
#include "cairn/layout/orbax/metadata_files.h"

namespace cairn::engine {
namespace {

class PointReportingKvStore final : public ForwardingKvStore {
 public:
  PointReportingKvStore(std::shared_ptr<KvStore> base, std::string item_name,
                        std::function<void(std::string_view)> at_point)
      : ForwardingKvStore(std::move(base)), item_(std::move(item_name)), at_(std::move(at_point)) {}

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
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override {
    BeforeWrite(key);
    return base_->OpenWriter(key);
  }
  Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name, ByteView marker) override {
    std::string_view name = commit.final_prefix;
    name.remove_suffix(1);  // the '/'
    name = name.substr(name.rfind('/') + 1);  // npos + 1 == 0
    if (!marker_name.empty()) at_(name == item_ ? kPointBeforeItemCommit : kPointBeforeStepCommit);
    return base_->FinishPrefixCommit(commit, marker_name, marker);
  }

 private:
  void BeforeWrite(std::string_view key) {
    const std::string_view md = orbax::kTreeMetadataFile;
    if (key.size() > md.size() && key.ends_with(md) && key[key.size() - md.size() - 1] == '/') {
      at_(kPointDataWritten);
    }
  }

  std::string item_;
  std::function<void(std::string_view)> at_;
};

}  // namespace

std::shared_ptr<KvStore> NewPointReportingKvStore(std::shared_ptr<KvStore> base, std::string item_name,
                                                  std::function<void(std::string_view)> at_point) {
  return std::make_shared<PointReportingKvStore>(std::move(base), std::move(item_name), std::move(at_point));
}

}  // namespace cairn::engine
