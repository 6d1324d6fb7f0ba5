// Implements the protocol described in orbax_destination.h.
#include "cairn/engine/convert/orbax_destination.h"

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "cairn/engine/orbax_item.h"
#include "cairn/engine/save_plan.h"
#include "cairn/kvstore/batch_writer.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/zarr/chunk_check.h"
#include "cairn/zarr/chunk_encoder.h"
#include "cairn/zarr/shard_io.h"

namespace cairn::engine {
namespace {

class OrbaxDestination final : public layout::CheckpointWriter {
 public:
  // A destination that stops without committing keeps its pending
  // directories for a resume and stops renewing their owner records
  // (step 7 of layout/orbax/step.h); after a commit there is nothing left.
  ~OrbaxDestination() override {
    if (!began_) return;
    orbax::StopRenewingUnder(paths_.top.location.Path());
    (void)orbax::StopRenewing(paths_.top.location.Path());
  }

  std::string_view format() const override { return "orbax"; }

  Status Init(const std::vector<layout::ArrayInfo>& arrays, const OrbaxDestinationOptions& options,
              bool create) {
    options_ = options;
    init_ns_ = Now();
    request_.directory = options.directory;
    request_.item_name = options.item_name;
    request_.options.use_ocdbt = true;
    request_.options.use_zarr3 = options.use_zarr3;
    for (const layout::ArrayInfo& a : arrays) {
      SaveLeaf leaf;
      for (std::string& key : layout::SplitTreePath(a.path, '.')) {
        leaf.path.push_back({std::move(key), orbax::KeyType::kDict});
      }
      leaf.value_type = std::string(orbax::kNumpyArray);
      leaf.dtype = a.dtype;
      leaf.shape = a.shape;
      leaf.write_shape = a.write_shape;
      request_.leaves.push_back(std::move(leaf));
    }
    CAIRN_ASSIGN_OR_RETURN(plan_, PlanSave(request_));
    for (size_t i = 0; i < plan_.arrays.size(); ++i) {
      const ArrayPlan& a = plan_.arrays[i];
      by_path_[arrays[a.leaf].path] = i;
      CAIRN_ASSIGN_OR_RETURN(ArrayFormat f,
                             FormatFor(request_.leaves[a.leaf], a.chunk_shape, request_.options, true));
      formats_.push_back(std::move(f));
    }
    CAIRN_ASSIGN_OR_RETURN(paths_, PathsFor(request_, options.save_id));
    if (create) {
      const orbax::Location& top = paths_.top.location;
      resumed_ = options.resume && options.process_count == 1 && orbax::Exists(top);
      if (resumed_ && paths_.item && !top.commits_in_place && orbax::Exists(paths_.item->final_location)) {
        // An interrupted run committed the item inside the pending step and
        // died before the step's commit: that item cannot be committed over
        // again, so the step begins anew (BeginItem removes the dead run's
        // pending directory, item included).
        resumed_ = false;
      }
      if (resumed_) {
        // Step 7 of step.h: this process owns the directories from now on.
        CAIRN_RETURN_IF_ERROR(orbax::ResumeCommit(paths_.top));
        began_ = true;
        if (paths_.item) CAIRN_RETURN_IF_ERROR(orbax::ResumeCommit(*paths_.item));
        // Step 6: other temporaries whose owner is gone (BeginItem's sweep
        // for a conversion that starts afresh).
        orbax::RemoveAbandonedTemporaries(paths_.final_location.Parent(), top.Name()).IgnoreError();
      } else {
        CAIRN_RETURN_IF_ERROR(BeginItem(request_, paths_));
        began_ = true;
      }
    }
    CAIRN_ASSIGN_OR_RETURN(store_, OpenProcessStore(request_, paths_, options.process_index,
                                                    options.process_count));
    batch_ = NewBatchWriter(store_);
    if (options.process_index == 0) {
      for (size_t i = 0; i < plan_.arrays.size(); ++i) {
        const ArrayPlan& a = plan_.arrays[i];
        const std::string key = (a.param.empty() ? "" : a.param + "/") + formats_[i].stored_key;
        CAIRN_RETURN_IF_ERROR(batch_->Add(key, AsBytes(formats_[i].stored_text)));
      }
    }
    return Status::OK();
  }

