// Sealed messages of the ZeroMQ transport (peer_seal.h): pair keys agree
// across the pair and differ by direction; anything altered (a bit of a
// part or of the header, a part boundary moved, a part dropped, another
// key, another counter) fails to open.
#include "cairn/emergency/peer_seal.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cairn::emergency::peer_seal {
namespace {

struct Pair {
  KeyPair a, b;
  PairKeys ab, ba;  // a's keys toward b, b's toward a
  Pair() {
    a = *NewKeyPair();
    b = *NewKeyPair();
    ab = *DerivePairKeys(a, b.public_key);
    ba = *DerivePairKeys(b, a.public_key);
  }
};

std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

TEST(PeerSeal, PairKeysAgreeAcrossThePairAndDifferByDirection) {
  Pair p;
  EXPECT_EQ(p.ab.send, p.ba.receive);
  EXPECT_EQ(p.ab.receive, p.ba.send);
  EXPECT_NE(p.ab.send, p.ab.receive);
  KeyPair c = *NewKeyPair();
  EXPECT_NE(DerivePairKeys(c, p.b.public_key)->send, p.ab.send);  // another process, another key
}

TEST(PeerSeal, ASealedMessageOpensOnlyAsItWasSealed) {
  Pair p;
  const std::vector<uint8_t> frame0 = Bytes("frame of twenty bytes");
  const std::vector<uint8_t> data0 = Bytes("the piece's values, 35 bytes long..");
  std::vector<uint8_t> frame = frame0, data = data0;
  std::array<uint8_t, kHeaderBytes> header{};
  const MutableByteView parts[] = {frame, data};
  ASSERT_TRUE(Seal(p.ab.send, {3, 7, 42}, parts, header).ok());
  EXPECT_NE(frame, frame0);  // encrypted in place
  EXPECT_NE(data, data0);
  auto h = ReadHeader(header);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->sender, 3u);
  EXPECT_EQ(h->tag, 7u);
  EXPECT_EQ(h->counter, 42u);

  // Each alteration on a copy of the sealed message.
  auto opens = [&](auto alter) {
    std::vector<uint8_t> f = frame, d = data;
    std::array<uint8_t, kHeaderBytes> hd = header;
    std::vector<MutableByteView> ps = {MutableByteView(f), MutableByteView(d)};
    Key key = p.ba.receive;
    alter(f, d, hd, ps, key);
    return Open(key, hd, ps);
  };
  auto none = [](auto&, auto&, auto&, auto&, auto&) {};
  EXPECT_TRUE(opens(none).ok());
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    EXPECT_EQ(opens([&](auto&, auto&, auto& hd, auto&, auto&) { hd[i] ^= 1; }).code(), StatusCode::kDataLoss) << i;
  }
  EXPECT_FALSE(opens([](auto&, auto& d, auto&, auto&, auto&) { d[34] ^= 0x80; }).ok());
  EXPECT_FALSE(opens([](auto& f, auto&, auto&, auto&, auto&) { f[0] ^= 1; }).ok());
  // The boundary between the parts moved by one byte: same bytes in order.
  EXPECT_FALSE(opens([](auto& f, auto& d, auto&, auto& ps, auto&) {
                 std::vector<uint8_t> all(f);
                 all.insert(all.end(), d.begin(), d.end());
                 f.assign(all.begin(), all.begin() + 22);
                 d.assign(all.begin() + 22, all.end());
                 ps = {MutableByteView(f), MutableByteView(d)};
               }).ok());
  EXPECT_FALSE(opens([](auto& f, auto&, auto&, auto& ps, auto&) { ps = {MutableByteView(f)}; }).ok());
  EXPECT_FALSE(opens([&](auto&, auto&, auto&, auto&, auto& key) { key = p.ba.send; }).ok());  // the other direction
  const KeyPair c = *NewKeyPair();
  EXPECT_FALSE(opens([&](auto&, auto&, auto&, auto&, auto& key) {
                 key = DerivePairKeys(c, p.a.public_key)->receive;  // a third process's pair with a
               }).ok());

  // Opened as sealed: the plaintext back, in place.
  std::vector<MutableByteView> ps = {MutableByteView(frame), MutableByteView(data)};
  ASSERT_TRUE(Open(p.ba.receive, header, ps).ok());
  EXPECT_EQ(frame, frame0);
  EXPECT_EQ(data, data0);
}

