// Codecs: pure functions that turn a chunk of array elements into stored
// bytes and back, as zarr v3 defines them (array->array, array->bytes,
// bytes->bytes), also used for zarr v2 compressors.
//
// A decoded chunk is always a C-order array of native-endian elements of
// `ChunkSpec.dtype` and `ChunkSpec.shape`. Codecs do no I/O, start no
// threads and never block. Decoders take untrusted bytes: every length is
// checked against the bytes present, and failures are DataLoss with a message
// that says which codec and what is wrong. No allocation is sized by an
// unchecked field: a decoder's output size is known from the ChunkSpec.
//
// Thread safety: codec objects are immutable after construction; every
// method may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cairn/dtype/dtype.h"
#include "cairn/util/box.h"
#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn {

using Json = nlohmann::json;

// What a decoded chunk is: element type, shape, and the fill value (one
// native-endian element) that stands for missing data.
struct ChunkSpec {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> fill_value;  // DTypeSize(dtype) bytes

  size_t num_bytes() const { return static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype); }
};

class Codec {
 public:
  virtual ~Codec() = default;
  // The codec's zarr v3 name ("zstd").
  virtual std::string_view name() const = 0;
  // `{"name": ..., "configuration": {...}}` exactly as TensorStore writes it
  // (configuration omitted when empty).
  virtual Json ToJson() const = 0;
};

// The largest decoded size a bytes->bytes decoder produces when the caller
// gives no tighter bound (16 GiB). Larger outputs are DataLoss.
inline constexpr uint64_t kDefaultMaxDecodedBytes = uint64_t{1} << 34;

// Options for encoding a chunk.
struct EncodeOptions {
  // sharding_indexed: store inner chunks equal entirely to the fill value
  // (TensorStore's `store_data_equal_to_fill_value`, set by Orbax). When
  // false they are omitted from the shard and read back as the fill value.
  bool store_data_equal_to_fill_value = false;
};

// bytes -> bytes (zstd, gzip, blosc, crc32c, zlib).
class BytesCodec : public Codec {
 public:
  virtual Result<Buffer> Encode(ByteView decoded) const = 0;
  // Decodes with the default bound kDefaultMaxDecodedBytes.
  virtual Result<Buffer> Decode(ByteView encoded) const {
    return Decode(encoded, kDefaultMaxDecodedBytes);
  }
  // Decodes `encoded`; DataLoss if the decoded bytes would exceed
  // `max_decoded_size` (checked before allocating, and while streaming).
  virtual Result<Buffer> Decode(ByteView encoded, uint64_t max_decoded_size) const = 0;
  // Decodes `encoded` into exactly `out`: DataLoss if it decodes to any
  // other size (`out` may then hold partial bytes). The default decodes into
  // a buffer bounded by out.size() and copies; codecs that can write
  // straight into `out` override it.
  virtual Status DecodeInto(ByteView encoded, MutableByteView out) const;
  // An upper bound of Encode's output size for `decoded_size` input bytes.
  virtual uint64_t MaxEncodedSize(uint64_t decoded_size) const = 0;
};

// array -> array (transpose).
class ArrayCodec : public Codec {
 public:
  // The spec of the encoded array given the decoded one.
  virtual ChunkSpec EncodedSpec(const ChunkSpec& decoded) const = 0;
  // `array` has `decoded`'s layout; returns the encoded array (C order of
  // EncodedSpec(decoded).shape).
  virtual Result<Buffer> Encode(const ChunkSpec& decoded, ByteView array) const = 0;
  // Inverse of Encode: `encoded` has EncodedSpec(decoded)'s layout.
  virtual Result<Buffer> Decode(const ChunkSpec& decoded, ByteView encoded) const = 0;
};

// array -> bytes (bytes, sharding_indexed).
class ArrayToBytesCodec : public Codec {
 public:
  virtual Result<Buffer> Encode(const ChunkSpec& spec, ByteView array) const = 0;
  // Encode with options (only sharding_indexed uses them).
  virtual Result<Buffer> Encode(const ChunkSpec& spec, ByteView array,
                                const EncodeOptions& options) const {
    return Encode(spec, array);
  }
  // An upper bound of the encoded size of a chunk of `spec`.
  virtual uint64_t MaxEncodedSize(const ChunkSpec& spec) const = 0;
  virtual Result<Buffer> Decode(const ChunkSpec& spec, ByteView encoded) const = 0;
  // True if Encode of a native little-endian array is the identity (bytes
  // codec with the host's byte order): lets writers skip a copy.
  virtual bool IsIdentity(const ChunkSpec&) const { return false; }
};

