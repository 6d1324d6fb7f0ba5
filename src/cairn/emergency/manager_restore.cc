// The restore protocol of manager.h, as this file runs it (collective;
// PrepareRestore, then Restore). Healthy processes read their own steps
// while a process that lost its disk is still fetching: the only wait for
// the fetch is the agreement at the end.
//
//   1. Wait for this process's background work. Every process lists the
//      local steps and peer copies on its disk, the primary the persistent
//      steps; one AllGather ("restore/exchange").
//   2. ChooseStep (step_choice.h) on the gathered lists: the same step and
//      tier on every process. Persistent: go to 7 (read, agree).
//   3. PrepareRestore, local step: each process notes which owners' steps
//      are on its disk. One that holds none needs one step, to read the
//      tree's metadata (MetadataOwner). AllGather of these needs
//      ("restore/prepare/needs"); each need is given a holder. A holder
//      starts sending on a background thread (kept by the manager, joined
//      in 6) and returns at once; a requester receives the step into
//      `<local>/peer_restore/` before it returns (it needs the metadata).
//      A failed receipt is not agreed on here: the requester remembers it
//      (PreparedRestore::failure) and offers the newest persistent step's
//      metadata instead ("" when there is none). With an explicit `step`,
//      the processes agree on the fetch here instead and return its error
//      (a requested step is never replaced by another).
//   4. Restore: each process works out which saved boxes cover the boxes it
//      wants and whose steps hold them, and reads (or maps) at once every
//      box whose owner's step is on its disk. No collective comes before
//      this read, so it runs while a requester of 3 is still fetching.
//      A process whose 3 failed reads nothing. A copy whose bytes are
//      damaged (DataLoss: a chunk's checksum differs, a data file is short)
//      counts as missing, as for a lost host: its owner joins the needs of
//      5, fetched from another holder (never from the process itself).
//   5. AllGather of the owners still missing ("restore/read/needs"; empty
//      after a failure), transfers from their holders (as in 3, but joined
//      here, on tags of their own), then the read of those boxes.
//   6. Join this process's senders of 3; a failed send fails this process.
//   7. AgreeOnStatus ("restore/read"). On success, the report. On any
//      failure of any process, every process drops the mappings it made,
//      exchanges again and restores the newest persistent step (the same on
//      every process), or returns the agreed error when there is none.
//   `<local>/peer_restore/` is removed after 7 (mappings of its files stay
//   valid).
//
// Why this order: with the agreement on the fetch closing PrepareRestore,
// every process waited for the lost host's fetch and then all read at once;
// the critical path was the fetch plus everyone's read. Now it is the fetch
// plus the lost host's read of its fetched step alone. Where the processes
// share a few cores (a test machine standing for several hosts) the healthy
// processes' reads slow the fetch by about as much as they save; on real
// hosts they run on other cores.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "cairn/events.h"
#include "cairn/emergency/dir_transfer.h"
#include "cairn/emergency/manager.h"

