// Implements the commit protocol whose numbered steps are at the top of
// step.h (BeginCommit, FinishCommit, AbandonCommit and the pending
// directories of a save), through the KvStore of a Location only. Owner
// records and leases: save_owner.h.
#include <algorithm>

#include "cairn/events.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::orbax {
namespace {

Status CheckSaveId(std::string_view id) {
  bool ok = !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  });
  if (!ok) {
    return InvalidArgumentError("save id `" + std::string(id.substr(0, 80)) +
                                "` must be 1 to 64 letters, digits or '_'");
  }
  return Status::OK();
}

std::string AsString(const Buffer& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

// The owner record at `key`: nullopt when absent, DataLoss when it is not one.
Result<std::optional<std::pair<OwnerRecord, std::string>>> ReadOwner(KvStore& store, const std::string& key) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> got, store.Get(key));
  if (!got.has_value()) return std::optional<std::pair<OwnerRecord, std::string>>();
  if (got->size() > kMaxOwnerRecordBytes) return DataLossError(store.Describe(key) + ": owner record too large");
  std::string bytes = AsString(*got);
  CAIRN_ASSIGN_OR_RETURN(OwnerRecord r, ParseOwnerRecord(bytes, store.Describe(key)));
  return std::optional<std::pair<OwnerRecord, std::string>>(std::pair{std::move(r), std::move(bytes)});
}

// Step 2a: removes the `<name>.orbax-checkpoint-tmp*` siblings of `final`
// whose owner is gone (or that have no owner record: Orbax's own, older
// cairn's). Live saves' directories stay.
Status RemoveLeftovers(const Location& final_location, std::string_view save_id) {
  const Location parent = final_location.Parent();
  const std::string tmp_stem = final_location.Name() + std::string(kTmpSuffix);
  const std::string own_tmp = TmpName(final_location.Name(), save_id);
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> siblings, ListEntries(parent));
  KvStore& store = *final_location.store;
  const int64_t now = NowNanos();
  for (const ChildEntry& e : siblings) {
    if (e.name != tmp_stem && e.name.rfind(tmp_stem + "-", 0) != 0) continue;
    const std::string where = parent.Child(e.name).Path();
    Status removed;
    if (e.kind == ChildEntry::Kind::kPrefix) {
      auto owner = ReadOwner(store, parent.Child(e.name).Key(kOwnerRecordFile));
      if (owner.ok() && owner->has_value()) {
        const OwnerRecord& r = (*owner)->first;
        const bool own_again = e.name == own_tmp && r.process.SameProcessAs(ThisProcess());
        if (own_again) (void)StopRenewing(where);  // this save id begun again here
        if (!own_again && !OwnerGoneReason(r, now).has_value()) continue;  // a live save's
      } else if (!owner.ok() && owner.status().code() != StatusCode::kDataLoss) {
        return owner.status().Annotate("reading the owner of " + where);
      }
      removed = store.DeletePrefix(parent.Key(e.name) + "/");
    } else if (e.kind == ChildEntry::Kind::kKey) {
      removed = store.Delete(parent.Key(e.name));
    } else {
      continue;  // a symlink or special file: never followed, left alone
    }
    if (!removed.ok() && HasPrefix(parent, e.name)) return removed.Annotate("removing leftover " + where);
  }
  return Status::OK();
}

// Deletes every key below `loc` except `keep`.
Status DeleteAllBut(const Location& loc, const std::string& keep) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> keys, loc.store->List(loc.prefix));
  for (const KeyInfo& k : keys) {
    if (k.key != keep) CAIRN_RETURN_IF_ERROR(loc.store->Delete(k.key));
  }
  return Status::OK();
}

std::string PublishedByAnother(const PendingCommit& p) {
  return "checkpoint " + p.final_location.Path() + " was published by another save while this one (save " +
         p.save_id + ") was writing it; this save's files were removed";
}

