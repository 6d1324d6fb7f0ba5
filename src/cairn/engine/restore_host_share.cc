#include "cairn/engine/restore_host_share.h"

#include <algorithm>
#include <map>
#include <random>

#include "cairn/events.h"
#include "cairn/engine/restore_decode.h"
#include "cairn/util/coding.h"
#include "cairn/util/thread_pool.h"

namespace cairn::engine {
namespace {

constexpr uint64_t kVersion = 3;
constexpr uint64_t kPage = 4096;

struct Candidate {
  std::string key;
  uint64_t bytes;
  bool mappable = false;  // its box is a whole destination that may be a mapping
};

// One process's step-2 message.
struct Needs {
  bool ok = false;  // parsed, and its planning succeeded
  std::string host, item, shm;
  std::string window;  // the file name it would give the host's window (step 4)
  uint64_t token = 0, free = 0, max_bytes = 0;
  std::vector<Candidate> candidates;
};

void PutString(Buffer* out, std::string_view s) {
  AppendVarint64(out, s.size());
  out->append(ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

bool GetString(ByteReader& r, std::string* s) {
  uint64_t n;
  ByteView b;
  if (!r.ReadVarint64(&n) || n > r.remaining() || !r.ReadBytes(static_cast<size_t>(n), &b)) return false;
  s->assign(reinterpret_cast<const char*>(b.data()), b.size());
  return true;
}

std::string Encode(const Needs& n) {
  Buffer out;
  AppendVarint64(&out, kVersion);
  AppendVarint64(&out, n.ok ? 1 : 0);
  PutString(&out, n.host);
  PutString(&out, n.item);
  PutString(&out, n.shm);
  PutString(&out, n.window);
  AppendVarint64(&out, n.token);
  AppendVarint64(&out, n.free);
  AppendVarint64(&out, n.max_bytes);
  AppendVarint64(&out, n.candidates.size());
  for (const Candidate& c : n.candidates) {
    PutString(&out, c.key);
    AppendVarint64(&out, c.bytes);
    AppendVarint64(&out, c.mappable ? 1 : 0);
  }
  return std::string(reinterpret_cast<const char*>(out.data()), out.size());
}

// A message that does not parse counts as a process that shares nothing.
Needs Decode(std::string_view bytes) {
  Needs n;
  ByteReader r(ByteView(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  uint64_t version, ok, count;
  if (!r.ReadVarint64(&version) || version != kVersion || !r.ReadVarint64(&ok) || !GetString(r, &n.host) ||
      !GetString(r, &n.item) || !GetString(r, &n.shm) || !GetString(r, &n.window) || !r.ReadVarint64(&n.token) ||
      !r.ReadVarint64(&n.free) || !r.ReadVarint64(&n.max_bytes) || !r.ReadVarint64(&count) ||
      count > r.remaining()) {
    return Needs{};
  }
  for (uint64_t i = 0; i < count; ++i) {
    Candidate c;
    uint64_t mappable;
    if (!GetString(r, &c.key) || !r.ReadVarint64(&c.bytes) || !r.ReadVarint64(&mappable) || mappable > 1) {
      return Needs{};
    }
    c.mappable = mappable == 1;
    n.candidates.push_back(std::move(c));
  }
  n.ok = ok == 1 && r.empty();
  return n;
}

// The in-bounds part of chunk `c`: what the shared file holds of it, in C order.
Box StoredBox(const ArrayRestorePlan& p, const ChunkToRead& c) {
  return Intersect(c.box, Box::FromShape(p.array->metadata().shape));
}

uint64_t StoredBytes(const ArrayRestorePlan& p, const ChunkToRead& c) {
  return static_cast<uint64_t>(StoredBox(p, c).num_elements()) * DTypeSize(p.spec.dtype);
}

// Step 1's candidates: read whole, not mapped, decoded by a codec that
// changes the bytes, large enough to be worth a shared page.
bool IsCandidate(const ArrayRestorePlan& p, const ChunkToRead& c, bool mapped) {
  if (mapped || c.parts.empty()) return false;
  if (p.sharding != nullptr) {
    return c.whole_shard && !p.sharding->inner_codecs().IsIdentity(p.sharding->InnerSpec(p.spec));
  }
  return !p.array->metadata().codecs.IsIdentity(p.spec);
}

struct Assignment {
  int owner;
  uint64_t offset;  // in the window
  int round;
};

struct GroupPlan {
  uint64_t window = 0;  // the file's size: 0 when the group shares nothing
  int rounds = 0;
  bool mapped = false;  // one round, every shared chunk handed out as a mapping
};

// Step 3 for the group of `me`: the processes with the same host, item and
// shared-memory directory whose planning succeeded.
GroupPlan Assign(const std::vector<Needs>& all, size_t me, std::map<std::string, Assignment>* out) {
  const Needs& mine = all[me];
  if (!mine.ok || mine.shm.empty()) return {};
  std::vector<size_t> group;
  uint64_t cap = UINT64_MAX, free_cap = UINT64_MAX;
  for (size_t i = 0; i < all.size(); ++i) {
    const Needs& n = all[i];
    if (!n.ok || n.host != mine.host || n.item != mine.item || n.shm != mine.shm) continue;
    group.push_back(i);
    cap = std::min({cap, n.max_bytes, n.free / 2});
    free_cap = std::min(free_cap, n.free / 2);
  }
  cap = cap / kPage * kPage;
  if (group.size() < 2 || cap == 0) return {};
  struct Need {
    uint64_t bytes = 0;
    bool consistent = true;
    bool mappable = true;  // by every process that needs it
    std::vector<size_t> processes;
  };
  std::map<std::string, Need> needs;  // ordered by key: the same order everywhere
  for (size_t i : group) {
    for (const Candidate& c : all[i].candidates) {
      auto [it, added] = needs.try_emplace(c.key);
      if (added) it->second.bytes = c.bytes;
      if (it->second.bytes != c.bytes) it->second.consistent = false;
      it->second.mappable = it->second.mappable && c.mappable;
      it->second.processes.push_back(i);
    }
  }
  auto shared = [](const Need& need) { return need.consistent && need.processes.size() >= 2 && need.bytes > 0; };
  // The mapped window: when every process that needs a shared chunk takes
  // it as a mapping, the window is those mappings' memory, which the
  // processes would otherwise allocate for their arrays: it is not reused,
  // so one round holds every chunk, bounded by the free space alone.
  uint64_t all_bytes = 0;
  bool all_mappable = true;
  for (const auto& [key, need] : needs) {
    if (!shared(need)) continue;
    all_mappable = all_mappable && need.mappable;
    all_bytes += (need.bytes + kPage - 1) / kPage * kPage;
  }
  const bool mapped = all_mappable && all_bytes > 0 && all_bytes <= free_cap / kPage * kPage;
  if (mapped) cap = all_bytes;
  // Bytes owned, in the current round and in all: every round's decoding
  // is spread evenly, since each round waits for its slowest process.
  std::map<size_t, std::pair<uint64_t, uint64_t>> load;
  GroupPlan plan;
  uint64_t end = 0;  // of the current round in the window
  int round = 0;
  for (const auto& [key, need] : needs) {
    if (!shared(need) || need.bytes > cap) continue;
    uint64_t offset = (end + kPage - 1) / kPage * kPage;
    if (offset + need.bytes > cap) {
      ++round;
      offset = 0;
      for (auto& [process, bytes] : load) bytes.first = 0;
    }
    size_t owner = need.processes[0];
    for (size_t i : need.processes) {
      if (load[i] < load[owner]) owner = i;
    }
    load[owner].first += need.bytes;
    load[owner].second += need.bytes;
    (*out)[key] = {static_cast<int>(owner), offset, round};
    end = offset + need.bytes;
    plan.window = std::max(plan.window, (end + kPage - 1) / kPage * kPage);
    plan.rounds = round + 1;
  }
  plan.mapped = mapped && plan.rounds == 1;
  return plan;
}

std::atomic<int> open_failure_for_testing{-1};

std::string Hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

}  // namespace

void SetHostShareOpenFailureForTesting(int process_index) { open_failure_for_testing = process_index; }

std::unique_ptr<HostShare> HostShare::Start(Coordinator& coordinator, const RestoreHostShareOptions& options,
                                            const std::string& item_directory, bool planned,
                                            const std::vector<ArrayRestorePlan>& plans,
                                            const std::vector<std::vector<bool>>& mapped) {
  std::unique_ptr<HostShare> share(new HostShare);
  share->coordinator_ = &coordinator;
  share->options_ = options;
  share->item_directory_ = item_directory;
  // Not the directory: processes may name one checkpoint by different paths.
  share->name_ = "cairn/restore/host-share";
  share->roles_.resize(plans.size());
  share->offsets_.resize(plans.size());
  share->owners_.resize(plans.size());
  share->rounds_of_.resize(plans.size());
  for (size_t a = 0; a < plans.size(); ++a) {
    share->roles_[a].assign(plans[a].chunks.size(), Role::kSelf);
    share->offsets_[a].assign(plans[a].chunks.size(), 0);
    share->owners_[a].assign(plans[a].chunks.size(), -1);
    share->rounds_of_[a].assign(plans[a].chunks.size(), -1);
  }
  // Step 2.
  Needs mine;
  mine.ok = planned && !options.directory.empty();
  mine.host = ThisHostId();
  mine.item = item_directory;
  mine.shm = options.directory;
  mine.token = std::random_device{}() * (uint64_t{1} << 32) + std::random_device{}();
  mine.window = OwnedSharedMemoryName(std::string(kWindowPrefix) + Hex(mine.token), ThisProcess());
  mine.free = options.directory.empty() ? 0 : SharedMemoryFile::FreeBytes(options.directory);
  mine.max_bytes = options.max_bytes;
  // Step 4a, early: also when this restore ends up sharing nothing.
  if (mine.ok) RemoveAbandonedSharedMemoryFiles(options.directory, kWindowPrefix, kUnattributedWindowAge);
  std::map<std::string, std::pair<size_t, size_t>> by_key;
  if (mine.ok) {
    for (size_t a = 0; a < plans.size(); ++a) {
      for (size_t c = 0; c < plans[a].chunks.size(); ++c) {
        const ChunkToRead& chunk = plans[a].chunks[c];
        const uint64_t bytes = StoredBytes(plans[a], chunk);
        if (bytes < kMinSharedBytes || !IsCandidate(plans[a], chunk, mapped[a][c])) continue;
        if (!by_key.emplace(chunk.key, std::make_pair(a, c)).second) continue;
        mine.candidates.push_back({chunk.key, bytes, WholeChunkMappedSlot(plans[a], chunk) != nullptr});
      }
    }
  }
  auto gathered = coordinator.AllGather(share->name_ + "/needs", Encode(mine), options.timeout);
  if (!gathered.ok() || gathered->size() != static_cast<size_t>(coordinator.process_count())) return share;
  // Step 3: every process computes every group's assignment, to agree on
  // whether step 6 happens at all.
  std::vector<Needs> all;
  for (const std::string& m : *gathered) all.push_back(Decode(m));
  const size_t me = static_cast<size_t>(coordinator.process_index());
  for (size_t i = 0; i < all.size(); ++i) {
    std::map<std::string, Assignment> theirs;
    share->rounds_ = std::max(share->rounds_, Assign(all, i, &theirs).rounds);
  }
  if (share->rounds_ == 0) return share;
  std::map<std::string, Assignment> assigned;
  const GroupPlan group = Assign(all, me, &assigned);
  share->size_ = group.window;
  share->mapped_ = group.mapped;
  if (share->size_ == 0) return share;
  for (const auto& [key, where] : assigned) {
    auto it = by_key.find(key);
    if (it == by_key.end()) continue;
    const auto [a, c] = it->second;
    share->roles_[a][c] = where.owner == static_cast<int>(me) ? Role::kOwner : Role::kPeer;
    share->offsets_[a][c] = where.offset;
    share->owners_[a][c] = where.owner;
    share->rounds_of_[a][c] = where.round;
  }
  // Step 4: the group's first process names the file (step 4a ran above).
  std::string window = mine.window;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].ok && all[i].host == mine.host && all[i].item == mine.item && all[i].shm == mine.shm) {
      window = all[i].window;
      break;
    }
  }
  const bool safe_name = window.starts_with(kWindowPrefix) && window.find('/') == std::string::npos;
  share->path_ = options.directory + "/" + (safe_name ? window : mine.window);
  auto file = open_failure_for_testing.load() == static_cast<int>(me)
                  ? Result<std::unique_ptr<SharedMemoryFile>>(InternalError("injected failure"))
                  : SharedMemoryFile::Open(share->path_, share->size_);
  if (file.ok()) {
    share->file_ = std::move(*file);
    if (options.at_point) options.at_point(kPointWindowOpened);
  } else {
    // Decode what it owns for itself only; step 6 tells the others.
    for (auto& roles : share->roles_) {
      std::replace(roles.begin(), roles.end(), Role::kOwner, Role::kSelf);
    }
  }
  return share;
}

HostShare::~HostShare() = default;

HostShare::Role HostShare::role(size_t array, size_t chunk) const {
  if (array >= roles_.size() || chunk >= roles_[array].size()) return Role::kSelf;
  return roles_[array][chunk];
}

Status HostShare::DeliverOwned(const ArrayRestorePlan& p, size_t array, size_t chunk,
                               std::optional<ByteView> value) {
  const ChunkToRead& c = p.chunks[chunk];
  const Box stored = StoredBox(p, c);
  uint8_t* region = file_->data() + offsets_[array][chunk];
  ArrayToRestore whole;
  whole.param = c.key;
  whole.boxes.push_back({stored, region, {}});
  auto plan = PlanArrayRestore(whole, p.array, item_directory_);
  if (!plan.ok() || plan->chunks.size() != 1 || plan->chunks[0].key != c.key) {
    owned_failed_ = true;
    return InternalError("restoring " + c.key + " of " + item_directory_ +
                         ": cannot plan the chunk's decoding into the host's shared file");
  }
  file_->PopulateWrite(offsets_[array][chunk], StoredBytes(p, c));
  Status s = DeliverChunk(*plan, plan->chunks[0], value);
  if (!s.ok()) {
    owned_failed_ = true;
    return s;
  }
  if (!MapOut(p, array, chunk)) FillParts(p, c.parts, region, stored);
  decoded_for_host_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

HostShare::Outcome HostShare::Run(const Status& before, const std::vector<ArrayRestorePlan>& plans,
                                  const DecodeFn& decode) {
  Outcome out;
  // Per round, the chunks this process owns and those it needs from others.
  std::vector<std::vector<std::pair<size_t, size_t>>> owned(static_cast<size_t>(rounds_));
  std::vector<std::vector<std::pair<size_t, size_t>>> theirs(static_cast<size_t>(rounds_));
  for (size_t a = 0; a < roles_.size(); ++a) {
    for (size_t c = 0; c < roles_[a].size(); ++c) {
      if (roles_[a][c] == Role::kSelf) continue;
      auto& list = roles_[a][c] == Role::kOwner ? owned : theirs;
      list[static_cast<size_t>(rounds_of_[a][c])].emplace_back(a, c);
    }
  }
  bool failed = !before.ok();
  // After a failed collective this process stops sharing: what is left,
  // its own chunks included, it reads and decodes itself.
  auto give_up_from = [&](size_t first) {
    for (size_t r = first; r < owned.size(); ++r) {
      for (const auto& list : {owned[r], theirs[r]}) {
        for (const auto& [a, c] : list) {
          roles_[a][c] = Role::kSelf;
          out.fallback.emplace_back(a, c);
        }
      }
    }
  };
  for (int r = 0; r < rounds_; ++r) {
    const size_t ri = static_cast<size_t>(r);
    // Step 5: decode this round's own chunks into the window.
    if (!failed && !owned[ri].empty()) {
      Status s = decode(owned[ri]);
      if (!s.ok()) {
        failed = true;
        out.status = s;
      }
    }
    // Step 6.
    const bool ok = !failed && file_ != nullptr && !owned_failed_;
    const std::string tag = name_ + "/round" + std::to_string(r);
    // "1:<device>:<inode>": the owner decoded into the very file this
    // process mapped (not one created again under the same name).
    const std::string mapped_ok = file_ != nullptr ? "1:" + file_->file_id() : "1";
    auto done = coordinator_->AllGather(tag + "/done", ok ? mapped_ok : "0", options_.timeout);
    if (file_ != nullptr) file_->Unlink();  // every process has opened it, or failed to
    if (!done.ok() || done->size() != static_cast<size_t>(coordinator_->process_count())) {
      give_up_from(ri + 1);
      for (const auto& [a, c] : theirs[ri]) {
        roles_[a][c] = Role::kSelf;
        out.fallback.emplace_back(a, c);
      }
      break;
    }
    // Step 7: copy out of the window what the owners decoded.
    std::vector<std::pair<size_t, size_t>> copy;
    for (const auto& [a, c] : theirs[ri]) {
      const size_t owner = static_cast<size_t>(owners_[a][c]);
      if (!failed && file_ != nullptr && owner < done->size() && (*done)[owner] == mapped_ok) {
        copy.emplace_back(a, c);
      } else {
        roles_[a][c] = Role::kSelf;
        out.fallback.emplace_back(a, c);
      }
    }
    if (!copy.empty()) {
      TaskGroup group;
      for (const auto& [a, c] : copy) {
        group.Run([&, a = a, c = c]() -> Status {
          CopyFromPeer(plans[a], a, c);
          return Status::OK();
        });
      }
      group.Wait().IgnoreError();
    }
    // Nobody writes the next round into the window before everyone has
    // copied this one out.
    if (r + 1 < rounds_ && !coordinator_->Barrier(tag + "/copied", options_.timeout).ok()) {
      give_up_from(ri + 1);
      break;
    }
  }
  if (file_ != nullptr) file_->Unlink();
  fallen_back_ = static_cast<int64_t>(out.fallback.size());
  if (fallen_back_ > 0) {
    EmitEvent(EventLevel::kWarning,
              "restoring " + item_directory_ + ": " + std::to_string(fallen_back_) +
                  " chunks are read and decoded by this process itself, not shared by the processes of its host" +
                  (out.status.ok() ? std::string() : " (" + std::string(out.status.message()) + ")"));
  }
  return out;
}

void HostShare::CopyFromPeer(const ArrayRestorePlan& p, size_t array, size_t chunk) {
  if (!MapOut(p, array, chunk)) {
    const ChunkToRead& c = p.chunks[chunk];
    const uint64_t offset = offsets_[array][chunk];
    file_->PopulateRead(offset, StoredBytes(p, c));
    FillParts(p, c.parts, file_->data() + offset, StoredBox(p, c));
  }
  from_host_.fetch_add(1, std::memory_order_relaxed);
}

bool HostShare::MapOut(const ArrayRestorePlan& p, size_t array, size_t chunk) {
  const ChunkToRead& c = p.chunks[chunk];
  std::shared_ptr<MappedBytes>* slot = mapped_ ? WholeChunkMappedSlot(p, c) : nullptr;
  if (slot == nullptr) return false;
  // The window is not reused (a mapped group has one round): the
  // destination becomes a private mapping of the chunk's pages, shared by
  // every process of the host that maps them until one writes.
  const uint64_t n = StoredBytes(p, c);
  Result<uint8_t*> m = file_->MapPrivate(offsets_[array][chunk], n);
  if (!m.ok()) return false;
  *slot = std::make_shared<MappedBytes>(*m, SharedMemoryFile::MappedLength(n), *m, n, n);
  mapped_from_host_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void HostShare::AddStats(RestoreStats* stats) const {
  stats->chunks_decoded_for_host += decoded_for_host_.load();
  stats->chunks_from_host += from_host_.load();
  stats->chunks_mapped_from_host += mapped_from_host_.load();
  stats->chunks_fallen_back += fallen_back_;
  stats->host_share_rounds += rounds_;
}

}  // namespace cairn::engine
