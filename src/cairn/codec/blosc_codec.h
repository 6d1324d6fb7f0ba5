// The zarr v3 `blosc` codec and the zarr v2 `blosc` compressor (bytes ->
// bytes): one c-blosc1 buffer (16-byte header + blocks), via libblosc's
// context API (no global state, no internal threads).
//
// v3 configuration (TensorStore's form): `{"blocksize": B, "clevel": C,
// "cname": "lz4", "shuffle": "noshuffle"|"shuffle"|"bitshuffle",
// "typesize": T}`, `typesize` omitted iff noshuffle. All members are
// required when parsing except `typesize` with noshuffle.
//
// The decoder checks the header against the input before decompressing:
// the compressed size must equal the input size and the decoded size must
// be within the caller's bound.
//
// Thread safety: immutable; all methods may be called concurrently.
#pragma once

#include <memory>
#include <string>

#include "cairn/codec/codec.h"

namespace cairn {

class BloscCodec final : public BytesCodec {
 public:
  enum class Shuffle : uint8_t { kNoShuffle = 0, kShuffle = 1, kBitShuffle = 2 };

  // REQUIRES: cname is one of blosclz, lz4, lz4hc, snappy, zlib, zstd;
  // 0 <= clevel <= 9; 1 <= typesize <= 255 (FromJson and the zarr v2 parser
  // check these).
  BloscCodec(std::string cname, int clevel, Shuffle shuffle, int typesize, uint64_t blocksize)
      : cname_(std::move(cname)),
        clevel_(clevel),
        shuffle_(shuffle),
        typesize_(typesize),
        blocksize_(blocksize) {}

  // Parses a zarr v3 blosc `configuration` for chunks of `spec` (the
  // element size is the typesize used for compression when the stored
  // configuration has none, i.e. with noshuffle). InvalidArgument on a
  // missing or invalid member.
  static Result<std::shared_ptr<const BloscCodec>> FromJson(const Json* configuration,
                                                            const ChunkSpec& spec);

  std::string_view name() const override { return "blosc"; }
  Json ToJson() const override;

  // InvalidArgument if decoded.size() exceeds what c-blosc1 supports
  // (just under 2 GiB).
  Result<Buffer> Encode(ByteView decoded) const override;
  using BytesCodec::Decode;
  Result<Buffer> Decode(ByteView encoded, uint64_t max_decoded_size) const override;
  uint64_t MaxEncodedSize(uint64_t decoded_size) const override;

  const std::string& cname() const { return cname_; }
  int clevel() const { return clevel_; }
  Shuffle shuffle() const { return shuffle_; }
  int typesize() const { return typesize_; }
  uint64_t blocksize() const { return blocksize_; }

 private:
  std::string cname_;
  int clevel_;
  Shuffle shuffle_;
  int typesize_;
  uint64_t blocksize_;
};

// Validates blosc parameters shared by the v3 codec and the v2 compressor.
Status CheckBloscCname(std::string_view cname, std::string_view what);
Status CheckBloscClevel(int64_t clevel, std::string_view what);

}  // namespace cairn