// Steps 2b-2d (in place): claims `<final>` with this save's owner record.
Result<PendingCommit> BeginInPlace(const Location& final_location, std::string_view save_id) {
  KvStore& store = *final_location.store;
  const std::string claim = final_location.Key(kOwnerRecordFile);
  StartingSave starting{std::string(save_id)};
  const std::string mine = EmitOwnerRecord(NewOwnerRecord(save_id));
  bool claimed = false;
  bool unanswered = false;
  for (int attempt = 0; attempt < 4 && !claimed; ++attempt) {
    Result<bool> put = store.PutIfAbsent(claim, AsBytes(mine));
    // A conditional write is never resent by the store (it cannot tell
    // whether an unanswered one was applied): unanswered, it is tried again
    // here, and an earlier attempt that landed after all holds the claim
    // (step 2d then sees a marker as for any claim).
    if (!put.ok() && put.status().code() == StatusCode::kUnavailable && attempt + 1 < 4) {
      unanswered = true;
      continue;
    }
    CAIRN_ASSIGN_OR_RETURN(claimed, std::move(put));
    if (claimed) break;
    if (unanswered) {
      CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> there, store.Get(claim));
      if (there.has_value() && AsString(*there) == mine) {
        claimed = true;
        break;
      }
    }
    if (HasKey(final_location, kCommitSuccessFile)) {
      return AlreadyExistsError("checkpoint directory " + final_location.Path() + " already exists");
    }
    auto owner = ReadOwner(store, claim);
    if (!owner.ok() && owner.status().code() != StatusCode::kDataLoss) return owner.status();
    std::optional<Buffer> old;
    if (owner.ok()) {
      if (!owner->has_value()) continue;  // removed meanwhile: claim again
      const OwnerRecord& r = (*owner)->first;
      if (!OwnerGoneReason(r, NowNanos()).has_value()) {
        return AlreadyExistsError("checkpoint " + final_location.Path() + " is being written by another live save (" +
                                  DescribeOwner(r) + "); this save wrote nothing there");
      }
      old = Buffer::CopyOf((*owner)->second);
    } else {
      CAIRN_ASSIGN_OR_RETURN(old, store.Get(claim));  // not a record: taken over as it is
      if (!old.has_value()) continue;
    }
    // Step 2c: the owner is gone; take its claim over (only if unchanged).
    CAIRN_ASSIGN_OR_RETURN(claimed, store.CompareAndPut(claim, old->view(), AsBytes(mine)));
  }
  if (!claimed) {
    return AlreadyExistsError("checkpoint " + final_location.Path() + " is being claimed by other saves");
  }
  // Step 2d: ours now. A marker means it was published; other keys are what
  // a gone save left.
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> existing, ListEntries(final_location));
  if (std::any_of(existing.begin(), existing.end(), [](const ChildEntry& e) {
        return e.kind == ChildEntry::Kind::kKey && e.name == kCommitSuccessFile;
      })) {
    CAIRN_RETURN_IF_ERROR(store.Delete(claim));
    return AlreadyExistsError("checkpoint directory " + final_location.Path() + " already exists");
  }
  if (std::any_of(existing.begin(), existing.end(), [](const ChildEntry& e) { return e.name != kOwnerRecordFile; })) {
    CAIRN_RETURN_IF_ERROR(
        DeleteAllBut(final_location, claim).Annotate("removing the unfinished save at " + final_location.Path()));
  }
  StartRenewing(final_location.Path(), final_location.store, claim, mine, /*compare_and_swap=*/true);
  return PendingCommitFor(final_location, save_id);
}

}  // namespace

PendingCommit PendingCommitFor(const Location& final_location, std::string_view save_id) {
  PendingCommit p;
  p.final_location = final_location;
  p.save_id = std::string(save_id);
  if (final_location.commits_in_place) {
    p.location = final_location;
    p.commit = PrefixCommit{final_location.prefix, final_location.prefix, /*in_place=*/true};
    return p;
  }
  p.location = final_location.Parent().Child(TmpName(final_location.Name(), save_id));
  p.commit = PrefixCommit{final_location.prefix, p.location.prefix, /*in_place=*/false};
  return p;
}