namespace cairn::emergency {
namespace {

// Transfer tags of the restore: step 3's from kFirstFetchTag, step 5's from
// kFirstFetchTag + kFetchTagsPerPhase, so that a sender of step 3 still at
// work never shares a tag with a transfer of step 5.
constexpr int kFirstFetchTag = 2;
constexpr int kFetchTagsPerPhase = (PeerTransport::kMaxTransferTag - kFirstFetchTag) / 2;

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

using Clock = std::chrono::steady_clock;

// " in 1.234 s" since `start`, for the log.
std::string Took(Clock::time_point start) {
  char text[32];
  std::snprintf(text, sizeof(text), " in %.3f s", std::chrono::duration<double>(Clock::now() - start).count());
  return text;
}

// The owner whose step a process without any copy fetches to read the tree
// metadata: its own old step, else one of the same replica slot (the same
// shards), else the first.
int MetadataOwner(const StepChoice& choice, const ReplicaLayout& now, int process) {
  if (choice.holders.count(process)) return process;
  for (const auto& [owner, record] : choice.records) {
    const ReplicaLayout then{record.process_count, record.num_replicas};
    if (then.process_count == now.process_count && then.num_replicas == now.num_replicas &&
        then.SlotOf(owner) == now.SlotOf(process)) {
      return owner;
    }
  }
  return choice.holders.begin()->first;
}

StepChoice PersistentFallback(const std::vector<int64_t>& persistent, std::string reason) {
  StepChoice c;
  if (!persistent.empty()) {
    c.tier = StepChoice::Tier::kPersistent;
    c.step = *std::max_element(persistent.begin(), persistent.end());
    c.reason = "falling back to the newest persistent step " + std::to_string(c.step) + ": " + reason;
  } else {
    c.reason = "nothing to fall back to (no persistent step): " + reason;
  }
  return c;
}

}  // namespace

Status EmergencyCheckpointManager::Fetch(PreparedRestore& prepared, const std::vector<int>& owners,
                                         std::string_view phase, int first_tag, bool send_in_background) {
  const int me = coordinator_.process_index();
  const std::string name = "cairn/emergency/" + std::string(phase);
  Json mine(owners);
  CAIRN_ASSIGN_OR_RETURN(auto all, coordinator_.AllGather(name + "/needs", DumpJson(mine), options_.save.timeout));
  struct Transfer {
    int owner, holder, requester;
  };
  std::vector<Transfer> transfers;
  for (size_t q = 0; q < all.size(); ++q) {
    CAIRN_ASSIGN_OR_RETURN(Json j, ParseJson(all[q], "the needs of process " + std::to_string(q)));
    CAIRN_ASSIGN_OR_RETURN(auto needs, JsonToIntVector(j, "needs"));
    for (int64_t o : needs) {
      auto it = prepared.choice.holders.find(static_cast<int>(o));
      if (it == prepared.choice.holders.end() || it->second.empty()) {
        return InternalError(name + ": process " + std::to_string(q) + " needs owner " + std::to_string(o) +
                             ", which no process holds");
      }
      // Never from the requester itself: a process needs an owner it holds
      // only when its copy was damaged (step 4).
      std::vector<int> holders;
      for (int h : it->second) {
        if (h != static_cast<int>(q)) holders.push_back(h);
      }
      if (holders.empty()) {
        return DataLossError(name + ": process " + std::to_string(q) + "'s copy of process " + std::to_string(o) +
                             "'s step " + std::to_string(prepared.choice.step) +
                             " is damaged and no other process holds one");
      }
      transfers.push_back({static_cast<int>(o), holders[(q + transfers.size()) % holders.size()], static_cast<int>(q)});
    }
  }
  if (transfers.empty()) return Status::OK();
  // Every process computed the same transfers, so each fails alike here.
  if (transport_ == nullptr) return FailedPreconditionError(name + ": fetching from peers needs a transport");
  TransferOptions t{options_.transfer_piece_bytes, budget_.get(), options_.save.timeout, {}};
  const int64_t step = prepared.choice.step;
  const Clock::time_point start = Clock::now();
  std::vector<Status> results(transfers.size());
  std::vector<uint64_t> bytes(transfers.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& tr = transfers[i];
    if (tr.holder != me && tr.requester != me) continue;
    const int tag = first_tag + static_cast<int>(i % kFetchTagsPerPhase);
    const std::string what = "step " + std::to_string(step) + " of process " + std::to_string(tr.owner) +
                             " for process " + std::to_string(tr.requester);
    if (tr.holder == me) {
      auto src = prepared.on_disk.find(tr.owner);
      Status have = src == prepared.on_disk.end()
                        ? InternalError("process " + std::to_string(me) + " lists but lacks " + what)
                        : Status::OK();
      const orbax::Location from = have.ok() ? src->second : local_;
      const int requester = tr.requester;
      if (send_in_background) {
        // Step 3: joined in step 6 (JoinRestoreSends).
        restore_sends_.emplace_back();
        PendingSend& pending = restore_sends_.back();
        std::shared_ptr<PeerTransport> transport = transport_;
        pending.thread = std::thread([&pending, transport, requester, tag, what, from, have, t] {
          pending.result = SendDirectory(*transport, requester, tag, what, from, have, t).status();
        });
        continue;
      }
      threads.emplace_back([&, i, requester, tag, what, from, have] {
        results[i] = SendDirectory(*transport_, requester, tag, what, from, have, t).status();
      });
    } else {
      const orbax::Location to = local_.Child(kPeerRestoreDir)
                                     .Child("process_" + std::to_string(tr.owner))
                                     .Child(std::to_string(step));
      threads.emplace_back([&, i, tag, what, to] {
        auto got = ReceiveDirectory(*transport_, transfers[i].holder, tag, what, to, t);
        results[i] = got.status();
        if (got.ok()) bytes[i] = *got;
      });
    }
  }
  for (std::thread& th : threads) th.join();
  const std::string took = Took(start);
  Status local;
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& tr = transfers[i];
    if (!results[i].ok() && local.ok()) local = results[i];
    if (tr.requester == me && results[i].ok()) {
      prepared.on_disk[tr.owner] = local_.Child(kPeerRestoreDir)
                                       .Child("process_" + std::to_string(tr.owner))
                                       .Child(std::to_string(step));
      prepared.on_disk_source[tr.owner] = "fetched from process " + std::to_string(tr.holder);
      prepared.bytes_fetched += bytes[i];
      prepared.log.push_back("fetched process " + std::to_string(tr.owner) + "'s step " + std::to_string(step) +
                             " from process " + std::to_string(tr.holder) + " (" + Bytes(bytes[i]) + took + ")");
    }
  }
  return local;
}