// A validated zarr v3 codec chain: [array->array]* array->bytes [bytes->bytes]*.
class CodecChain {
 public:
  CodecChain() = default;
  CodecChain(std::vector<std::shared_ptr<const ArrayCodec>> array_codecs,
             std::shared_ptr<const ArrayToBytesCodec> array_to_bytes,
             std::vector<std::shared_ptr<const BytesCodec>> bytes_codecs)
      : array_codecs_(std::move(array_codecs)),
        array_to_bytes_(std::move(array_to_bytes)),
        bytes_codecs_(std::move(bytes_codecs)) {}

  // Parses a zarr v3 `codecs` list for chunks described by `spec` (dtype,
  // rank and chunk shape are needed to validate, e.g. transpose orders,
  // sharding shapes, the bytes codec's `endian`). Unknown codec names,
  // missing required fields and inconsistent shapes are InvalidArgument.
  static Result<CodecChain> FromJson(const Json& codecs, const ChunkSpec& spec);

  Json ToJson() const;

  // Encodes a decoded chunk (`spec` layout) into stored bytes. REQUIRES:
  // array.size() == spec.num_bytes() (else InvalidArgument).
  Result<Buffer> Encode(const ChunkSpec& spec, ByteView array) const {
    return Encode(spec, array, EncodeOptions());
  }
  Result<Buffer> Encode(const ChunkSpec& spec, ByteView array, const EncodeOptions& options) const;
  // Decodes stored bytes into a decoded chunk of `spec` layout. Every
  // intermediate size is bounded by what `spec` allows (MaxEncodedSize), so
  // corrupt bytes cannot make it allocate more.
  Result<Buffer> Decode(const ChunkSpec& spec, ByteView encoded) const;
  // Decode into `out` (REQUIRES: out.size() == spec.num_bytes(), else
  // InvalidArgument). With no array->array codecs and an identity
  // array->bytes codec the last bytes->bytes codec writes straight into
  // `out` (zstd does), so a reader can decode into its destination with no
  // intermediate buffer; other chains decode and copy. DataLoss as Decode.
  Status DecodeInto(const ChunkSpec& spec, ByteView encoded, MutableByteView out) const;

  // An upper bound of the stored size of a chunk of `spec`.
  uint64_t MaxEncodedSize(const ChunkSpec& spec) const;
  // The spec seen by the array->bytes codec (after the array->array codecs).
  ChunkSpec ArrayToBytesSpec(const ChunkSpec& spec) const;
  // True if Encode of a native array is the identity (no array->array or
  // bytes->bytes codecs, and an identity array->bytes codec).
  bool IsIdentity(const ChunkSpec& spec) const;
  // The number of checksum bytes after the elements when the stored value
  // is the native array followed only by crc32c checksums (the identity
  // chain: 0; `bytes` then one `crc32c`: 4), so a reader may use the
  // elements in place once VerifyChecksummedIdentity passed; nullopt for
  // any other chain (two crc32c codecs included).
  std::optional<uint64_t> ChecksummedIdentityTrailer(const ChunkSpec& spec) const;
  // Checks the checksum of `stored` (spec.num_bytes() elements followed by
  // ChecksummedIdentityTrailer(spec) bytes) without copying: DataLoss
  // "crc32c mismatch ..." or a wrong size. REQUIRES: a trailer.
  Status VerifyChecksummedIdentity(const ChunkSpec& spec, ByteView stored) const;

  const std::vector<std::shared_ptr<const ArrayCodec>>& array_codecs() const {
    return array_codecs_;
  }
  const std::shared_ptr<const ArrayToBytesCodec>& array_to_bytes() const { return array_to_bytes_; }
  const std::vector<std::shared_ptr<const BytesCodec>>& bytes_codecs() const {
    return bytes_codecs_;
  }

 private:
  std::vector<std::shared_ptr<const ArrayCodec>> array_codecs_;
  std::shared_ptr<const ArrayToBytesCodec> array_to_bytes_;
  std::vector<std::shared_ptr<const BytesCodec>> bytes_codecs_;
};

// True if every element of `array` (a chunk of `spec`) equals
// spec.fill_value bytewise.
bool IsFillValue(const ChunkSpec& spec, ByteView array);

}  // namespace cairn
