// Sealing the ZeroMQ transport's messages: every message a process sends
// to a peer is encrypted and authenticated under a key only the two of them
// can derive (zmq_transport.h has the handshake, step by step;
// docs/PEER_TRANSPORT.md says why this and not libzmq's CURVE).
//
//   - Keys: each process makes an X25519 keypair when its transport is
//     created (OpenSSL, the system's random source). Only public keys pass
//     through the job's coordinator.
//   - Pair keys: the X25519 shared secret of a pair, expanded with
//     HKDF-SHA256 (salt kSaltText, info "<sender's public key><receiver's
//     public key>") into one 32-byte key per direction.
//   - A message: a 48-byte header {sender u32, tag u32, counter u64, header
//     tag 16 bytes, payload tag 16 bytes} (little-endian) and 1 or 2
//     payload parts, encrypted in place with AES-256-GCM under the
//     sender->receiver key. The associated data of both tags is the
//     header's first 16 bytes, the number of parts and each part's length,
//     so a part boundary moved, a part dropped or a header edited fails the
//     check like a flipped bit. The header tag is GCM's over that alone (no
//     plaintext), so a receiver drops a forged message after checking a
//     few dozen bytes (CheckHeader), before decrypting any of its payload.
//   - Nonces: a domain byte (1: the header tag, 0: the payload), 3 zero
//     bytes, then the counter (little-endian). A sender numbers its
//     messages to each peer 1, 2, 3, ... and never reuses a number under a
//     key, so no nonce repeats under a key.
//
// Pure: no sockets, no state beyond its arguments. A receiver keeps the
// highest counter it opened per sender and drops anything not above it
// (replays); that is the transport's part.
//
// Thread safety: functions are independent and reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "cairn/result.h"
#include "cairn/util/buffer.h"

namespace cairn::emergency::peer_seal {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kHeaderBytes = 48;
inline constexpr char kSaltText[] = "cairn peer transport v1";

using Key = std::array<uint8_t, kKeyBytes>;

struct KeyPair {
  Key public_key{};
  Key secret_key{};
};
// A fresh X25519 keypair. Internal for a failure of OpenSSL's.
Result<KeyPair> NewKeyPair();

// The keys of the pair (self, peer): `send` seals what self sends to peer,
// `receive` opens what peer sends to self (the peer derives them the other
// way round). DataLoss for a peer key that gives no shared secret (a
// low-order point).
struct PairKeys {
  Key send{};
  Key receive{};
};
Result<PairKeys> DerivePairKeys(const KeyPair& self, const Key& peer_public);

struct Header {
  uint32_t sender = 0;
  uint32_t tag = 0;
  uint64_t counter = 0;
};

// Encrypts `parts` in place (1 or 2, each under 2 GiB) under `key`, and
// writes the header with the authentication tag into `out`.
// InvalidArgument for counter 0, a part count other than 1 or 2, or a part
// of 2 GiB or more.
Status Seal(const Key& key, const Header& header, std::span<const MutableByteView> parts,
            std::array<uint8_t, kHeaderBytes>& out);

// Seal out of place: encrypts `from` into `parts` (the same sizes, part by
// part; a part may be its own source), in the cipher's one pass over the
// bytes, so bytes the caller keeps (a mapped file) cost no copy of their
// own. InvalidArgument as Seal, and for sources of other sizes.
Status SealFrom(const Key& key, const Header& header, std::span<const ByteView> from,
                std::span<const MutableByteView> parts, std::array<uint8_t, kHeaderBytes>& out);

// The header's fields, unchecked (which key to open with, whether the
// counter is new). DataLoss when `bytes` is not kHeaderBytes long.
Result<Header> ReadHeader(ByteView bytes);

// Checks the header tag against the header's fields and the parts' sizes,
// without reading the parts. DataLoss when it fails (not sealed under
// `key`, or altered).
Status CheckHeader(const Key& key, ByteView header, std::span<const size_t> part_sizes);

// Checks the header (CheckHeader), then decrypts `parts` in place under
// `key` and checks the payload tag. DataLoss when anything was altered
// (the parts are then garbage and must be dropped).
Status Open(const Key& key, ByteView header, std::span<const MutableByteView> parts);

}  // namespace cairn::emergency::peer_seal