Status EmergencyCheckpointManager::JoinRestoreSends() {
  Status first;
  for (PendingSend& s : restore_sends_) {
    if (s.thread.joinable()) s.thread.join();
    if (!s.result.ok() && first.ok()) first = s.result;
  }
  restore_sends_.clear();
  return first;
}

Result<PreparedRestore> EmergencyCheckpointManager::PrepareRestore(std::optional<int64_t> step) {
  PreparedRestore prepared;
  Status background = WaitUntilFinished();
  if (!background.ok()) prepared.log.push_back("the last save had failed: " + std::string(background.message()));
  // Senders of an earlier PrepareRestore that never reached Restore.
  JoinRestoreSends().IgnoreError();
  // Steps 1-2.
  CAIRN_ASSIGN_OR_RETURN(auto exchanged, Exchange("restore"));
  auto& [holdings, persistent] = exchanged;
  CAIRN_ASSIGN_OR_RETURN(prepared.choice, ChooseStep(holdings, persistent, step));
  prepared.log.push_back(prepared.choice.reason);
  const int me = coordinator_.process_index();
  if (prepared.choice.tier == StepChoice::Tier::kLocal) {
    // Step 3: what this host holds, then one step for the metadata.
    for (const Holding& h : holdings) {
      if (h.holder != me || h.record.step != prepared.choice.step) continue;
      const int o = h.record.process_index;
      if (prepared.on_disk.count(o) && h.kind == Holding::Kind::kPeerCopy) continue;
      prepared.on_disk[o] = HoldingLocation(local_, h);
      prepared.on_disk_source[o] = h.kind == Holding::Kind::kOwn ? "this host's local step" : "a peer copy on this host";
    }
    std::vector<int> needs;
    if (prepared.on_disk.empty()) needs.push_back(MetadataOwner(prepared.choice, layout_, me));
    Status fetched = Fetch(prepared, needs, "restore/prepare", kFirstFetchTag, /*send_in_background=*/!step);
    if (step) {
      // A requested step: agree now, and fail rather than restore another.
      fetched = AgreeOnStatus(coordinator_, "cairn/emergency/restore/prepare/fetched", fetched, options_.save.timeout);
      if (!fetched.ok()) {
        JoinRestoreSends().IgnoreError();
        return fetched;
      }
    } else if (!fetched.ok()) {
      // Not agreed on: the others read meanwhile and learn of it in step 7.
      prepared.failure = fetched;
      prepared.on_disk.clear();
      prepared.log.push_back("process " + std::to_string(me) + " could not fetch local step " +
                             std::to_string(prepared.choice.step) + " (" + std::string(fetched.message()) +
                             "): every process will restore the newest persistent step instead");
      EmitEvent(EventLevel::kWarning, "emergency restore falls back to the persistent tier: " + prepared.log.back());
    }
  }
  switch (prepared.choice.tier) {
    case StepChoice::Tier::kLocal:
      if (!prepared.on_disk.empty()) {
        prepared.metadata_item = prepared.on_disk.begin()->second.Child(kStateItem).Path();
      } else if (!persistent.empty()) {
        // Step 3 failed here: the tree of the step every process falls back to.
        const int64_t newest = *std::max_element(persistent.begin(), persistent.end());
        prepared.metadata_item = persistent_.Child(std::to_string(newest)).Child("default").Path();
      }
      break;
    case StepChoice::Tier::kPersistent:
      prepared.metadata_item =
          persistent_.Child(std::to_string(prepared.choice.step)).Child("default").Path();
      break;
    case StepChoice::Tier::kNone:
      break;
  }
  return prepared;
}

