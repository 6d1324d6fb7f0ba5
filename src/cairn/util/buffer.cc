#include "cairn/util/buffer.h"
#include "cairn/util/buffer_cache.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace cairn {
namespace {

// malloc maps large blocks fresh and unmaps them on free, so every 64 MiB
// chunk buffer would pay a page fault per 4 KiB again. A few freed large
// blocks are kept for reuse instead, bounded in total size.
constexpr size_t kCacheMinBytes = size_t{1} << 20;
constexpr size_t kCacheDefaultMaxTotalBytes = size_t{512} << 20;

// Larger than any user address space (47 bits on x86-64 and arm64): a
// request above it is refused without asking the allocator, which under
// sanitizers would abort instead of returning null.
constexpr size_t kMaxAllocationBytes = size_t{1} << 47;

std::atomic<uint64_t> total_allocated{0};
std::atomic<uint64_t> fresh_allocated{0};  // from the allocator, not the cache

struct BlockCache {
  std::mutex mu;
  std::vector<std::pair<void*, size_t>> blocks;  // (block, capacity)
  size_t total = 0;
  size_t limit = kCacheDefaultMaxTotalBytes;
};

BlockCache& Cache() {
  static BlockCache* cache = new BlockCache;  // never destroyed: used until exit
  return *cache;
}

// The smallest cached block of at least `capacity` bytes and at most twice
// that, or null. Smallest, not first: chunk buffers of one size class
// differ a little (stored bytes, decoded bytes, zstd's bound), and a
// larger block taken for a smaller request leaves the next larger request
// without one, to be mapped and page-faulted afresh.
void* TakeCachedBlock(size_t capacity, size_t* got) {
  if (capacity < kCacheMinBytes) return nullptr;
  BlockCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mu);
  size_t best = c.blocks.size();
  for (size_t i = 0; i < c.blocks.size(); ++i) {
    const size_t size = c.blocks[i].second;
    if (size >= capacity && size / 2 <= capacity &&
        (best == c.blocks.size() || size < c.blocks[best].second)) {
      best = i;
    }
  }
  if (best == c.blocks.size()) return nullptr;
  auto [p, size] = c.blocks[best];
  c.blocks[best] = c.blocks.back();
  c.blocks.pop_back();
  c.total -= size;
  *got = size;
  return p;
}

// Keeps `p` for reuse when it is large and the cache has room.
bool CacheBlock(void* p, size_t capacity) {
  if (capacity < kCacheMinBytes) return false;
  BlockCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.total + capacity > c.limit) return false;
  c.blocks.emplace_back(p, capacity);
  c.total += capacity;
  return true;
}

}  // namespace

size_t SetBufferBlockCacheLimit(size_t bytes) {
  std::vector<void*> evicted;
  size_t previous;
  {
    BlockCache& c = Cache();
    std::lock_guard<std::mutex> lock(c.mu);
    previous = c.limit;
    c.limit = bytes;
    while (c.total > c.limit && !c.blocks.empty()) {
      evicted.push_back(c.blocks.back().first);
      c.total -= c.blocks.back().second;
      c.blocks.pop_back();
    }
  }
  for (void* p : evicted) std::free(p);
  return previous;
}

size_t BufferBlockCacheBytes() {
  BlockCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.total;
}

void Buffer::Free::operator()(uint8_t* p) const {
  if (p != nullptr && !CacheBlock(p, capacity)) std::free(p);
}

Buffer Buffer::CopyOf(ByteView bytes) {
  Buffer b(bytes.size());
  if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
  return b;
}

bool Buffer::TryReserve(size_t capacity) {
  if (capacity <= capacity_ - offset_) return true;
  if (capacity > kMaxAllocationBytes) return false;
  size_t rounded = (capacity + kAlignment - 1) / kAlignment * kAlignment;
  void* p = TakeCachedBlock(rounded, &rounded);
  if (p == nullptr) {
    p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) return false;
    fresh_allocated.fetch_add(rounded, std::memory_order_relaxed);
  }
  total_allocated.fetch_add(rounded, std::memory_order_relaxed);
  if (size_ > 0) std::memcpy(p, data(), size_);
  data_.reset(static_cast<uint8_t*>(p));  // frees the old block with its old capacity
  data_.get_deleter().capacity = rounded;
  capacity_ = rounded;
  offset_ = 0;
  return true;
}

void Buffer::reserve(size_t capacity) {
  if (!TryReserve(capacity)) throw std::bad_alloc();  // as `new` does
}

Result<Buffer> Buffer::TryAllocate(size_t size, std::string_view what) {
  Buffer b;
  CAIRN_RETURN_IF_ERROR(b.TryResize(size, what));
  return b;
}

Status Buffer::TryResize(size_t size, std::string_view what) {
  if (size > capacity() && !TryReserve(size)) {
    return ResourceExhaustedError("cannot allocate " + std::to_string(size) + " bytes for " +
                                  std::string(what) + ": out of memory");
  }
  size_ = size;
  return Status::OK();
}

uint64_t Buffer::TotalBytesAllocated() {
  return total_allocated.load(std::memory_order_relaxed);
}

uint64_t Buffer::FreshBytesAllocated() {
  return fresh_allocated.load(std::memory_order_relaxed);
}

void Buffer::resize(size_t size) {
  if (size > capacity()) reserve(size);
  size_ = size;
}

void Buffer::append(ByteView bytes) {
  if (bytes.empty()) return;
  size_t old = size_;
  if (old + bytes.size() > capacity()) reserve(std::max(old + bytes.size(), capacity() * 2));
  size_ = old + bytes.size();
  std::memcpy(data() + old, bytes.data(), bytes.size());
}

}  // namespace cairn