// The header tag is checked first and alone: a message not sealed under
// the key is refused before any of its payload is decrypted, and the
// header's check needs only the parts' sizes.
TEST(PeerSeal, TheHeaderIsCheckedBeforeThePayload) {
  Pair p;
  std::vector<uint8_t> data = Bytes("payload bytes");
  std::array<uint8_t, kHeaderBytes> header{};
  const MutableByteView parts[] = {data};
  ASSERT_TRUE(Seal(p.ab.send, {0, 2, 5}, parts, header).ok());
  const size_t right[] = {data.size()}, wrong[] = {data.size() + 1}, two[] = {data.size(), 0};
  EXPECT_TRUE(CheckHeader(p.ba.receive, header, right).ok());
  EXPECT_EQ(CheckHeader(p.ba.receive, header, wrong).code(), StatusCode::kDataLoss);
  EXPECT_EQ(CheckHeader(p.ba.receive, header, two).code(), StatusCode::kDataLoss);
  EXPECT_EQ(CheckHeader(p.ba.send, header, right).code(), StatusCode::kDataLoss);
  const std::vector<uint8_t> sealed = data;
  EXPECT_FALSE(Open(p.ba.send, header, parts).ok());  // another key: refused at the header
  EXPECT_EQ(data, sealed);                            // nothing decrypted
  // A payload altered under a valid header fails at the payload's tag.
  data[0] ^= 1;
  EXPECT_TRUE(CheckHeader(p.ba.receive, header, right).ok());
  EXPECT_EQ(Open(p.ba.receive, header, parts).code(), StatusCode::kDataLoss);
}

TEST(PeerSeal, OnePartAndEmptyParts) {
  Pair p;
  std::vector<uint8_t> empty;
  std::array<uint8_t, kHeaderBytes> header{};
  const MutableByteView one[] = {empty};
  ASSERT_TRUE(Seal(p.ab.send, {0, 1, 1}, one, header).ok());
  EXPECT_TRUE(Open(p.ba.receive, header, one).ok());
  header[20] ^= 4;
  EXPECT_FALSE(Open(p.ba.receive, header, one).ok());
}

TEST(PeerSeal, TheSameBytesSealDifferentlyUnderAnotherCounter) {
  Pair p;
  std::vector<uint8_t> x = Bytes("same"), y = Bytes("same");
  std::array<uint8_t, kHeaderBytes> hx{}, hy{};
  const MutableByteView px[] = {x}, py[] = {y};
  ASSERT_TRUE(Seal(p.ab.send, {0, 1, 1}, px, hx).ok());
  ASSERT_TRUE(Seal(p.ab.send, {0, 1, 2}, py, hy).ok());
  EXPECT_NE(x, y);
  // A header carrying another counter does not open the other's bytes.
  std::copy(hy.begin(), hy.end(), hx.begin());
  EXPECT_FALSE(Open(p.ba.receive, hx, px).ok());
}

// Sealing out of place gives the very message sealing in place gives, and
// leaves its source as it was (a mapped file the sender keeps).
TEST(PeerSeal, SealingOutOfPlaceMatchesInPlaceAndLeavesTheSource) {
  Pair p;
  std::vector<uint8_t> source(100000);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
  const std::vector<uint8_t> original = source;
  std::vector<uint8_t> frame = Bytes("frame"), frame_in_place = frame;
  std::vector<uint8_t> out(source.size()), in_place = source;
  std::array<uint8_t, kHeaderBytes> h_out{}, h_in{};
  const MutableByteView parts[] = {frame, out};
  const ByteView from[] = {frame, source};  // the frame is its own source
  ASSERT_TRUE(SealFrom(p.ab.send, {1, 2, 5}, from, parts, h_out).ok());
  const MutableByteView parts_in[] = {frame_in_place, in_place};
  ASSERT_TRUE(Seal(p.ab.send, {1, 2, 5}, parts_in, h_in).ok());
  EXPECT_EQ(source, original);
  EXPECT_EQ(out, in_place);
  EXPECT_EQ(frame, frame_in_place);
  EXPECT_EQ(h_out, h_in);
  EXPECT_NE(out, original);
  ASSERT_TRUE(Open(p.ba.receive, h_out, parts).ok());
  EXPECT_EQ(out, original);
  EXPECT_EQ(frame, Bytes("frame"));
  // Sources of other sizes or count than the parts are refused.
  const ByteView short_source[] = {frame, ByteView(source.data(), source.size() - 1)};
  EXPECT_EQ(SealFrom(p.ab.send, {1, 2, 6}, short_source, parts, h_out).code(), StatusCode::kInvalidArgument);
  const ByteView one_source[] = {frame};
  EXPECT_EQ(SealFrom(p.ab.send, {1, 2, 6}, one_source, parts, h_out).code(), StatusCode::kInvalidArgument);
}

TEST(PeerSeal, BadArgumentsAndHeaders) {
  Pair p;
  std::vector<uint8_t> a = Bytes("a");
  std::array<uint8_t, kHeaderBytes> header{};
  const MutableByteView one[] = {a};
  EXPECT_EQ(Seal(p.ab.send, {0, 1, 0}, one, header).code(), StatusCode::kInvalidArgument);  // counter 0
  const MutableByteView three[] = {a, a, a};
  EXPECT_EQ(Seal(p.ab.send, {0, 1, 1}, three, header).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Seal(p.ab.send, {0, 1, 1}, std::span<const MutableByteView>(), header).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadHeader(ByteView(header.data(), 31)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(Open(p.ba.receive, ByteView(header.data(), 31), one).code(), StatusCode::kDataLoss);
  EXPECT_EQ(Open(p.ba.receive, header, three).code(), StatusCode::kDataLoss);
  // A low-order point (all zeros) as the peer's key gives no secret.
  EXPECT_EQ(DerivePairKeys(p.a, Key{}).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn::emergency::peer_seal
