// S3Writer: the KvWriter of S3KvStore::OpenWriter, which streams a value of
// any size up with bounded memory (steps at the top of s3_writer.cc).
//
// Parts: the first part takes up to `multipart_threshold` bytes
// (CAIRN_S3_MULTIPART_THRESHOLD, 128 MiB), the later ones `part_size`
// (CAIRN_S3_PART_SIZE, 16 MiB). So a value below the threshold goes up as
// Put sends it, in one PUT at Commit (an OCDBT data file of tens of MiB
// costs one request, as before), and only a larger one is streamed.
//
// Memory: at most the first part plus kPartsHeld - 1 parts of `part_size`
// while the first part uploads, then kPartsHeld parts of `part_size`: the
// part being filled and up to kPartsHeld - 1 uploading (an Append that
// fills a part while that many are uploading waits for one to finish).
// With the defaults: 176 MiB, then 64 MiB; with the threshold lowered to
// the part size, kPartsHeld x part_size throughout.
// Limit: S3's 10,000 parts, i.e. about 156 GiB with 16 MiB parts (an Append past
// that fails with ResourceExhausted naming CAIRN_S3_PART_SIZE).
//
// Thread safety: one thread at a time (KvWriter's contract); the uploads
// run on threads of their own, each blocked in HttpClient::Execute.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cairn/kvstore/s3/s3_kvstore.h"
#include "cairn/kvstore/s3/s3_multipart.h"

namespace cairn::s3 {

class S3Writer : public KvWriter {
 public:
  static constexpr int kPartsHeld = 4;
  // S3's largest part.
  static constexpr uint64_t kMaxFirstPart = uint64_t{5} << 30;

  // REQUIRES: `store` outlives the writer; `key` is valid.
  S3Writer(S3KvStore* store, std::string key);
  // Without a successful Commit: waits for the parts in flight and aborts
  // the upload (no object, no stored parts).
  ~S3Writer() override;

  Status Append(ByteView bytes) override;
  Status Commit() override;
  uint64_t size() const override { return size_; }

  // For tests: the most bytes of the value this writer held at once (the
  // part being filled and the parts in flight; their blocks may be larger
  // when Buffer's block cache hands out a larger free block), and the
  // multipart upload's id ("" until it starts).
  uint64_t buffered_bytes_high_water() const { return high_water_; }
  const std::string& upload_id() const { return upload_.upload_id(); }

 private:
  struct InFlight {
    int part = 0;
    Buffer data;
    std::thread thread;
    bool done = false;  // guarded by mu_
    Status status;      // guarded by mu_, set when done
  };

  // Sends the full part `filling_` (starting the upload first if needed)
  // and takes a fresh buffer; waits while kPartsHeld - 1 parts are in flight.
  Status SendFilling();
  // Joins finished uploads (all of them when `all`; else at least one when
  // `need_room`), recycling their buffers; returns the first error seen.
  Status Reap(bool all, bool need_room);
  Buffer TakeBuffer();
  void Account();
  Status Fail(Status s);

  S3KvStore* store_;
  std::string key_;
  uint64_t part_size_;
  uint64_t first_part_size_;
  S3MultipartUpload upload_;
  Buffer filling_;
  std::vector<Buffer> spare_;
  std::deque<std::unique_ptr<InFlight>> in_flight_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  int parts_sent_ = 0;
  uint64_t size_ = 0;
  uint64_t high_water_ = 0;
  Status error_;  // the first failure; the writer is dead after it
  bool committed_ = false;
};

}  // namespace cairn::s3
