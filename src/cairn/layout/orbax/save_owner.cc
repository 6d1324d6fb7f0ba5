// Owner records, liveness and the lease renewer of save_owner.h.
#include "cairn/layout/orbax/save_owner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "cairn/layout/orbax/step.h"
#include "cairn/util/json.h"

namespace cairn::orbax {
namespace {

std::atomic<int64_t> lease_nanos{int64_t{60} * 1000 * 1000 * 1000};

struct LiveSave {
  std::shared_ptr<KvStore> store;
  std::string record_key;
  std::string save_id;
  bool compare_and_swap = false;
  std::mutex mu;  // guards the fields below; held during a renewal
  std::string bytes;
  int64_t renewed_at_ns = 0;  // steady clock: when `bytes` was written
  bool stopped = false;
  bool lost = false;
};

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One renewal of `save` (its mutex held by the caller).
void Renew(LiveSave& save) {
  if (save.stopped || save.lost) return;
  auto parsed = ParseOwnerRecord(save.bytes, "own owner record");
  if (!parsed.ok()) return;
  OwnerRecord next = *parsed;
  next.lease_expires_unix_ns = NowNanos() + SaveLeaseNanos();
  const std::string bytes = EmitOwnerRecord(next);
  if (save.compare_and_swap) {
    Result<bool> swapped = save.store->CompareAndPut(save.record_key, AsBytes(save.bytes), AsBytes(bytes));
    if (!swapped.ok()) return;  // transient: the next tick tries again
    if (!*swapped) {
      save.lost = true;
      return;
    }
  } else {
    Result<std::optional<Buffer>> now = save.store->Get(save.record_key);
    if (!now.ok()) return;
    if (!now->has_value() || std::string_view(reinterpret_cast<const char*>((*now)->data()), (*now)->size()) !=
                                 save.bytes) {
      save.lost = true;
      return;
    }
    if (!save.store->Put(save.record_key, AsBytes(bytes)).ok()) return;
  }
  save.bytes = bytes;
  save.renewed_at_ns = SteadyNanos();
}

// The saves this process renews, and the thread renewing them. Never
// destroyed (the thread may outlive static destructors).
class Renewer {
 public:
  static Renewer& Get() {
    static Renewer* r = new Renewer;
    return *r;
  }
  void Add(const std::string& path, std::shared_ptr<LiveSave> save) {
    std::lock_guard<std::mutex> lock(mu_);
    saves_[path] = std::move(save);
    if (!started_) {
      started_ = true;
      std::thread([this] { Run(); }).detach();
    }
  }
  std::shared_ptr<LiveSave> Remove(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = saves_.find(path);
    if (it == saves_.end()) return nullptr;
    auto save = std::move(it->second);
    saves_.erase(it);
    return save;
  }
  std::vector<std::shared_ptr<LiveSave>> RemoveUnder(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<LiveSave>> out;
    const std::string below = path + "/";
    for (auto it = saves_.lower_bound(below); it != saves_.end() && it->first.rfind(below, 0) == 0;) {
      out.push_back(std::move(it->second));
      it = saves_.erase(it);
    }
    return out;
  }
  void Starting(const std::string& id, int delta) {
    std::lock_guard<std::mutex> lock(mu_);
    if ((starting_[id] += delta) <= 0) starting_.erase(id);
  }
  bool HasPath(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return saves_.count(path) > 0;
  }
  bool HasSaveId(std::string_view id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (starting_.count(std::string(id))) return true;
    for (const auto& [path, save] : saves_) {
      if (save->save_id == id) return true;
    }
    return false;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const int64_t interval = std::max<int64_t>(SaveLeaseNanos() / 6, 1000 * 1000);
      wake_.wait_for(lock, std::chrono::nanoseconds(interval));
      std::vector<std::shared_ptr<LiveSave>> due;
      for (const auto& [path, save] : saves_) due.push_back(save);
      lock.unlock();
      // Each save is renewed once a renewal interval (a sixth of the lease
      // in force now) has passed since its record was last written, not on
      // every wake: a save that just started is not renewed at once.
      const int64_t now = SteadyNanos();
      const int64_t every = std::max<int64_t>(SaveLeaseNanos() / 6, 1000 * 1000);
      for (const auto& save : due) {
        std::lock_guard<std::mutex> hold(save->mu);
        if (now - save->renewed_at_ns >= every) Renew(*save);
      }
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, std::shared_ptr<LiveSave>> saves_;
  std::map<std::string, int> starting_;  // ids whose owner record is being created
  bool started_ = false;
};

}  // namespace

OwnerRecord NewOwnerRecord(std::string_view save_id) {
  OwnerRecord r;
  r.save_id = std::string(save_id);
  r.process = ThisProcess();
  r.lease_expires_unix_ns = NowNanos() + SaveLeaseNanos();
  return r;
}

std::string EmitOwnerRecord(const OwnerRecord& r) {
  return DumpJson({{"save_id", r.save_id},
                   {"host", r.process.host},
                   {"boot_id", r.process.boot_id},
                   {"pid_ns", r.process.pid_ns},
                   {"pid", r.process.pid},
                   {"start_ticks", r.process.start_ticks},
                   {"lease_expires_unix_ns", r.lease_expires_unix_ns}});
}

Result<OwnerRecord> ParseOwnerRecord(std::string_view text, std::string_view what) {
  CAIRN_ASSIGN_OR_RETURN(Json j, ParseJson(text, what));
  auto fail = [&] { return DataLossError(std::string(what) + ": not an owner record"); };
  if (!j.is_object()) return fail();
  OwnerRecord r;
  for (auto [field, out] : {std::pair{"save_id", &r.save_id}, std::pair{"host", &r.process.host},
                            std::pair{"boot_id", &r.process.boot_id}, std::pair{"pid_ns", &r.process.pid_ns}}) {
    auto it = j.find(field);
    if (it == j.end() || !it->is_string()) return fail();
    *out = it->get<std::string>();
  }
  auto pid = j.find("pid");
  auto start = j.find("start_ticks");
  auto lease = j.find("lease_expires_unix_ns");
  if (pid == j.end() || !pid->is_number_integer() || start == j.end() || !start->is_number_integer() ||
      start->get<int64_t>() < 0 || lease == j.end() || !lease->is_number_integer()) {
    return fail();
  }
  r.process.pid = pid->get<int64_t>();
  r.process.start_ticks = start->get<uint64_t>();
  r.lease_expires_unix_ns = lease->get<int64_t>();
  return r;
}

std::optional<std::string> OwnerGoneReason(const OwnerRecord& record, int64_t now_unix_ns) {
  if (now_unix_ns > record.lease_expires_unix_ns) {
    return "its lease expired " + std::to_string((now_unix_ns - record.lease_expires_unix_ns) / 1000000) +
           " ms ago";
  }
  if (record.process.SameProcessAs(ThisProcess())) {
    if (IsLiveHere(record.save_id)) return std::nullopt;
    return "this process owns it and no longer runs that save";
  }
  if (IsGoneFromThisMachine(record.process)) {
    return "its process (pid " + std::to_string(record.process.pid) + " on this host) has exited";
  }
  return std::nullopt;
}

std::string DescribeOwner(const OwnerRecord& r) {
  const int64_t left_ms = (r.lease_expires_unix_ns - NowNanos()) / 1000000;
  return "save " + r.save_id + " of pid " + std::to_string(r.process.pid) + " on " + r.process.host +
         ", its lease ending in " + std::to_string(left_ms) + " ms";
}

int64_t SaveLeaseNanos() { return lease_nanos.load(); }
void SetSaveLeaseNanos(int64_t nanos) { lease_nanos.store(nanos); }

void StartRenewing(std::string pending_path, std::shared_ptr<KvStore> store, std::string record_key,
                   std::string record_bytes, bool compare_and_swap) {
  auto save = std::make_shared<LiveSave>();
  save->store = std::move(store);
  save->record_key = std::move(record_key);
  save->compare_and_swap = compare_and_swap;
  auto parsed = ParseOwnerRecord(record_bytes, "own owner record");
  if (parsed.ok()) save->save_id = parsed->save_id;
  save->bytes = std::move(record_bytes);
  save->renewed_at_ns = SteadyNanos();
  Renewer::Get().Add(pending_path, std::move(save));
}

StoppedLease StopRenewing(const std::string& pending_path) {
  StoppedLease out;
  std::shared_ptr<LiveSave> save = Renewer::Get().Remove(pending_path);
  if (save == nullptr) return out;
  std::lock_guard<std::mutex> hold(save->mu);
  save->stopped = true;
  out.registered = true;
  out.lost = save->lost;
  out.record_bytes = save->bytes;
  return out;
}

void StopRenewingUnder(const std::string& pending_path) {
  for (const auto& save : Renewer::Get().RemoveUnder(pending_path)) {
    std::lock_guard<std::mutex> hold(save->mu);
    save->stopped = true;
  }
}

StartingSave::StartingSave(std::string save_id) : save_id_(std::move(save_id)) {
  Renewer::Get().Starting(save_id_, +1);
}
StartingSave::~StartingSave() { Renewer::Get().Starting(save_id_, -1); }

bool IsLiveHere(std::string_view save_id) { return Renewer::Get().HasSaveId(save_id); }

bool IsRenewedHere(const std::string& pending_path) { return Renewer::Get().HasPath(pending_path); }

}  // namespace cairn::orbax
