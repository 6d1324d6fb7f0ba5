// CodecChain: parsing, formatting, encoding and decoding a zarr v3 codec
// chain. Encoding runs the codecs in list order, decoding in reverse; every
// decoder gets the largest size its output may have for this chunk spec.

#include <cstring>

#include "cairn/codec/codec.h"
#include "cairn/codec/crc32c_codec.h"
#include "cairn/codec/registry.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

std::string Where(size_t i) { return "codecs[" + std::to_string(i) + "]"; }

}  // namespace

bool IsFillValue(const ChunkSpec& spec, ByteView array) {
  const size_t es = DTypeSize(spec.dtype);
  if (array.empty()) return true;
  if (spec.fill_value.size() != es || array.size() % es != 0) return false;
  if (std::memcmp(array.data(), spec.fill_value.data(), es) != 0) return false;
  // Every element equals the first iff the bytes are periodic with period es.
  return std::memcmp(array.data(), array.data() + es, array.size() - es) == 0;
}

Result<CodecChain> CodecChain::FromJson(const Json& codecs, const ChunkSpec& spec) {
  if (!codecs.is_array()) {
    return InvalidArgumentError("codecs: expected a list, got " + DumpJson(codecs));
  }
  std::vector<std::shared_ptr<const ArrayCodec>> array_codecs;
  std::shared_ptr<const ArrayToBytesCodec> array_to_bytes;
  std::vector<std::shared_ptr<const BytesCodec>> bytes_codecs;
  ChunkSpec current = spec;
  for (size_t i = 0; i < codecs.size(); ++i) {
    const Json& entry = codecs[i];
    if (!entry.is_object()) {
      return InvalidArgumentError(Where(i) + ": expected an object {\"name\": ...}, got " +
                                  DumpJson(entry));
    }
    CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(entry, {"name", "configuration"}, Where(i)));
    CAIRN_ASSIGN_OR_RETURN(std::string name, GetStringField(entry, "name"));
    const Json* configuration = FindField(entry, "configuration");
    if (configuration != nullptr && !configuration->is_object()) {
      return InvalidArgumentError(Where(i) + ": configuration of `" + name +
                                  "` must be an object, got " + DumpJson(*configuration));
    }
    const CodecRegistration* reg = FindCodec(name);
    if (reg == nullptr) return InvalidArgumentError("unknown codec `" + name + "`");
    switch (reg->kind) {
      case CodecKind::kArrayToArray:
        if (array_to_bytes) {
          return InvalidArgumentError(Where(i) + ": array->array codec `" + name +
                                      "` after the array->bytes codec");
        }
        break;
      case CodecKind::kArrayToBytes:
        if (array_to_bytes) {
          return InvalidArgumentError(Where(i) + ": second array->bytes codec `" + name + "`");
        }
        break;
      case CodecKind::kBytesToBytes:
        if (!array_to_bytes) {
          return InvalidArgumentError(Where(i) + ": bytes->bytes codec `" + name +
                                      "` before any array->bytes codec");
        }
        break;
    }
    auto parsed = reg->parse(configuration, current);
    if (!parsed.ok()) return parsed.status().Annotate(Where(i));
    switch (reg->kind) {
      case CodecKind::kArrayToArray:
        current = parsed->array->EncodedSpec(current);
        array_codecs.push_back(std::move(parsed->array));
        break;
      case CodecKind::kArrayToBytes:
        array_to_bytes = std::move(parsed->array_to_bytes);
        break;
      case CodecKind::kBytesToBytes:
        bytes_codecs.push_back(std::move(parsed->bytes));
        break;
    }
  }
  if (!array_to_bytes) {
    return InvalidArgumentError("codecs: no array->bytes codec (such as `bytes`) in " +
                                DumpJson(codecs));
  }
  return CodecChain(std::move(array_codecs), std::move(array_to_bytes), std::move(bytes_codecs));
}

Json CodecChain::ToJson() const {
  Json j = Json::array();
  for (const auto& c : array_codecs_) j.push_back(c->ToJson());
  if (array_to_bytes_) j.push_back(array_to_bytes_->ToJson());
  for (const auto& c : bytes_codecs_) j.push_back(c->ToJson());
  return j;
}

ChunkSpec CodecChain::ArrayToBytesSpec(const ChunkSpec& spec) const {
  ChunkSpec s = spec;
  for (const auto& c : array_codecs_) s = c->EncodedSpec(s);
  return s;
}