Result<RestoreReport> EmergencyCheckpointManager::RestorePersistent(
    int64_t step, const std::vector<engine::ArrayToRestore>& arrays, std::vector<std::string> log) {
  RestoreReport report;
  report.tier = StepChoice::Tier::kPersistent;
  report.step = step;
  report.log = std::move(log);
  engine::RestoreRequest r;
  r.directory = persistent_.Child(std::to_string(step)).Path();
  r.item_name = "default";
  r.arrays = arrays;
  // Every process restores the persistent step together (a collective
  // choice, or the agreed fallback): the replicas of a host then read and
  // decode each chunk they share once (restore_host_share.h), not once per
  // replica.
  r.coordinator = &coordinator_;
  engine::RestoreStats stats;
  r.stats = &stats;
  // After a failed local restore: drop what it mapped (the persistent step
  // fills or maps the boxes afresh).
  for (const engine::ArrayToRestore& a : arrays) {
    for (const engine::BoxToRestore& b : a.boxes) {
      if (b.mapped != nullptr) b.mapped->reset();
    }
  }
  const Clock::time_point start = Clock::now();
  Status s = engine::Restore(r);
  const std::string took = Took(start);
  for (const engine::ArrayToRestore& a : arrays) {
    if (!a.dtype) continue;
    for (const engine::BoxToRestore& b : a.boxes) {
      const uint64_t bytes = static_cast<uint64_t>(b.box.num_elements()) * DTypeSize(*a.dtype);
      report.bytes_from_persistent += bytes;
      if (b.mapped != nullptr && *b.mapped != nullptr) report.bytes_mapped += bytes;
    }
  }
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator_, "cairn/emergency/restore/persistent", s, options_.save.timeout));
  report.log.push_back("read step " + std::to_string(step) + " from the persistent tier " + r.directory + " (" +
                       Bytes(report.bytes_from_persistent) + ")" + took + "; chunks: " +
                       std::to_string(stats.chunks_read) + " read for this process alone, " +
                       std::to_string(stats.chunks_decoded_for_host) + " decoded for this host, " +
                       std::to_string(stats.chunks_from_host) + " taken from another process's decoding, " +
                       std::to_string(stats.chunks_mapped_from_host) +
                       " of these two mapped from the host's shared file, not copied");
  return report;
}

