// X25519 pair keys and AES-256-GCM messages (peer_seal.h).
#include "cairn/emergency/peer_seal.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "cairn/util/coding.h"

namespace cairn::emergency::peer_seal {
namespace {

constexpr size_t kAdFieldsBytes = 16;  // sender, tag, counter
constexpr size_t kTagBytes = 16;
constexpr size_t kHeaderTagAt = kAdFieldsBytes;
constexpr size_t kPayloadTagAt = kAdFieldsBytes + kTagBytes;
constexpr uint8_t kPayloadDomain = 0, kHeaderDomain = 1;

Status OpenSslError(const std::string& what) {
  char text[256] = {};
  ERR_error_string_n(ERR_get_error(), text, sizeof text);
  return InternalError(what + ": " + text);
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
struct KdfFree {
  void operator()(EVP_KDF* p) const { EVP_KDF_free(p); }
};
struct KdfCtxFree {
  void operator()(EVP_KDF_CTX* p) const { EVP_KDF_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

// HKDF-SHA256(secret, kSaltText, info) -> 32 bytes.
Result<Key> Expand(const uint8_t* secret, size_t secret_size, const std::string& info) {
  std::unique_ptr<EVP_KDF, KdfFree> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kdf) return OpenSslError("fetching HKDF");
  std::unique_ptr<EVP_KDF_CTX, KdfCtxFree> ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) return OpenSslError("HKDF context");
  char digest[] = "SHA256";
  std::string salt = kSaltText;
  std::string info_copy = info;
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(secret), secret_size),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt.data(), salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info_copy.data(), info_copy.size()),
      OSSL_PARAM_construct_end()};
  Key out{};
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) return OpenSslError("HKDF-SHA256");
  return out;
}

std::string Text(const Key& k) { return std::string(reinterpret_cast<const char*>(k.data()), k.size()); }

// The associated data: the header's fields, the part count and lengths.
std::string AssociatedData(const uint8_t fields[kAdFieldsBytes], std::span<const size_t> sizes) {
  std::string ad(reinterpret_cast<const char*>(fields), kAdFieldsBytes);
  uint8_t n[8];
  StoreLE64(n, sizes.size());
  ad.append(reinterpret_cast<const char*>(n), 8);
  for (size_t size : sizes) {
    StoreLE64(n, size);
    ad.append(reinterpret_cast<const char*>(n), 8);
  }
  return ad;
}

void Nonce(uint8_t domain, uint64_t counter, uint8_t out[12]) {
  std::memset(out, 0, 4);
  out[0] = domain;
  StoreLE64(out + 4, counter);
}

Status CheckSizes(std::span<const size_t> sizes) {
  if (sizes.empty() || sizes.size() > 2) {
    return InvalidArgumentError("a sealed message has 1 or 2 parts, not " + std::to_string(sizes.size()));
  }
  for (size_t size : sizes) {
    if (size >= size_t{INT_MAX}) return InvalidArgumentError("a sealed message part of 2 GiB or more");
  }
  return Status::OK();
}

struct Sizes {
  std::vector<size_t> v;
  explicit Sizes(std::span<const MutableByteView> parts) {
    for (const MutableByteView& p : parts) v.push_back(p.size());
  }
  std::span<const size_t> span() const { return v; }
};

// AES-256-GCM over `ad` and `parts` (none for the header tag), encrypting
// or decrypting, from `from` (the same sizes) or, when it is empty, in
// place. Sealing writes the tag into `tag`; opening checks it (false when
// it fails).
Result<bool> Gcm(bool encrypt, const Key& key, uint8_t domain, uint64_t counter, const std::string& ad,
                 std::span<const MutableByteView> parts, uint8_t tag[kTagBytes], std::span<const ByteView> from = {}) {
  uint8_t nonce[12];
  Nonce(domain, counter, nonce);
  std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx(EVP_CIPHER_CTX_new());
  int n = 0;
  if (!ctx || EVP_CipherInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce, encrypt ? 1 : 0) != 1 ||
      EVP_CipherUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const uint8_t*>(ad.data()),
                       static_cast<int>(ad.size())) != 1) {
    return OpenSslError("AES-256-GCM");
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const MutableByteView& p = parts[i];
    const uint8_t* in = from.empty() ? p.data() : from[i].data();
    if (!p.empty() && EVP_CipherUpdate(ctx.get(), p.data(), &n, in, static_cast<int>(p.size())) != 1) {
      return OpenSslError("AES-256-GCM");
    }
  }
  uint8_t tail[16];
  if (encrypt) {
    if (EVP_CipherFinal_ex(ctx.get(), tail, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) != 1) {
      return OpenSslError("AES-256-GCM");
    }
    return true;
  }
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) != 1) return OpenSslError("AES-256-GCM");
  const bool ok = EVP_CipherFinal_ex(ctx.get(), tail, &n) == 1;
  ERR_clear_error();
  return ok;
}

Status NotSealed() {
  return DataLossError("a sealed message failed its authentication (altered, or not sealed for this process)");
}

}  // namespace