bool CodecChain::IsIdentity(const ChunkSpec& spec) const {
  return array_codecs_.empty() && bytes_codecs_.empty() && array_to_bytes_ &&
         array_to_bytes_->IsIdentity(spec);
}

std::optional<uint64_t> CodecChain::ChecksummedIdentityTrailer(const ChunkSpec& spec) const {
  if (!array_codecs_.empty() || !array_to_bytes_ || !array_to_bytes_->IsIdentity(spec)) return std::nullopt;
  if (bytes_codecs_.empty()) return 0;
  if (bytes_codecs_.size() == 1 && dynamic_cast<const Crc32cCodec*>(bytes_codecs_[0].get()) != nullptr) {
    return 4;
  }
  return std::nullopt;
}

Status CodecChain::VerifyChecksummedIdentity(const ChunkSpec& spec, ByteView stored) const {
  const std::optional<uint64_t> trailer = ChecksummedIdentityTrailer(spec);
  if (!trailer) return FailedPreconditionError("the codec chain does not store the elements as they are");
  if (stored.size() != spec.num_bytes() + *trailer) {
    return DataLossError("chunk of " + std::to_string(stored.size()) + " stored bytes, expected " +
                         std::to_string(spec.num_bytes() + *trailer));
  }
  if (*trailer == 0) return Status::OK();
  return Crc32cCodec::Verify(stored).status();
}

uint64_t CodecChain::MaxEncodedSize(const ChunkSpec& spec) const {
  if (!array_to_bytes_) return 0;
  uint64_t n = array_to_bytes_->MaxEncodedSize(ArrayToBytesSpec(spec));
  for (const auto& c : bytes_codecs_) n = c->MaxEncodedSize(n);
  return n;
}

Result<Buffer> CodecChain::Encode(const ChunkSpec& spec, ByteView array,
                                  const EncodeOptions& options) const {
  if (!array_to_bytes_) return FailedPreconditionError("codec chain is empty");
  if (array.size() != spec.num_bytes()) {
    return InvalidArgumentError("encoding a chunk: " + std::to_string(array.size()) +
                                " bytes given, the chunk spec needs " +
                                std::to_string(spec.num_bytes()));
  }
  ChunkSpec current = spec;
  Buffer owned;
  ByteView view = array;
  bool have_owned = false;
  for (const auto& c : array_codecs_) {
    CAIRN_ASSIGN_OR_RETURN(owned, c->Encode(current, view));
    have_owned = true;
    view = owned.view();
    current = c->EncodedSpec(current);
  }
  if (!(array_to_bytes_->IsIdentity(current) && !bytes_codecs_.empty())) {
    CAIRN_ASSIGN_OR_RETURN(owned, array_to_bytes_->Encode(current, view, options));
    have_owned = true;
    view = owned.view();
  }
  for (const auto& c : bytes_codecs_) {
    CAIRN_ASSIGN_OR_RETURN(owned, c->Encode(view));
    have_owned = true;
    view = owned.view();
  }
  if (!have_owned) return Buffer::CopyOf(view);
  return owned;
}

