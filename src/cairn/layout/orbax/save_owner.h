// Owner records and leases of saves in progress (the owner part of the
// commit protocol in step.h, steps 1a and 5).
//
// Every save's temporary directory (stores that rename) or final directory
// (stores that commit in place) holds `.cairn-save-owner.json` from the
// moment it exists until the step is published:
//   {"save_id", "host", "boot_id", "pid_ns", "pid", "start_ticks",
//    "lease_expires_unix_ns"}
// The owning process renews the lease (a fresh expiry, now + SaveLease())
// every SaveLease()/6 while the save runs, from one background thread per
// process; on stores with a compare-and-swap it renews with it, so an owner
// whose record was taken over learns it at the next renewal.
//
// An owner is gone (OwnerGoneReason), and its directory may be removed by
// another save, when:
//   a. its lease expired (wall clock of the reader; hosts' clocks must
//      agree to well within a lease), or
//   b. it ran on this machine (same host, boot id and pid namespace) and its
//      pid is free or held by a process with another start time, or
//   c. it is this very process and the save is not live here any more
//      (failed or abandoned without removing its directory).
// Nothing else removes a directory that has an owner record.
//
// Thread safety: all functions may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/kvstore/kvstore.h"
#include "cairn/util/process_identity.h"
#include "cairn/result.h"

namespace cairn::orbax {

inline constexpr std::string_view kOwnerRecordFile = ".cairn-save-owner.json";
inline constexpr uint64_t kMaxOwnerRecordBytes = 4096;

struct OwnerRecord {
  std::string save_id;
  ProcessIdentity process;
  int64_t lease_expires_unix_ns = 0;
};

// A record of this process owning `save_id`, its lease starting now.
OwnerRecord NewOwnerRecord(std::string_view save_id);
std::string EmitOwnerRecord(const OwnerRecord& record);
// DataLoss naming `what` for anything that is not a record.
Result<OwnerRecord> ParseOwnerRecord(std::string_view text, std::string_view what);

// Why the owner of `record` is gone (rules a-c above), or nullopt while it
// may still be saving.
std::optional<std::string> OwnerGoneReason(const OwnerRecord& record, int64_t now_unix_ns);
// "save <id> of pid <p> on <host>, lease until <t>" for error messages.
std::string DescribeOwner(const OwnerRecord& record);

// The lease of every save begun from now on (default 60 s). For tests.
int64_t SaveLeaseNanos();
void SetSaveLeaseNanos(int64_t nanos);

// Starts renewing the record at `record_key` of `store`, which this process
// just wrote as `record_bytes`, under the name `pending_path` (the pending
// location's Path()). `compare_and_swap`: renew with CompareAndPut (object
// stores, memory); else read it back and Put (file: its CompareAndPut would
// create a lock file, and a removed directory is not to be made again).
void StartRenewing(std::string pending_path, std::shared_ptr<KvStore> store, std::string record_key,
                   std::string record_bytes, bool compare_and_swap);

struct StoppedLease {
  bool registered = false;   // this process was renewing it
  bool lost = false;         // a renewal found the record removed or changed
  std::string record_bytes;  // the record as last written
};
// Stops renewing the save at `pending_path` (waits for a renewal in flight).
StoppedLease StopRenewing(const std::string& pending_path);

// Stops renewing the saves nested below `pending_path` (items of a step).
void StopRenewingUnder(const std::string& pending_path);

// While it lives, IsLiveHere(save_id) is true: held from before a save
// creates its owner record until StartRenewing, so that a concurrent
// BeginCommit of this process never takes the fresh record for a leftover.
class StartingSave {
 public:
  explicit StartingSave(std::string save_id);
  ~StartingSave();
  StartingSave(const StartingSave&) = delete;
  StartingSave& operator=(const StartingSave&) = delete;

 private:
  std::string save_id_;
};

// True while this process renews (or is starting) a save with this id.
bool IsLiveHere(std::string_view save_id);

// True while this process renews the record of the pending directory
// `pending_path` (a step's and its items' records share one save id).
bool IsRenewedHere(const std::string& pending_path);

}  // namespace cairn::orbax