Result<RestoreReport> EmergencyCheckpointManager::Restore(PreparedRestore& prepared,
                                                          std::vector<engine::ArrayToRestore> arrays) {
  const StepChoice& choice = prepared.choice;
  if (choice.tier == StepChoice::Tier::kNone) return NotFoundError("nothing to restore: " + choice.reason);
  if (choice.tier == StepChoice::Tier::kPersistent) {
    // Step 7 only (a persistent choice started no senders).
    return RestorePersistent(choice.step, arrays, prepared.log);
  }
  // Step 4: which saved boxes cover the wanted ones, and from which owner.
  struct Read {
    int owner;
    size_t array;
    engine::BoxToRestore box;
    uint64_t bytes;
  };
  std::vector<Read> reads;
  std::set<int> needs;
  Status local = prepared.failure;
  for (size_t ai = 0; ai < arrays.size() && local.ok(); ++ai) {
    engine::ArrayToRestore& a = arrays[ai];
    std::vector<std::pair<Box, std::vector<int>>> stored;  // distinct box -> owners
    const StoredArray* info = nullptr;
    for (const auto& [owner, record] : choice.records) {
      auto it = record.arrays.find(a.param);
      if (it == record.arrays.end()) continue;
      info = &it->second;
      for (const Box& b : it->second.boxes) {
        auto s = std::find_if(stored.begin(), stored.end(), [&](const auto& e) { return e.first == b; });
        if (s == stored.end()) stored.push_back({b, {owner}});
        else s->second.push_back(owner);
      }
    }
    if (info == nullptr) {
      local = NotFoundError("array `" + a.param + "` is not in local step " + std::to_string(choice.step));
      break;
    }
    auto dtype = ParseDTypeName(info->dtype);
    if (!dtype.ok()) { local = dtype.status(); break; }
    if (a.dtype && *a.dtype != *dtype) {
      local = InvalidArgumentError("restoring `" + a.param + "`: stored dtype " + info->dtype + ", requested " +
                                   std::string(DTypeName(*a.dtype)));
      break;
    }
    const size_t elem = DTypeSize(*dtype);
    for (const engine::BoxToRestore& want : a.boxes) {
      if (want.box.rank() != info->shape.size() || !Box::FromShape(info->shape).Contains(want.box)) {
        local = InvalidArgumentError("restoring `" + a.param + "`: box " + want.box.ToString() +
                                     " lies outside the array");
        break;
      }
      const std::vector<Index> strides =
          want.byte_strides.empty() ? CStrides(want.box.shape, elem) : want.byte_strides;
      for (const auto& [box, owners] : stored) {
        const Box part = Intersect(want.box, box);
        if (part.empty()) continue;
        int owner = -1;
        for (int o : owners) {
          if (prepared.on_disk.count(o)) { owner = o; break; }
        }
        if (owner < 0) {
          owner = owners.front();
          needs.insert(owner);
        }
        uint8_t* dst = static_cast<uint8_t*>(want.data);
        for (size_t d = 0; d < part.rank(); ++d) dst += (part.origin[d] - want.box.origin[d]) * strides[d];
        // A wanted box that is one saved box whole may be mapped instead of
        // read (engine/restore.h BoxToRestore::mapped).
        std::shared_ptr<MappedBytes>* mapped = part == want.box ? want.mapped : nullptr;
        reads.push_back({owner, ai, {part, dst, strides, mapped}, static_cast<uint64_t>(part.num_elements()) * elem});
      }
    }
  }
  if (local.ok()) {
    prepared.log.push_back("process " + std::to_string(coordinator_.process_index()) + " reads " +
                           std::to_string(reads.size()) + " boxes from local step " + std::to_string(choice.step));
  }
  RestoreReport report;
  report.tier = StepChoice::Tier::kLocal;
  report.step = choice.step;
  // Reads the boxes whose owner's step is on this disk and not yet read.
  std::set<int> done;
  bool fetched_any = false;  // step 5 ran: a damaged copy now fails the read
  auto read_on_disk = [&]() -> Status {
    std::map<int, engine::RestoreRequest> requests;
    for (const Read& r : reads) {
      if (done.count(r.owner) || !prepared.on_disk.count(r.owner)) continue;
      engine::RestoreRequest& req = requests[r.owner];
      if (req.arrays.empty()) {
        req.directory = prepared.on_disk[r.owner].Path();
        req.item_name = std::string(kStateItem);
        for (const auto& a : arrays) req.arrays.push_back({a.param, a.dtype, {}, {}});
      }
      req.arrays[r.array].boxes.push_back(r.box);
      const bool fetched_here = prepared.on_disk_source[r.owner].rfind("fetched", 0) == 0;
      (fetched_here ? report.bytes_from_peers : report.bytes_from_own_disk) += r.bytes;
    }
    for (auto& [owner, req] : requests) {
      done.insert(owner);
      for (auto it = req.arrays.begin(); it != req.arrays.end();) {
        it = it->boxes.empty() ? req.arrays.erase(it) : it + 1;
      }
      const Clock::time_point start = Clock::now();
      Status read = engine::Restore(req);
      if (read.code() == StatusCode::kDataLoss && !fetched_any) {
        // A damaged copy (a checksum that differs, a short file) counts as
        // missing: its boxes are fetched from another holder in step 5.
        prepared.log.push_back("process " + std::to_string(coordinator_.process_index()) + "'s copy of process " +
                               std::to_string(owner) + "'s step " + std::to_string(choice.step) + " (" +
                               prepared.on_disk_source[owner] + ") is damaged, counted as missing: " +
                               std::string(read.message()));
        prepared.on_disk.erase(owner);
        done.erase(owner);
        needs.insert(owner);
        for (const Read& r : reads) {
          if (r.owner == owner && r.box.mapped != nullptr) r.box.mapped->reset();
        }
        continue;
      }
      CAIRN_RETURN_IF_ERROR(read);
      prepared.log.push_back("read process " + std::to_string(owner) + "'s step " + std::to_string(choice.step) +
                             " from " + prepared.on_disk_source[owner] + " (" + req.directory + ")" + Took(start));
    }
    return Status::OK();
  };
  // Step 4: no collective before this read.
  if (local.ok()) local = read_on_disk();
  fetched_any = true;
  // Step 5 (collective even after a failure, with no needs then).
  const std::vector<int> missing = local.ok() ? std::vector<int>(needs.begin(), needs.end()) : std::vector<int>();
  Status fetched = Fetch(prepared, missing, "restore/read", kFirstFetchTag + kFetchTagsPerPhase,
                         /*send_in_background=*/false);
  if (local.ok()) local = fetched;
  if (local.ok()) local = read_on_disk();
  report.bytes_fetched = prepared.bytes_fetched;
  // Step 6.
  Status sent = JoinRestoreSends();
  if (local.ok()) local = sent;
  // Step 7.
  Status all = AgreeOnStatus(coordinator_, "cairn/emergency/restore/read", local, options_.save.timeout);
  const orbax::Location staging = local_.Child(kPeerRestoreDir);
  staging.store->DeletePrefix(staging.prefix).IgnoreError();
  if (all.ok()) {
    for (const Read& r : reads) {
      if (r.box.mapped != nullptr && *r.box.mapped != nullptr) report.bytes_mapped += r.bytes;
    }
    report.log = prepared.log;
    report.log.push_back("bytes: " + Bytes(report.bytes_from_own_disk) + " from this host's disk, " +
                         Bytes(report.bytes_from_peers) + " from steps fetched from peers (" +
                         Bytes(report.bytes_fetched) + " transferred); " + Bytes(report.bytes_mapped) +
                         " of them mapped from a RAM disk, not copied");
    return report;
  }
  CAIRN_ASSIGN_OR_RETURN(auto exchanged, Exchange("restore/fallback"));
  StepChoice fallback = PersistentFallback(exchanged.second, std::string(all.message()));
  prepared.log.push_back(fallback.reason);
  if (fallback.tier != StepChoice::Tier::kPersistent) return all;
  EmitEvent(EventLevel::kWarning, "emergency restore of local step " + std::to_string(prepared.choice.step) + " failed, " +
                                      fallback.reason);
  return RestorePersistent(fallback.step, arrays, prepared.log);
}

Result<RestoreReport> EmergencyCheckpointManager::RestoreStep(std::optional<int64_t> step,
                                                              std::vector<engine::ArrayToRestore> arrays) {
  CAIRN_ASSIGN_OR_RETURN(PreparedRestore prepared, PrepareRestore(step));
  return Restore(prepared, std::move(arrays));
}

}  // namespace cairn::emergency
