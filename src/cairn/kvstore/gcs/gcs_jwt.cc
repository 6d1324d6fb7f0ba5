#include "cairn/kvstore/gcs/gcs_jwt.h"

#include <nlohmann/json.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstring>
#include <memory>

namespace cairn::gcs {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// OpenSSL's last error, for messages (and the queue cleared).
std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  std::string out;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out = buf;
  }
  ERR_clear_error();
  return out.empty() ? "unknown OpenSSL error" : out;
}

}  // namespace

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (bytes.size() - i == 1) {
    uint32_t v = at(i) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
  } else if (bytes.size() - i == 2) {
    uint32_t v = at(i) << 16 | at(i + 1) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

Result<std::string> Base64UrlDecode(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const char* p = c == '\0' ? nullptr : std::strchr(kAlphabet, c);
    if (p == nullptr) {
      return InvalidArgumentError("base64url: unexpected character (code " +
                                  std::to_string(static_cast<unsigned char>(c)) + ")");
    }
    acc = acc << 6 | static_cast<uint32_t>(p - kAlphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

Result<std::string> SignServiceAccountJwt(const ServiceAccountKey& key, std::string_view scope,
                                          int64_t now_seconds, std::string_view where) {
  const std::string what = "signing a token request with the private key of `" + key.client_email +
                           "` from " + std::string(where);
  nlohmann::json header = {{"alg", "RS256"}, {"typ", "JWT"}};
  if (!key.private_key_id.empty()) header["kid"] = key.private_key_id;
  nlohmann::json claims = {{"iss", key.client_email},
                           {"scope", std::string(scope)},
                           {"aud", key.token_uri},
                           {"iat", now_seconds},
                           {"exp", now_seconds + 3600}};
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  std::string signing_input = Base64UrlEncode(header.dump(-1, ' ', false, kReplace)) + "." +
                              Base64UrlEncode(claims.dump(-1, ' ', false, kReplace));

  if (key.private_key.size() > (1 << 20)) {
    return InvalidArgumentError(what + ": `private_key` is larger than 1 MiB");
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(key.private_key.data(), static_cast<int>(key.private_key.size())), &BIO_free);
  if (!bio) return ResourceExhaustedError(what + ": " + OpenSslError());
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!pkey) {
    return InvalidArgumentError(what + ": `private_key` is not a readable PEM private key (" +
                                OpenSslError() + ")");
  }
  if (EVP_PKEY_get_base_id(pkey.get()) != EVP_PKEY_RSA) {
    return InvalidArgumentError(what + ": `private_key` is not an RSA key (RS256 needs one)");
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  size_t sig_len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &sig_len,
                     reinterpret_cast<const unsigned char*>(signing_input.data()),
                     signing_input.size()) != 1) {
    return InvalidArgumentError(what + ": " + OpenSslError());
  }
  std::string sig(sig_len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &sig_len,
                     reinterpret_cast<const unsigned char*>(signing_input.data()),
                     signing_input.size()) != 1) {
    return InvalidArgumentError(what + ": " + OpenSslError());
  }
  sig.resize(sig_len);
  return signing_input + "." + Base64UrlEncode(sig);
}

}  // namespace cairn::gcs