Result<PendingCommit> BeginCommit(const Location& final_location, std::string_view save_id) {
  CAIRN_RETURN_IF_ERROR(CheckSaveId(save_id));
  if (final_location.prefix.empty()) {
    return InvalidArgumentError("cannot commit " + final_location.Path() +
                                ": it is the root of its store (open its parent)");
  }
  if (final_location.commits_in_place) return BeginInPlace(final_location, save_id);
  // Step 2: refuse an existing checkpoint before touching anything.
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> existing, ListEntries(final_location));
  if (!existing.empty()) {
    return AlreadyExistsError("checkpoint directory " + final_location.Path() + " already exists");
  }
  CAIRN_RETURN_IF_ERROR(RemoveLeftovers(final_location, save_id));
  // Step 2b: the temporary directory appears holding its owner record.
  PendingCommit p = PendingCommitFor(final_location, save_id);
  StartingSave starting{std::string(save_id)};
  const std::string mine = EmitOwnerRecord(NewOwnerRecord(save_id));
  CAIRN_ASSIGN_OR_RETURN(bool created,
                         final_location.store->CreatePrefixHolding(p.location.prefix, kOwnerRecordFile, AsBytes(mine)));
  if (!created) {
    return AlreadyExistsError("beginning " + final_location.Path() + ": the temporary directory " +
                              p.location.Path() + " of save " + std::string(save_id) +
                              " exists and belongs to a live save");
  }
  StartRenewing(p.location.Path(), final_location.store, p.location.Key(kOwnerRecordFile), mine,
                /*compare_and_swap=*/false);
  auto begun = final_location.store->BeginPrefixCommit(final_location.prefix, p.location.prefix);
  if (!begun.ok()) {
    AbandonCommit(p);
    return begun.status();
  }
  p.commit = *begun;
  p.location.prefix = p.commit.pending_prefix;
  return p;
}

Result<PendingCommit> FindPendingCommit(const Location& final_location) {
  // In place, every save writes below the final directory itself.
  if (final_location.commits_in_place) return PendingCommitFor(final_location, "");
  const Location parent = final_location.Parent();
  const std::string stem = final_location.Name() + std::string(kTmpSuffix) + "-";
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> siblings, ListEntries(parent));
  std::vector<std::string> ids;
  for (const ChildEntry& e : siblings) {
    if (e.kind == ChildEntry::Kind::kPrefix && e.name.rfind(stem, 0) == 0) ids.push_back(e.name.substr(stem.size()));
  }
  if (ids.empty()) return NotFoundError("no save of " + final_location.Path() + " is pending");
  if (ids.size() > 1) {
    return FailedPreconditionError(std::to_string(ids.size()) + " saves of " + final_location.Path() +
                                   " are pending; pass the save id to tell them apart");
  }
  return PendingCommitFor(final_location, ids[0]);
}

Status FinishCommit(const PendingCommit& pending) {
  const Location& final_location = pending.final_location;
  KvStore& store = *final_location.store;
  const std::string where = "committing " + final_location.Path();
  const std::string record_key = pending.location.Key(kOwnerRecordFile);
  // Step 4a: no more renewals; the owner record must still be this save's.
  const StoppedLease lease = StopRenewing(pending.location.Path());
  if (lease.registered) {
    auto now = store.Get(record_key);
    if (!now.ok()) return now.status().Annotate(where);
    if (lease.lost || !now->has_value() || AsString(**now) != lease.record_bytes) {
      if (!final_location.commits_in_place) (void)store.DeletePrefix(pending.location.prefix);
      return FailedPreconditionError(where + ": another save took over this save's directory " + pending.location.Path() +
                          " (its lease had expired); nothing was published by this save");
    }
  }
  // Step 4b: marker, durability, publication (the store's part).
  const std::string marker = "Checkpoint commit was successful to " + final_location.Path();
  Status published = store.FinishPrefixCommit(pending.commit, kCommitSuccessFile, AsBytes(marker));
  if (published.code() == StatusCode::kAlreadyExists) {
    // Step 4c: the loser removes what it wrote.
    if (final_location.commits_in_place) {
      if (lease.registered) (void)store.Delete(record_key);
    } else {
      (void)store.DeletePrefix(pending.location.prefix);
    }
    return AlreadyExistsError(PublishedByAnother(pending) + " (" + std::string(published.message()) + ")");
  }
  CAIRN_RETURN_IF_ERROR(published.Annotate(where));
  // Step 4d: the published step keeps no owner record (an error here comes
  // after publication: the step is whole, a stray record is ignored).
  const std::string published_record = final_location.Key(kOwnerRecordFile);
  const std::string removing = where + ": published, but removing its owner record failed";
  if (lease.registered) return store.Delete(published_record).Annotate(removing);
  auto owner = ReadOwner(store, published_record);
  if (owner.ok() && owner->has_value() && (*owner)->first.save_id == pending.save_id) {
    return store.Delete(published_record).Annotate(removing);
  }
  return Status::OK();
}

