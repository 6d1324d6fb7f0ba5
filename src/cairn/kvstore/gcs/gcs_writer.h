// GcsWriter: the KvWriter of GcsKvStore::OpenWriter, which streams a value of
// any size up with bounded memory (steps at the top of gcs_writer.cc).
//
// Chunks: the first takes `resumable_threshold` bytes
// (CAIRN_GCS_RESUMABLE_THRESHOLD, 128 MiB, rounded down to a multiple of the
// chunk size), the later ones `upload_chunk_size` (CAIRN_GCS_CHUNK_SIZE, 16
// MiB). So a value below the threshold goes up as Put sends it, in one media
// upload at Commit (an OCDBT data file of tens of MiB costs one request, as
// before), and only a larger one is streamed.
//
// Memory: two buffers, the chunk being sent and the one being filled: at
// most the first chunk plus one chunk, then two chunks (with the defaults
// 144 MiB, then 32 MiB; with the threshold lowered to the chunk size, two
// chunks throughout). GCS takes the chunks of a session one at a time, in
// order, so an Append that fills a chunk while the previous one is still
// being sent waits for it.
//
// Thread safety: one thread at a time (KvWriter's contract); a chunk is sent
// on a thread of its own while the next one fills.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "cairn/kvstore/gcs/gcs_kvstore.h"
#include "cairn/kvstore/gcs/gcs_resumable.h"

namespace cairn::gcs {

class GcsWriter : public KvWriter {
 public:
  // REQUIRES: `store` outlives the writer; `key` is valid.
  GcsWriter(GcsKvStore* store, std::string key);
  // Without a successful Commit: waits for the chunk being sent and cancels
  // the session (no object appears).
  ~GcsWriter() override;

  Status Append(ByteView bytes) override;
  Status Commit() override;
  uint64_t size() const override { return size_; }

  // For tests: the most bytes of the value this writer held at once (the
  // chunk being filled and the one being sent), and the session URI (""
  // until it starts).
  uint64_t buffered_bytes_high_water() const { return high_water_; }
  const std::string& session_uri() const { return session_.uri(); }

 private:
  // Sends the full chunk `filling_` on the sender thread (starting the
  // session first if needed) after the previous chunk is done.
  Status SendFilling();
  // Waits for the chunk being sent; its status.
  Status Wait();
  void Account();
  Status Fail(Status s);

  GcsKvStore* store_;
  std::string key_;
  uint64_t chunk_size_;
  uint64_t first_chunk_size_;
  GcsResumableSession session_;
  Buffer filling_;
  Buffer sending_;       // owned by the sender thread while it runs
  std::thread sender_;
  Status sent_status_;   // written by the sender thread, read after join
  uint64_t sent_ = 0;    // bytes handed to the sender so far
  uint64_t size_ = 0;
  uint64_t high_water_ = 0;
  Status error_;  // the first failure; the writer is dead after it
  bool committed_ = false;
};

}  // namespace cairn::gcs
