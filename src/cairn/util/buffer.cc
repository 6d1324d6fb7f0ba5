#include "cairn/util/buffer.h"

#include <cstdlib>
#include <algorithm>
#include <new>

namespace cairn {

void Buffer::Free::operator()(uint8_t* p) const { std::free(p); }

Buffer Buffer::CopyOf(ByteView bytes) {
  Buffer b(bytes.size());
  if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
  return b;
}

void Buffer::reserve(size_t capacity) {
  if (capacity <= capacity_) return;
  size_t rounded = (capacity + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();  // allocation failure is fatal, as with new
  if (size_ > 0) std::memcpy(p, data_.get(), size_);
  data_.reset(static_cast<uint8_t*>(p));
  capacity_ = rounded;
}

void Buffer::resize(size_t size) {
  if (size > capacity_) reserve(size);
  size_ = size;
}

void Buffer::append(ByteView bytes) {
  if (bytes.empty()) return;
  size_t old = size_;
  if (old + bytes.size() > capacity_) reserve(std::max(old + bytes.size(), capacity_ * 2));
  size_ = old + bytes.size();
  std::memcpy(data() + old, bytes.data(), bytes.size());
}

}  // namespace cairn
