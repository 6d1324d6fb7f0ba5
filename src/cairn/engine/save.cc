// Implements the save protocol described in save.h.
#include "cairn/engine/save.h"

#include <algorithm>
#include <mutex>

#include "cairn/codec/zstd_codec.h"
#include "cairn/engine/orbax_item.h"
#include "cairn/engine/progress.h"
#include "cairn/engine/save_plan.h"
#include "cairn/kvstore/batch_writer.h"
#include "cairn/util/thread_pool.h"
#include "cairn/zarr/chunk_encoder.h"
#include "cairn/zarr/shard_io.h"

namespace cairn::engine {
namespace {

// Enough to tell random weights (zstd saves ~8%) from compressible data,
// small enough that sampling 300+ arrays adds little to the stall.
constexpr uint64_t kSampleBytes = uint64_t{128} << 10;

// The address of `box`'s first element (box inside the piece).
const uint8_t* PieceAt(const PlannedPiece& piece, const Box& box) {
  const uint8_t* src = piece.data;
  for (size_t d = 0; d < box.rank(); ++d) src += (box.origin[d] - piece.box.origin[d]) * piece.byte_strides[d];
  return src;
}

// Whether `box` (inside the piece) lies in the piece's memory exactly as a
// C-contiguous array of its shape would: every dimension longer than 1 has
// the C stride.
bool ContiguousIn(const PlannedPiece& piece, const Box& box, size_t elem) {
  const std::vector<Index> c = CStrides(box.shape, elem);
  for (size_t d = 0; d < box.rank(); ++d) {
    if (box.shape[d] > 1 && piece.byte_strides[d] != c[d]) return false;
  }
  return true;
}

// Copies `box` (inside the piece) into a C-contiguous buffer.
void CopyOut(const PlannedPiece& piece, const Box& box, size_t elem, uint8_t* dst) {
  StridedCopy(PieceAt(piece, box), piece.byte_strides, dst, CStrides(box.shape, elem), box.shape, elem);
}

// '1': zstd saves at least 10% on a sample of the first piece; '0': less;
// '-': nothing to sample.
char CompressionVote(const ArrayPlan& a, const SaveLeaf& leaf) {
  if (a.pieces.empty()) return '-';
  const PlannedPiece& p = a.pieces.front();
  const size_t elem = DTypeSize(leaf.dtype);
  Box sample = p.box;
  for (size_t d = 0; d < sample.rank(); ++d) {
    const uint64_t bytes = static_cast<uint64_t>(sample.num_elements()) * elem;
    if (bytes <= kSampleBytes) break;
    const uint64_t rest = bytes / static_cast<uint64_t>(sample.shape[d]);
    sample.shape[d] = std::max<Index>(1, static_cast<Index>(kSampleBytes / std::max<uint64_t>(rest, 1)));
  }
  Buffer raw(static_cast<size_t>(sample.num_elements()) * elem);
  if (raw.size() == 0) return '-';
  CopyOut(p, sample, elem, raw.data());
  auto encoded = ZstdCodec(3, false).Encode(raw.view());
  if (!encoded.ok()) return '1';
  return encoded->size() * 10 < raw.size() * 9 ? '1' : '0';
}

bool HasJaxArrays(const SaveRequest& request) {
  return std::any_of(request.leaves.begin(), request.leaves.end(),
                     [](const SaveLeaf& l) { return l.value_type == orbax::kJaxArray; });
}

class PendingSaveImpl final : public PendingSave {
 public:
  ~PendingSaveImpl() override { Wait().IgnoreError(); }

  Status Wait() override {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (thread_.joinable()) thread_.join();
    return result_;
  }
  bool done() const override { return done_.load(); }
  const std::string& directory() const override { return final_dir_; }

  // Everything the background work needs, owned here.
  SaveRequest request;
  ItemPaths paths;
  bool began = false;  // this (primary) process began the commit
  SavePlan plan;
  std::vector<ArrayFormat> formats;  // per plan.arrays
  Coordinator* coordinator = nullptr;
  std::unique_ptr<ByteBudget> own_budget;
  ByteBudget* budget = nullptr;
  std::unique_ptr<KvBatchWriter> writer;
  std::unique_ptr<TaskGroup> group;
  int64_t init_ns = 0;
  std::string final_dir_;
  std::string name_prefix;
  std::unique_ptr<ProgressCounter> progress;  // of the chunks' array bytes

