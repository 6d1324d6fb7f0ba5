// Implements the save and restore protocols of manager.h (numbered there).
#include "cairn/emergency/manager.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "cairn/emergency/dir_transfer.h"
#include "cairn/emergency/retention.h"
#include "cairn/emergency/tier_info.h"
#include "cairn/engine/checkpoint_manager_points.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/layout/orbax/tree_metadata.h"

namespace cairn::emergency {
namespace {

constexpr int kReplicationTag = 1;
constexpr int kFirstFetchTag = 2;
constexpr std::string_view kPersistentItem = "default";

std::string DefaultProcessMetadata(int n) {
  Json j = Json::array();
  for (int i = 0; i < n; ++i) j.push_back(Json::array({i}));
  return DumpJson(j);
}

std::string DefaultMeshMetadata(int n) {
  Json j = Json::array();
  for (int i = 0; i < n; ++i) j.push_back(i);
  return DumpJson(j);
}

LocalStepRecord RecordFor(int64_t step, int process, const ReplicaLayout& layout,
                          const std::vector<engine::SaveLeaf>& leaves) {
  LocalStepRecord r;
  r.step = step;
  r.process_index = process;
  r.process_count = layout.process_count;
  r.num_replicas = layout.num_replicas;
  for (const engine::SaveLeaf& leaf : leaves) {
    if (!orbax::IsArrayValueType(leaf.value_type)) continue;
    StoredArray& a = r.arrays[orbax::ParamName(leaf.path)];
    a.dtype = std::string(DTypeName(leaf.dtype));
    a.shape = leaf.shape;
    for (const engine::ShardToSave& s : leaf.shards) {
      if (s.box.empty() || std::find(a.boxes.begin(), a.boxes.end(), s.box) != a.boxes.end()) continue;
      a.boxes.push_back(s.box);
    }
  }
  return r;
}

std::string StepPath(const orbax::Location& root, int64_t step) {
  return root.Child(std::to_string(step)).Path();
}

}  // namespace

EmergencyCheckpointManager::EmergencyCheckpointManager(EmergencyOptions options, Coordinator& coordinator,
                                                       std::shared_ptr<PeerTransport> transport)
    : options_(std::move(options)),
      coordinator_(coordinator),
      alone_(NewSingleProcessCoordinator()),
      transport_(std::move(transport)) {}

EmergencyCheckpointManager::~EmergencyCheckpointManager() { Close().IgnoreError(); }

Result<std::unique_ptr<EmergencyCheckpointManager>> EmergencyCheckpointManager::Open(
    EmergencyOptions options, Coordinator& coordinator, std::shared_ptr<PeerTransport> transport) {
  const int n = coordinator.process_count();
  ReplicaLayout layout{n, options.num_replicas};
  CAIRN_RETURN_IF_ERROR(CheckLayout(layout, options.peer_copies));
  if (options.local_save_interval_steps < 1 || options.persistent_save_interval_steps < 1) {
    return InvalidArgumentError("emergency checkpointing: save intervals must be at least 1 step");
  }
  if (options.peer_copies > 0) {
    if (transport == nullptr) {
      return InvalidArgumentError("emergency checkpointing: peer copies need a transport");
    }
    if (transport->process_count() != n || transport->process_index() != coordinator.process_index()) {
      return InvalidArgumentError("emergency checkpointing: the transport's process " +
                                  std::to_string(transport->process_index()) + " of " +
                                  std::to_string(transport->process_count()) +
                                  " differs from the coordinator's " +
                                  std::to_string(coordinator.process_index()) + " of " + std::to_string(n));
    }
  }
  if (options.transfer_piece_bytes == 0) options.transfer_piece_bytes = uint64_t{16} << 20;
  auto m = std::unique_ptr<EmergencyCheckpointManager>(
      new EmergencyCheckpointManager(std::move(options), coordinator, std::move(transport)));
  m->layout_ = layout;
  CAIRN_ASSIGN_OR_RETURN(m->local_, orbax::OpenLocation(m->options_.local_directory));
  CAIRN_ASSIGN_OR_RETURN(m->persistent_, orbax::OpenLocation(m->options_.persistent_directory));
  // Deletions a crash interrupted (retention.h step 3).
  CAIRN_RETURN_IF_ERROR(RemoveInterruptedDeletions(m->local_, coordinator.is_primary() ? &m->persistent_ : nullptr)
                            .Annotate("emergency checkpointing: removing interrupted deletions"));
  // Temporary step directories of gone owners (layout/orbax/step.h step 6):
  // a save killed in either tier. Best effort, as in CheckpointManager's
  // open: each process sweeps its local directory, the primary the
  // persistent one (a later save of another step would not meet them).
  orbax::RemoveAbandonedTemporaries(m->local_).IgnoreError();
  if (coordinator.is_primary()) orbax::RemoveAbandonedTemporaries(m->persistent_).IgnoreError();
  // Where the run's tiers are, for `cairn info` (tier_info.h).
  CAIRN_RETURN_IF_ERROR(WriteRunRecords(m->local_, m->options_.local_directory, m->persistent_,
                                        m->options_.persistent_directory, coordinator.process_index(), n,
                                        m->options_.num_replicas)
                            .Annotate("emergency checkpointing: recording the run's directories"));
  const uint64_t budget = m->options_.save.memory_budget_bytes;
  m->budget_ = m->options_.budget != nullptr
                   ? m->options_.budget
                   : std::make_shared<engine::ByteBudget>(budget != 0 ? budget : engine::ByteBudget::kDefaultBytes);
  return m;
}

bool EmergencyCheckpointManager::ShouldSaveLocal(int64_t step) const {
  return step % options_.local_save_interval_steps == 0;
}

bool EmergencyCheckpointManager::ShouldSavePersistent(int64_t step) const {
  return step % options_.persistent_save_interval_steps == 0;
}

Result<bool> EmergencyCheckpointManager::Save(int64_t step, const std::vector<engine::SaveLeaf>& leaves,
                                              bool force, std::shared_ptr<void> hold) {
  // Step 1.
  CAIRN_RETURN_IF_ERROR(WaitUntilFinished());
  const bool local = force || ShouldSaveLocal(step);
  const bool persistent = force || ShouldSavePersistent(step);
  if (!local && !persistent) return false;
  const int p = coordinator_.process_index();
  std::unique_ptr<engine::PendingSave> local_save, persistent_save;
  Status local_status;
  // Step 2.
  if (local) {
    engine::SaveRequest r;
    r.directory = StepPath(local_, step);
    if (options_.at_point) {
      orbax::Location where = local_.Child(std::to_string(step));
      where.store = engine::NewPointReportingKvStore(
          local_.store, std::string(kStateItem),
          [hook = options_.at_point, step](std::string_view point) { hook(point, step); });
      r.location = where;
    }
    r.item_name = std::string(kStateItem);
    r.leaves = leaves;
    r.options = options_.save;
    r.local_tier.write_all_held_shards = true;
    r.options.compression = options_.local_compression.value_or(options_.save.compression);
    r.local_tier.own_process_index = p;
    // Chunks start on page boundaries: a restore from a RAM disk maps them.
    r.local_tier.ocdbt_value_alignment = kLocalValueAlignment;
    const std::string pm = std::string(kProcessMetadataItem) + "/";
    r.extra_files = {
        {pm + "global_process_metadata.json", options_.global_process_metadata_json.empty()
                                                  ? DefaultProcessMetadata(layout_.process_count)
                                                  : options_.global_process_metadata_json},
        {pm + "mesh_metadata.json", options_.mesh_metadata_json.empty() ? DefaultMeshMetadata(layout_.process_count)
                                                                         : options_.mesh_metadata_json},
        // Orbax marks each item of a step committed; it does not read the
        // marker back, so this is for the layout's sake.
        {pm + "commit_success.txt", "Checkpoint commit was successful to " + r.directory + "/" +
                                        std::string(kProcessMetadataItem)},
        {std::string(kLocalStepRecord), DumpJson(LocalStepRecordToJson(RecordFor(step, p, layout_, leaves)))},
    };
    // A failure here is this process's alone: it still takes part in the
    // persistent save's collectives and tells its peers (step 4).
    auto started = engine::StartSave(r, *alone_, budget_.get());
    if (started.ok()) local_save = std::move(*started);
    else local_status = started.status();
  }
  // Step 3.
  Status persistent_status;
  if (persistent) {
    engine::SaveRequest r;
    r.directory = StepPath(persistent_, step);
    r.item_name = std::string(kPersistentItem);
    r.leaves = leaves;
    r.options = options_.save;
    r.options.replica_parallel = false;
    auto started = engine::StartSave(r, coordinator_, budget_.get());
    if (started.ok()) persistent_save = std::move(*started);
    else persistent_status = started.status();
  }
  worker_ = std::thread([this, step, local, local_status, l = std::move(local_save),
                         ps = std::move(persistent_save), h = std::move(hold)]() mutable {
    Background(step, local, local_status, std::move(l), std::move(ps), std::move(h));
  });
  if (!persistent_status.ok()) {
    CAIRN_RETURN_IF_ERROR(WaitUntilFinished());
    return persistent_status;
  }
  return true;
}

void EmergencyCheckpointManager::Background(int64_t step, bool local_due, const Status& local_status,
                                            std::unique_ptr<engine::PendingSave> local,
                                            std::unique_ptr<engine::PendingSave> persistent,
                                            std::shared_ptr<void> hold) {
  Status saved;
  if (local_due && local) saved = local->Wait();
  else if (local_due) saved = local_status;
  // Step 4 (also after a failed save: the peers learn of it), while the
  // persistent write goes on.
  Status replicated;
  std::thread replication;
  if (local_due && options_.peer_copies > 0) {
    replication = std::thread([&] { replicated = Replicate(step, saved); });
  }
  bool committed = false;
  Status persisted;
  if (persistent) {
    persisted = persistent->Wait();
    committed = persisted.ok();
  }
  // Both writes have read every immutable shard.
  hold.reset();
  if (replication.joinable()) replication.join();
  Status status = !saved.ok() ? saved : !replicated.ok() ? replicated : persisted;
  // Step 5.
  Status kept = ApplyRetention(step, committed);
  if (status.ok()) status = kept;
  background_status_ = status;
}

Status EmergencyCheckpointManager::Replicate(int64_t step, const Status& local_status) {
  const int p = coordinator_.process_index();
  TransferOptions t{options_.transfer_piece_bytes, budget_.get(), options_.save.timeout, {}};
  if (options_.at_point) t.at_point = [hook = options_.at_point, step](std::string_view point) { hook(point, step); };
  const std::vector<int> peers = PeersOf(layout_, p, options_.peer_copies);
  const std::vector<int> sources = SourcesOf(layout_, p, options_.peer_copies);
  std::vector<Status> results(peers.size() + sources.size());
  std::vector<std::thread> threads;
  const orbax::Location src = local_.Child(std::to_string(step));
  for (size_t i = 0; i < peers.size(); ++i) {
    threads.emplace_back([&, i] {
      const std::string name = "local step " + std::to_string(step) + " of process " + std::to_string(p);
      results[i] = SendDirectory(*transport_, peers[i], kReplicationTag, name, src, local_status, t).status();
    });
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    threads.emplace_back([&, i] {
      const int o = sources[i];
      const std::string name = "local step " + std::to_string(step) + " of process " + std::to_string(o);
      results[peers.size() + i] =
          ReceiveDirectory(*transport_, o, kReplicationTag, name, PeerCopyLocation(local_, o, step), t).status();
    });
  }
  for (std::thread& th : threads) th.join();
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status EmergencyCheckpointManager::ApplyRetention(int64_t step, bool persistent_committed) {
  // Every step goes through engine::DeleteStep (retention.h): a crash part
  // way leaves each step whole or invisible.
  std::function<void(std::string_view)> at;
  if (options_.at_point) at = [hook = options_.at_point, step](std::string_view point) { hook(point, step); };
  Status status = KeepNewestSteps(local_, options_.local_max_to_keep, at);
  auto owners = orbax::ListEntries(local_.Child(kPeerCopiesDir));
  if (owners.ok()) {
    for (const ChildEntry& e : *owners) {
      if (e.kind != ChildEntry::Kind::kPrefix) continue;
      const orbax::Location copies = local_.Child(kPeerCopiesDir).Child(e.name);
      Status s = KeepNewestSteps(copies, options_.local_max_to_keep, at);
      if (status.ok()) status = s;
      // Receipts of this step and older ones have ended (Replicate joined):
      // what an interrupted one left can never be resumed.
      s = RemoveUnfinishedReceipts(copies, step);
      if (status.ok()) status = s;
    }
  }
  if (persistent_committed && coordinator_.is_primary()) {
    Status s = KeepNewestSteps(persistent_, options_.persistent_max_to_keep, at);
    if (status.ok()) status = s;
  }
  return status;
}

Status EmergencyCheckpointManager::WaitUntilFinished() {
  if (worker_.joinable()) worker_.join();
  Status s = background_status_;
  background_status_ = Status::OK();
  return s;
}

Status EmergencyCheckpointManager::Close() {
  Status sent = JoinRestoreSends();
  Status background = WaitUntilFinished();
  return background.ok() ? sent : background;
}

Result<std::pair<std::vector<Holding>, std::vector<int64_t>>> EmergencyCheckpointManager::Exchange(
    std::string_view what) {
  // Restore step 1.
  Status local_status;
  std::string mine;
  auto holdings = ListHoldings(local_);
  if (!holdings.ok()) {
    local_status = holdings.status();
    holdings = std::vector<Holding>();
  }
  Json persistent = Json::array();
  if (coordinator_.is_primary()) {
    auto steps = orbax::ListSteps(persistent_, orbax::StepNameFormat{});
    if (steps.ok()) {
      for (const orbax::StepInfo& s : *steps) persistent.push_back(s.step);
    } else if (steps.status().code() != StatusCode::kNotFound) {
      local_status = steps.status();
    }
  }
  mine = DumpJson({{"holdings", EncodeHoldings(*holdings)}, {"persistent", persistent}});
  const std::string name = "cairn/emergency/" + std::string(what) + "/holdings";
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator_, name + "/listed", local_status, options_.save.timeout));
  CAIRN_ASSIGN_OR_RETURN(auto all, coordinator_.AllGather(name, mine, options_.save.timeout));
  std::vector<Holding> gathered;
  std::vector<int64_t> persistent_steps;
  for (size_t i = 0; i < all.size(); ++i) {
    CAIRN_ASSIGN_OR_RETURN(Json j, ParseJson(all[i], "the holdings of process " + std::to_string(i)));
    CAIRN_ASSIGN_OR_RETURN(std::string encoded, GetStringField(j, "holdings"));
    CAIRN_ASSIGN_OR_RETURN(auto list, DecodeHoldings(encoded, static_cast<int>(i)));
    for (Holding& h : list) gathered.push_back(std::move(h));
    if (i == 0) {
      CAIRN_ASSIGN_OR_RETURN(const Json* steps, GetField(j, "persistent"));
      CAIRN_ASSIGN_OR_RETURN(persistent_steps, JsonToIntVector(*steps, "persistent steps"));
    }
  }
  return std::make_pair(std::move(gathered), std::move(persistent_steps));
}

Result<std::vector<int64_t>> EmergencyCheckpointManager::AllSteps() {
  WaitUntilFinished().IgnoreError();
  CAIRN_ASSIGN_OR_RETURN(auto exchanged, Exchange("steps"));
  auto& [holdings, persistent] = exchanged;
  std::set<int64_t> steps(persistent.begin(), persistent.end());
  std::set<int64_t> local;
  for (const Holding& h : holdings) local.insert(h.record.step);
  for (int64_t s : local) {
    std::map<int, LocalStepRecord> records;
    for (const Holding& h : holdings) {
      if (h.record.step == s) records.emplace(h.record.process_index, h.record);
    }
    if (CheckComplete(records).ok()) steps.insert(s);
  }
  return std::vector<int64_t>(steps.begin(), steps.end());
}

Result<std::optional<int64_t>> EmergencyCheckpointManager::LatestStep() {
  CAIRN_ASSIGN_OR_RETURN(auto steps, AllSteps());
  if (steps.empty()) return std::optional<int64_t>();
  return std::optional<int64_t>(steps.back());
}

}  // namespace cairn::emergency