Result<Buffer> CodecChain::Decode(const ChunkSpec& spec, ByteView encoded) const {
  if (!array_to_bytes_) return FailedPreconditionError("codec chain is empty");
  // A chain whose bytes codecs' output is the chunk itself (the identity
  // array->bytes codec, at most one compressor before trailing crc32c
  // codecs): decoded by DecodeInto straight into a buffer of the chunk's
  // size, known from the spec, never from the stored bytes. A zstd frame
  // declaring that size decodes in one shot whatever its ratio (the bounded
  // path below grows its output in steps past 64x).
  if (array_codecs_.empty() && array_to_bytes_->IsIdentity(spec)) {
    size_t compressors = bytes_codecs_.size();
    while (compressors > 0 &&
           dynamic_cast<const Crc32cCodec*>(bytes_codecs_[compressors - 1].get()) != nullptr) {
      --compressors;
    }
    if (compressors <= 1) {
      CAIRN_ASSIGN_OR_RETURN(Buffer chunk, Buffer::TryAllocate(spec.num_bytes(), "a decoded chunk"));
      CAIRN_RETURN_IF_ERROR(DecodeInto(spec, encoded, chunk.mutable_view()));
      return chunk;
    }
  }
  std::vector<ChunkSpec> specs = {spec};
  for (const auto& c : array_codecs_) specs.push_back(c->EncodedSpec(specs.back()));
  const ChunkSpec& a2b_spec = specs.back();
  // bounds[k] = the largest decoded output of bytes codec k: exact for the
  // first (the array->bytes output), with slack for other encoders' framing
  // after that.
  std::vector<uint64_t> bounds = {array_to_bytes_->MaxEncodedSize(a2b_spec)};
  for (const auto& c : bytes_codecs_) {
    const uint64_t b = c->MaxEncodedSize(bounds.back());
    bounds.push_back(b + b / 8 + 4096);
  }
  Buffer owned;
  ByteView view = encoded;
  for (size_t k = bytes_codecs_.size(); k-- > 0;) {
    const BytesCodec& c = *bytes_codecs_[k];
    if (dynamic_cast<const Crc32cCodec*>(&c) != nullptr) {
      CAIRN_ASSIGN_OR_RETURN(view, Crc32cCodec::Verify(view));  // a prefix: no copy
      continue;
    }
    CAIRN_ASSIGN_OR_RETURN(Buffer next, c.Decode(view, bounds[k]));
    owned = std::move(next);
    view = owned.view();
  }
  Buffer array;
  if (array_to_bytes_->IsIdentity(a2b_spec) && view.size() == a2b_spec.num_bytes() &&
      !owned.empty() && view.data() == owned.data()) {
    owned.resize(view.size());  // shrinking keeps the bytes
    array = std::move(owned);
  } else {
    CAIRN_ASSIGN_OR_RETURN(array, array_to_bytes_->Decode(a2b_spec, view));
  }
  for (size_t i = array_codecs_.size(); i-- > 0;) {
    CAIRN_ASSIGN_OR_RETURN(array, array_codecs_[i]->Decode(specs[i], array.view()));
  }
  return array;
}

namespace {

// Copies `bytes` into `out`, which must be as long: DataLoss otherwise.
Status CopyExactly(ByteView bytes, MutableByteView out) {
  if (bytes.size() != out.size()) {
    return DataLossError("chunk decoded to " + std::to_string(bytes.size()) + " bytes, expected " +
                         std::to_string(out.size()));
  }
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size());
  return Status::OK();
}

}  // namespace

Status BytesCodec::DecodeInto(ByteView encoded, MutableByteView out) const {
  CAIRN_ASSIGN_OR_RETURN(Buffer decoded, Decode(encoded, out.size()));
  return CopyExactly(decoded.view(), out).Annotate(std::string(name()) + " codec");
}

Status CodecChain::DecodeInto(const ChunkSpec& spec, ByteView encoded, MutableByteView out) const {
  if (!array_to_bytes_) return FailedPreconditionError("codec chain is empty");
  const uint64_t n = spec.num_bytes();
  if (out.size() != n) {
    return InvalidArgumentError("decoding a chunk of " + std::to_string(n) + " bytes into " +
                                std::to_string(out.size()));
  }
  // The identity array->bytes codec: the bytes codecs' output is the chunk.
  // Trailing crc32c codecs verify in place; a single compressor left
  // decodes straight into `out`. Other chains (array->array codecs, two
  // compressors) decode whole and copy.
  const bool identity = array_codecs_.empty() && array_to_bytes_->IsIdentity(spec);
  if (identity && bytes_codecs_.size() == 1 &&
      dynamic_cast<const Crc32cCodec*>(bytes_codecs_[0].get()) != nullptr) {
    return Crc32cCodec::CopyVerified(encoded, out);  // copy and check in one pass
  }
  size_t last = identity ? bytes_codecs_.size() : 0;
  ByteView view = encoded;
  for (; last > 0; --last) {
    const BytesCodec& c = *bytes_codecs_[last - 1];
    if (dynamic_cast<const Crc32cCodec*>(&c) == nullptr) break;
    CAIRN_ASSIGN_OR_RETURN(view, Crc32cCodec::Verify(view));
  }
  if (identity && last == 0) return CopyExactly(view, out);
  if (identity && last == 1) return bytes_codecs_[0]->DecodeInto(view, out);
  CAIRN_ASSIGN_OR_RETURN(Buffer decoded, Decode(spec, encoded));
  return CopyExactly(decoded.view(), out);
}

}  // namespace cairn