  // The array bytes of every chunk this process writes (progress's total).
  uint64_t ChunkBytesTotal() const;

  // Snapshots the pieces of mutable shards (immutable == false) or of
  // immutable ones, chunk by chunk within the budget, and queues their
  // encoding. StartSave runs the first; the background thread the second.
  Status Snapshot(bool immutable);
  // The name this process's database and array metadata are named after.
  std::string StoreName() const {
    if (!request.options.process_name.empty()) return request.options.process_name;
    return std::to_string(request.local_tier.own_process_index >= 0 ? request.local_tier.own_process_index
                                                                 : coordinator->process_index());
  }
  // Whether this process writes the arrays' Zarr metadata (save_request.h).
  bool WritesZarrMetadata() const {
    if (!coordinator->is_primary()) return false;
    if (!request.options.shards_only) return true;
    const std::string name = StoreName();
    return name == "0" || name.find_first_not_of("0123456789") != std::string::npos;
  }
  void Start() { thread_ = std::thread([this] { Finish(); }); }

 private:
  void Finish();
  Status Collective(std::string_view step, const Status& local) {
    return AgreeOnStatus(*coordinator, name_prefix + std::string(step), local, request.options.timeout);
  }

  std::mutex wait_mu_;
  std::thread thread_;
  Status result_;
  std::atomic<bool> done_{false};
};

Status PendingSaveImpl::Snapshot(bool immutable) {
  for (size_t ai = 0; ai < plan.arrays.size(); ++ai) {
    const ArrayPlan& a = plan.arrays[ai];
    const ArrayMetadata& m = formats[ai].encode;
    const size_t elem = DTypeSize(m.dtype);
    const ChunkSpec spec = m.chunk_spec();
    const bool identity = m.codecs.IsIdentity(spec);
    // Bytes a chunk's encoding holds besides its snapshot: the encoded bytes
    // (zstd's worst case is a little over the input; a shard adds its index)
    // and, for a chunk sticking out of the array, the padded chunk.
    const uint64_t chunk_bytes = spec.num_bytes();
    const uint64_t encoded_estimate = identity ? 0 : chunk_bytes + chunk_bytes / 64 + 4096;
    const std::string prefix = a.param.empty() ? "" : a.param + "/";
    for (const PlannedPiece& piece : a.pieces) {
      if (piece.immutable != immutable) continue;
      std::vector<Index> lo, hi;
      internal_zarr::CellRange(piece.box, m.chunk_shape, lo, hi);
      std::vector<Index> cell = lo;
      do {
        if (group->failed()) return Status::OK();  // the error comes from Wait
        CAIRN_RETURN_IF_ERROR(CheckInterrupt(request.options.interrupt, "the save of " + final_dir_));
        const Box valid = ChunkValidBox(m, cell);
        const uint64_t bytes = static_cast<uint64_t>(valid.num_elements()) * elem;
        const bool whole = valid.shape == m.chunk_shape;
        const uint64_t working = whole ? encoded_estimate : chunk_bytes + encoded_estimate;
        // A whole chunk lying contiguously in an immutable buffer is encoded
        // (or written, by an identity chain) straight from it: no copy.
        ByteView source;
        std::shared_ptr<Buffer> snapshot;
        std::shared_ptr<BudgetHold> hold;
        if (immutable && whole && ContiguousIn(piece, valid, elem)) {
          source = ByteView(PieceAt(piece, valid), bytes);
        } else {
          // The snapshot waits for room in the budget; the encoder's working
          // memory (encoded bytes, the padded chunk) overdraws it while it runs.
          budget->Acquire(bytes);
          hold = std::make_shared<BudgetHold>(budget, bytes);
          snapshot = std::make_shared<Buffer>(bytes);
          CopyOut(piece, valid, elem, snapshot->data());
          source = snapshot->view();
        }
        group->Run([this, &m, cell, source, snapshot, hold, prefix, working, bytes]() -> Status {
          CAIRN_RETURN_IF_ERROR(CheckInterrupt(request.options.interrupt, "the save of " + final_dir_));
          budget->Overdraw(working);
          BudgetHold encoding(budget, working);
          auto encoded = EncodeChunk(m, cell, source, /*store_fill=*/true);
          if (!encoded.ok()) return encoded.status().Annotate("encoding a chunk of `" + prefix + "`");
          Status added;
          if (!encoded->omit) added = writer->Add(prefix + encoded->key, encoded->as_is ? source : encoded->bytes.view());
          if (added.ok()) progress->Add(bytes);
          return added;
        });
      } while (internal_zarr::NextCell(cell, lo, hi));
    }
  }
  return Status::OK();
}

uint64_t PendingSaveImpl::ChunkBytesTotal() const {
  uint64_t total = 0;
  for (size_t ai = 0; ai < plan.arrays.size(); ++ai) {
    const ArrayMetadata& m = formats[ai].encode;
    const size_t elem = DTypeSize(m.dtype);
    for (const PlannedPiece& piece : plan.arrays[ai].pieces) {
      std::vector<Index> lo, hi;
      internal_zarr::CellRange(piece.box, m.chunk_shape, lo, hi);
      std::vector<Index> cell = lo;
      do {
        total += static_cast<uint64_t>(ChunkValidBox(m, cell).num_elements()) * elem;
      } while (internal_zarr::NextCell(cell, lo, hi));
    }
  }
  return total;
}

void PendingSaveImpl::Finish() {
  // Step 3 (background part).
  Status deferred = Snapshot(/*immutable=*/true);
  if (!deferred.ok()) group->Run([deferred] { return deferred; });
  Status local = group->Wait();
  // Interrupted after its last chunk: still nothing is committed.
  if (local.ok()) local = CheckInterrupt(request.options.interrupt, "the save of " + final_dir_);
  if (local.ok()) local = writer->Commit();
  if (local.ok()) progress->Finish();
  if (local.ok() && (!request.options.shards_only || HasJaxArrays(request))) {
    local = WriteArrayMetadatas(request, plan, paths, StoreName());
  }
  writer.reset();
  // Step 4.
  Status s = Collective("written", local);
  // Step 5.
  if (s.ok()) {
    Status commit = coordinator->is_primary() && !request.options.shards_only
                        ? FinalizeAndCommit(request, paths, coordinator->process_count(), init_ns)
                        : Status::OK();
    // Step 6.
    s = Collective("committed", commit);
  }
  if (!s.ok()) {
    if (began) AbandonItem(request, paths);
    s = s.Annotate("saving " + final_dir_);
  }
  result_ = s;
  done_.store(true);
}

}  // namespace

ByteBudget& DefaultByteBudget() {
  static ByteBudget* budget = new ByteBudget(ByteBudget::kDefaultBytes);
  return *budget;
}

Result<std::unique_ptr<PendingSave>> StartSave(const SaveRequest& request, Coordinator& coordinator,
                                               ByteBudget* budget, const SaveHooks& hooks) {
  auto save = std::make_unique<PendingSaveImpl>();
  save->request = request;
  save->coordinator = &coordinator;
  save->init_ns = Now();
  const std::string final_top = FinalTopOf(request);
  save->final_dir_ = request.item_name.empty() ? final_top : final_top + "/" + request.item_name;
  save->name_prefix = "cairn/save/" + final_top + "/";
  const SaveOptions& options = save->request.options;
  auto agree = [&](std::string_view step, const Status& local) {
    return AgreeOnStatus(coordinator, save->name_prefix + std::string(step), local, options.timeout);
  };

  // Step 1. The primary picks the save id: every process writes only into
  // that save's temporary directories, so a straggler of an earlier save
  // can never write into this one.
  CAIRN_ASSIGN_OR_RETURN(
      std::string save_id,
      coordinator.Broadcast(save->name_prefix + "save_id", 0,
                            coordinator.is_primary() ? orbax::NewSaveId() : "", options.timeout));
  Status local;
  auto paths = PathsFor(save->request, save_id);
  auto plan = PlanSave(save->request);
  if (options.shards_only && !request.caller_commits) {
    local = InvalidArgumentError("saving " + final_top + ": a shards-only save needs an item the caller commits");
  } else if (options.shards_only && options.compression == Compression::kAuto) {
    // Each host would sample alone, and hosts could encode one array apart.
    local = InvalidArgumentError("saving " + final_top + ": compression 'auto' needs every process's "
                                 "samples; a shards-only save takes 'default' or 'none'");
  } else if (!paths.ok()) {
    local = paths.status();
  } else if (!plan.ok()) {
    local = plan.status();
  } else {
    save->paths = std::move(*paths);
    save->plan = std::move(*plan);
    if (coordinator.is_primary()) {
      local = BeginItem(save->request, save->paths);
      save->began = local.ok();
    }
  }
  {
    Status agreed = agree("begin", local);
    if (!agreed.ok()) {
      if (save->began) AbandonItem(save->request, save->paths);
      return agreed;
    }
  }

  // Step 2.
  std::string compress(save->plan.arrays.size(), '1');
  if (options.compression == Compression::kNone) {
    compress.assign(compress.size(), '0');
  } else if (options.compression == Compression::kAuto) {
    std::string votes;
    for (const ArrayPlan& a : save->plan.arrays) votes += CompressionVote(a, save->request.leaves[a.leaf]);
    CAIRN_ASSIGN_OR_RETURN(auto all, coordinator.AllGather(save->name_prefix + "auto", votes, options.timeout));
    for (size_t i = 0; i < compress.size(); ++i) {
      bool any_sample = false, any_compress = false;
      for (const std::string& v : all) {
        if (i >= v.size() || v[i] == '-') continue;
        any_sample = true;
        any_compress |= v[i] == '1';
      }
      compress[i] = (!any_sample || any_compress) ? '1' : '0';
    }
  }

  // Step 3 (snapshot).
  local = Status::OK();
  for (size_t i = 0; i < save->plan.arrays.size() && local.ok(); ++i) {
    const ArrayPlan& a = save->plan.arrays[i];
    auto format = FormatFor(save->request.leaves[a.leaf], a.chunk_shape, options, compress[i] == '1');
    if (!format.ok()) local = format.status().Annotate("array `" + a.param + "`");
    else save->formats.push_back(std::move(*format));
  }
  std::shared_ptr<KvStore> store;
  if (local.ok()) {
    auto opened = OpenProcessStore(save->request, save->paths, save->StoreName());
    if (!opened.ok()) local = opened.status();
    else store = hooks.wrap_process_store ? hooks.wrap_process_store(*opened) : *opened;
  }
  if (!local.ok()) {
    // Fail every process at the same collective the others reach.
    Status s = agree("written", local);
    if (save->began) AbandonItem(save->request, save->paths);
    return s.ok() ? local : s;
  }
  if (budget == nullptr) {
    if (options.memory_budget_bytes != 0) {
      save->own_budget = std::make_unique<ByteBudget>(options.memory_budget_bytes);
      budget = save->own_budget.get();
    } else {
      budget = &DefaultByteBudget();
    }
  }
  save->budget = budget;
  save->writer = NewBatchWriter(store);
  save->group = std::make_unique<TaskGroup>(ThreadPool::Default());
  if (save->WritesZarrMetadata()) {
    for (size_t i = 0; i < save->plan.arrays.size(); ++i) {
      const ArrayPlan& a = save->plan.arrays[i];
      const std::string key = (a.param.empty() ? "" : a.param + "/") + save->formats[i].stored_key;
      PendingSaveImpl* raw = save.get();
      save->group->Run([raw, key, i]() { return raw->writer->Add(key, AsBytes(raw->formats[i].stored_text)); });
    }
  }
  save->progress = std::make_unique<ProgressCounter>(
      options.progress, options.progress ? save->ChunkBytesTotal() : 0);
  Status snap = save->Snapshot(/*immutable=*/false);
  if (!snap.ok()) save->group->Run([snap] { return snap; });
  save->Start();
  return std::unique_ptr<PendingSave>(std::move(save));
}

Status Save(const SaveRequest& request, Coordinator& coordinator) {
  CAIRN_ASSIGN_OR_RETURN(auto pending, StartSave(request, coordinator));
  return pending->Wait();
}

}  // namespace cairn::engine