  Status WriteBox(std::string_view path, const Box& box, const void* src) override {
    auto it = by_path_.find(std::string(path));
    if (it == by_path_.end()) {
      return Status(StatusCode::kNotFound, "no array `" + std::string(path) + "` declared for " +
                                               options_.directory);
    }
    const ArrayPlan& a = plan_.arrays[it->second];
    const ArrayMetadata& m = formats_[it->second].encode;
    const std::string where = "array `" + a.param + "` of " + options_.directory;
    CAIRN_RETURN_IF_ERROR(layout::CheckBoxInArray(box, m.shape, where));
    if (box.num_elements() == 0 && !m.shape.empty()) return Status::OK();
    const size_t elem = DTypeSize(m.dtype);
    std::vector<Index> lo(m.shape.size(), 0), hi(m.shape.size(), 0);
    if (!m.shape.empty()) internal_zarr::CellRange(box, m.chunk_shape, lo, hi);
    std::vector<Index> cell = lo;
    uint64_t added = 0;
    do {
      const Box valid = ChunkValidBox(m, cell);
      if (Intersect(valid, box) != valid) {
        return Status(StatusCode::kInvalidArgument,
                      where + ": box " + box.ToString() + " covers chunk " + valid.ToString() +
                          " only in part (write whole chunks)");
      }
      Buffer copy;
      ByteView data(static_cast<const uint8_t*>(src), static_cast<size_t>(box.num_elements()) * elem);
      if (valid != box) {
        copy = Buffer(static_cast<size_t>(valid.num_elements()) * elem);
        CopyBoxIntersection(src, box, copy.data(), valid, elem);
        data = copy.view();
      }
      CAIRN_ASSIGN_OR_RETURN(EncodedChunk encoded, EncodeChunk(m, cell, data, /*store_fill=*/true));
      if (encoded.omit) continue;
      ByteView value = encoded.as_is ? data : encoded.bytes.view();
      {
        std::shared_lock lock(batch_mu_);
        CAIRN_RETURN_IF_ERROR(batch_->Add((a.param.empty() ? "" : a.param + "/") + encoded.key, value)
                                  .Annotate(where));
      }
      added += value.size();
    } while (!m.shape.empty() && internal_zarr::NextCell(cell, lo, hi));
    if (unflushed_.fetch_add(added) + added >= options_.flush_bytes) {
      std::unique_lock lock(batch_mu_);
      if (unflushed_.load() >= options_.flush_bytes) CAIRN_RETURN_IF_ERROR(CommitBatch());
    }
    return Status::OK();
  }

  Result<bool> ArrayComplete(std::string_view path) override {
    auto it = by_path_.find(std::string(path));
    if (!resumed_ || it == by_path_.end()) return false;
    const ArrayPlan& a = plan_.arrays[it->second];
    const ArrayFormat& f = formats_[it->second];
    const std::string prefix = a.param.empty() ? "" : a.param + "/";
    CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> md, store_->Get(prefix + f.stored_key));
    if (!md || std::string_view(reinterpret_cast<const char*>(md->data()), md->size()) != f.stored_text) {
      return false;
    }
    CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> keys, store_->List(prefix));
    uint64_t chunks = 1, stored = 0;
    for (size_t d = 0; d < f.encode.shape.size(); ++d) {
      const Index c = std::max<Index>(f.encode.chunk_shape[d], 1);
      chunks *= static_cast<uint64_t>((f.encode.shape[d] + c - 1) / c);
    }
    for (const KeyInfo& k : keys) {
      if (k.key != prefix + f.stored_key) ++stored;
    }
    if (stored != chunks) return false;
    // Every chunk must also be intact (decode to a whole chunk through the
    // array's codecs, checksums included): a generation committed by an
    // interrupted run is trusted for what it lists, not for its bytes.
    for (const KeyInfo& k : keys) {
      if (k.key == prefix + f.stored_key) continue;
      // Unreadable (a reference past the end of a cut data file) is
      // damaged too: the array is written again.
      auto value = store_->Get(k.key);
      if (!value.ok() || !CheckStoredChunk(f.encode, *value, /*require_all=*/true).ok()) return false;
    }
    return true;
  }

  Status Flush() override {
    if (flushed_) return Status::OK();
    {
      std::unique_lock lock(batch_mu_);
      CAIRN_RETURN_IF_ERROR(batch_->Commit());
      batch_.reset();
    }
    CAIRN_RETURN_IF_ERROR(WriteArrayMetadatas(request_, plan_, paths_, options_.process_index));
    flushed_ = true;
    return Status::OK();
  }

  Status Commit() override {
    CAIRN_RETURN_IF_ERROR(Flush());
    if (options_.before_commit) CAIRN_RETURN_IF_ERROR(options_.before_commit(paths_.top.location));
    return FinalizeAndCommit(request_, paths_, options_.process_count, init_ns_);
  }

 private:
  // REQUIRES: batch_mu_ held exclusively.
  Status CommitBatch() {
    CAIRN_RETURN_IF_ERROR(batch_->Commit().Annotate("committing chunks of " + options_.directory));
    batch_ = NewBatchWriter(store_);
    unflushed_ = 0;
    return Status::OK();
  }

  OrbaxDestinationOptions options_;
  int64_t init_ns_ = 0;
  SaveRequest request_;
  SavePlan plan_;
  std::vector<ArrayFormat> formats_;
  std::map<std::string, size_t> by_path_;
  ItemPaths paths_;
  bool resumed_ = false;
  bool began_ = false;  // this writer owns the pending directories (the primary)
  std::shared_ptr<KvStore> store_;
  std::shared_mutex batch_mu_;
  std::unique_ptr<KvBatchWriter> batch_;
  std::atomic<uint64_t> unflushed_{0};
  bool flushed_ = false;
};

}  // namespace

std::string DeterministicSaveId(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Result<std::unique_ptr<layout::CheckpointWriter>> NewOrbaxDestination(
    const std::vector<layout::ArrayInfo>& arrays, const OrbaxDestinationOptions& options,
    bool create) {
  auto writer = std::make_unique<OrbaxDestination>();
  CAIRN_RETURN_IF_ERROR(writer->Init(arrays, options, create).Annotate("Orbax destination " +
                                                                        options.directory));
  return std::unique_ptr<layout::CheckpointWriter>(std::move(writer));
}

}  // namespace cairn::engine