Status RemoveAbandonedTemporaries(const Location& root, std::string_view keep) {
  if (root.commits_in_place) return Status::OK();
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, ListEntries(root));
  KvStore& store = *root.store;
  const int64_t now = NowNanos();
  Status first;
  for (const ChildEntry& e : entries) {
    // Step 6a.
    if (e.kind != ChildEntry::Kind::kPrefix || !IsTmpName(e.name) || e.name == keep) continue;
    const Location tmp = root.Child(e.name);
    auto got = store.Get(tmp.Key(kOwnerRecordFile));
    if (!got.ok()) {
      if (first.ok()) first = got.status().Annotate("reading the owner of " + tmp.Path());
      continue;
    }
    if (!got->has_value() || (*got)->size() > kMaxOwnerRecordBytes) continue;  // 6c: no record
    auto owner = ParseOwnerRecord(AsString(**got), store.Describe(tmp.Key(kOwnerRecordFile)));
    if (!owner.ok()) continue;  // 6c: not a record cairn can read
    // Step 6b.
    const std::optional<std::string> gone = OwnerGoneReason(*owner, now);
    if (!gone.has_value()) continue;
    Status removed = store.DeletePrefix(tmp.prefix);
    if (!removed.ok() && first.ok()) first = removed.Annotate("removing the abandoned temporary directory " + tmp.Path());
    if (removed.ok()) {
      EmitEvent(EventLevel::kWarning, "dropped " + tmp.Path() + ", left by an interrupted save that never committed (" +
                                          *gone + ")");
    }
  }
  return first;
}

Status ResumeCommit(const PendingCommit& pending) {
  const std::string what = "resuming the save " + pending.save_id + " of " + pending.final_location.Path();
  if (pending.final_location.commits_in_place) {
    return FailedPreconditionError(what + ": a store that commits in place keeps no pending directory to resume");
  }
  CAIRN_RETURN_IF_ERROR(CheckSaveId(pending.save_id));
  KvStore& store = *pending.final_location.store;
  const std::string key = pending.location.Key(kOwnerRecordFile);
  CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> got, store.Get(key));
  // A record that does not parse is no owner's: taken over like a gone one.
  Result<OwnerRecord> owner = got.has_value() && got->size() <= kMaxOwnerRecordBytes
                                  ? ParseOwnerRecord(AsString(*got), store.Describe(key))
                                  : Result<OwnerRecord>(NotFoundError("no owner record"));
  // This very save, left by this process (a conversion interrupted and run
  // again in one Python process): IsLiveHere cannot tell, since the step's
  // own record, taken over a moment ago, shares the save id of its items'.
  const bool left_here = owner.ok() && owner->save_id == pending.save_id &&
                         owner->process.SameProcessAs(ThisProcess()) &&
                         !IsRenewedHere(pending.location.Path());
  if (owner.ok() && !left_here && !OwnerGoneReason(*owner, NowNanos()).has_value()) {
    return AlreadyExistsError(what + ": " + pending.location.Path() + " is being written by another live save (" +
                              DescribeOwner(*owner) + ")");
  }
  StartingSave starting{pending.save_id};
  const std::string mine = EmitOwnerRecord(NewOwnerRecord(pending.save_id));
  CAIRN_RETURN_IF_ERROR(store.Put(key, AsBytes(mine)).Annotate(what + ": writing its owner record"));
  StartRenewing(pending.location.Path(), pending.final_location.store, key, mine, /*compare_and_swap=*/false);
  return Status::OK();
}

void AbandonCommit(const PendingCommit& pending) {
  StopRenewingUnder(pending.location.Path());  // its items' leases
  const StoppedLease lease = StopRenewing(pending.location.Path());
  KvStore& store = *pending.final_location.store;
  if (!pending.final_location.commits_in_place) {
    (void)store.DeletePrefix(pending.location.prefix);
    return;
  }
  if (!lease.registered || lease.lost) return;  // not (or no longer) this save's
  const std::string claim = pending.final_location.Key(kOwnerRecordFile);
  (void)DeleteAllBut(pending.final_location, claim);
  (void)store.Delete(claim);
}

}  // namespace cairn::orbax
