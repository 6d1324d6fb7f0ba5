// Byte buffers.
//
// `ByteView` borrows bytes (the caller keeps them alive). `Buffer` owns a
// heap block that is 4096-byte aligned (so it can go to O_DIRECT I/O as is,
// unless RemovePrefix dropped a part of it)
// and is NOT zero-initialized on allocation: every byte a caller reads it must
// have written. Growing with `resize` keeps existing bytes.
//
// Allocation failure: `Buffer(size)`, `resize`, `reserve` and `append` throw
// std::bad_alloc like `new` (a TaskGroup turns that into ResourceExhausted).
// Code that allocates a size decided by a chunk shape, metadata or stored
// bytes uses `TryAllocate`/`TryResize`, which return ResourceExhausted
// instead; sizes above 2^47 bytes (more than any address space) fail there
// without asking the allocator.
//
// Large blocks (1 MiB and up) freed by one Buffer are kept, up to 512 MiB in
// all, for the next Buffer of that size: chunk-sized buffers would otherwise
// be mapped and page-faulted anew for every chunk.
//
// Thread safety: a value type; const methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cairn/result.h"

namespace cairn {

using ByteView = std::span<const uint8_t>;
using MutableByteView = std::span<uint8_t>;

inline ByteView AsBytes(std::string_view s) {
  return ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
inline std::string_view AsStringView(ByteView b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

class Buffer {
 public:
  static constexpr size_t kAlignment = 4096;

  Buffer() = default;
  // Allocates `size` uninitialized bytes.
  explicit Buffer(size_t size) { resize(size); }
  // Allocates `size` uninitialized bytes, or ResourceExhausted naming the
  // size and `what` (e.g. "chunk of key `c/0`") when they cannot be had.
  static Result<Buffer> TryAllocate(size_t size, std::string_view what = "a buffer");
  // Copies `bytes`.
  static Buffer CopyOf(ByteView bytes);
  static Buffer CopyOf(std::string_view bytes) { return CopyOf(AsBytes(bytes)); }

  Buffer(Buffer&& other) noexcept
      : data_(std::move(other.data_)), size_(other.size_), capacity_(other.capacity_),
        offset_(other.offset_) {
    other.size_ = other.capacity_ = other.offset_ = 0;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = other.size_;
    capacity_ = other.capacity_;
    offset_ = other.offset_;
    other.size_ = other.capacity_ = other.offset_ = 0;
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint8_t* data() { return data_.get() + offset_; }
  const uint8_t* data() const { return data_.get() + offset_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_ - offset_; }
  bool empty() const { return size_ == 0; }

  // Changes the size; new bytes are uninitialized. May reallocate.
  void resize(size_t size);
  // resize() that returns ResourceExhausted (naming `what`) instead of
  // throwing; the buffer is unchanged on failure.
  Status TryResize(size_t size, std::string_view what = "a buffer");
  // Ensures capacity without changing the size.
  void reserve(size_t capacity);
  // Appends bytes (amortized growth).
  void append(ByteView bytes);
  void append(std::string_view s) { append(AsBytes(s)); }
  void clear() { size_ = 0; }
  // Drops the first `n` bytes without moving the others (REQUIRES: n <=
  // size()): data() then starts `n` bytes further into the same block, which
  // is no longer 4096-aligned unless `n` is a multiple of 4096. For reads
  // that must start on an aligned file offset (O_DIRECT) but return bytes
  // from an unaligned one.
  void RemovePrefix(size_t n) {
    offset_ += n;
    size_ -= n;
  }

  ByteView view() const { return ByteView(data(), size_); }
  MutableByteView mutable_view() { return MutableByteView(data(), size_); }
  operator ByteView() const { return view(); }  // NOLINT implicit
  std::string_view as_string_view() const { return AsStringView(view()); }
  std::string ToString() const { return std::string(as_string_view()); }

  // Bytes obtained for Buffers since the process started (from the
  // allocator or the block cache), for tests that bound a code path's memory.
  static uint64_t TotalBytesAllocated();
  // Of those, the bytes that came from the allocator rather than the block
  // cache (fresh pages, each faulted in on first touch).
  static uint64_t FreshBytesAllocated();

  bool operator==(const Buffer& other) const {
    return size_ == other.size_ && (size_ == 0 || std::memcmp(data(), other.data(), size_) == 0);
  }

 private:
  // Frees a block of `capacity` bytes (large ones go back to a small cache
  // of reusable blocks, see buffer.cc).
  struct Free {
    size_t capacity;  // value-initialized (0) with the unique_ptr
    void operator()(uint8_t* p) const;
  };
  // reserve() without throwing: false (buffer unchanged) on failure.
  bool TryReserve(size_t capacity);

  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;  // of the block, from data_.get()
  size_t offset_ = 0;    // bytes dropped by RemovePrefix
};

}  // namespace cairn