Result<KeyPair> NewKeyPair() {
  Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519"));
  if (!key) return OpenSslError("making an X25519 keypair");
  KeyPair pair;
  size_t pub = pair.public_key.size(), sec = pair.secret_key.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), pair.public_key.data(), &pub) != 1 ||
      EVP_PKEY_get_raw_private_key(key.get(), pair.secret_key.data(), &sec) != 1 || pub != kKeyBytes ||
      sec != kKeyBytes) {
    return OpenSslError("reading the X25519 keypair");
  }
  return pair;
}

Result<PairKeys> DerivePairKeys(const KeyPair& self, const Key& peer_public) {
  Pkey mine(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, self.secret_key.data(), kKeyBytes));
  Pkey theirs(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(), kKeyBytes));
  if (!mine || !theirs) return OpenSslError("loading X25519 keys");
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(EVP_PKEY_CTX_new(mine.get(), nullptr));
  uint8_t shared[kKeyBytes] = {};
  size_t size = sizeof shared;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 || EVP_PKEY_derive_set_peer(ctx.get(), theirs.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), shared, &size) != 1 || size != kKeyBytes) {
    ERR_clear_error();
    return DataLossError("a peer's X25519 public key gives no shared secret");
  }
  uint8_t any = 0;
  for (uint8_t b : shared) any |= b;
  if (any == 0) return DataLossError("a peer's X25519 public key is a low-order point");
  PairKeys keys;
  CAIRN_ASSIGN_OR_RETURN(keys.send, Expand(shared, size, Text(self.public_key) + Text(peer_public)));
  CAIRN_ASSIGN_OR_RETURN(keys.receive, Expand(shared, size, Text(peer_public) + Text(self.public_key)));
  OPENSSL_cleanse(shared, sizeof shared);
  return keys;
}

Status Seal(const Key& key, const Header& header, std::span<const MutableByteView> parts,
            std::array<uint8_t, kHeaderBytes>& out) {
  return SealFrom(key, header, {}, parts, out);
}

Status SealFrom(const Key& key, const Header& header, std::span<const ByteView> from,
                std::span<const MutableByteView> parts, std::array<uint8_t, kHeaderBytes>& out) {
  const Sizes sizes(parts);
  CAIRN_RETURN_IF_ERROR(CheckSizes(sizes.span()));
  if (!from.empty()) {
    bool same = from.size() == parts.size();
    for (size_t i = 0; same && i < parts.size(); ++i) same = from[i].size() == parts[i].size();
    if (!same) return InvalidArgumentError("sealing out of place from sources of other sizes than the parts");
  }
  if (header.counter == 0) return InvalidArgumentError("a sealed message's counter starts at 1");
  StoreLE32(out.data(), header.sender);
  StoreLE32(out.data() + 4, header.tag);
  StoreLE64(out.data() + 8, header.counter);
  const std::string ad = AssociatedData(out.data(), sizes.span());
  CAIRN_RETURN_IF_ERROR(Gcm(true, key, kHeaderDomain, header.counter, ad, {}, out.data() + kHeaderTagAt).status());
  return Gcm(true, key, kPayloadDomain, header.counter, ad, parts, out.data() + kPayloadTagAt, from).status();
}

Result<Header> ReadHeader(ByteView bytes) {
  if (bytes.size() != kHeaderBytes) {
    return DataLossError("a sealed message's header of " + std::to_string(bytes.size()) + " bytes, not " +
                         std::to_string(kHeaderBytes));
  }
  return Header{LoadLE32(bytes.data()), LoadLE32(bytes.data() + 4), LoadLE64(bytes.data() + 8)};
}

Status CheckHeader(const Key& key, ByteView header, std::span<const size_t> part_sizes) {
  CAIRN_ASSIGN_OR_RETURN(Header h, ReadHeader(header));
  if (Status s = CheckSizes(part_sizes); !s.ok()) return DataLossError(std::string(s.message()));
  if (h.counter == 0) return DataLossError("a sealed message with counter 0");
  uint8_t tag[kTagBytes];
  std::memcpy(tag, header.data() + kHeaderTagAt, kTagBytes);
  CAIRN_ASSIGN_OR_RETURN(bool ok, Gcm(false, key, kHeaderDomain, h.counter, AssociatedData(header.data(), part_sizes),
                                      {}, tag));
  return ok ? Status::OK() : NotSealed();
}

Status Open(const Key& key, ByteView header, std::span<const MutableByteView> parts) {
  const Sizes sizes(parts);
  CAIRN_RETURN_IF_ERROR(CheckHeader(key, header, sizes.span()));
  const uint64_t counter = LoadLE64(header.data() + 8);
  uint8_t tag[kTagBytes];
  std::memcpy(tag, header.data() + kPayloadTagAt, kTagBytes);
  CAIRN_ASSIGN_OR_RETURN(bool ok, Gcm(false, key, kPayloadDomain, counter, AssociatedData(header.data(), sizes.span()),
                                      parts, tag));
  return ok ? Status::OK() : NotSealed();
}

}  // namespace cairn::emergency::peer_seal
