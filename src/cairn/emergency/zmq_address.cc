// CURVE keys, ZAP answers and the bind address (zmq_curve.h).
#include "cairn/emergency/zmq_curve.h"

#if CAIRN_HAVE_ZMQ

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <charconv>
#include <vector>

namespace cairn::emergency::zmq_curve {

Result<Keys> NewKeys() {
  if (!zmq_has("curve")) return UnimplementedError("this libzmq was built without CURVE (libsodium)");
  char pub[41] = {}, sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return InternalError(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
  }
  return Keys{std::string(pub, 40), std::string(sec, 40)};
}

Result<std::string> DecodeKey(const std::string& z85) {
  uint8_t key[32];
  if (z85.size() != 40 || zmq_z85_decode(key, z85.c_str()) == nullptr) {
    return DataLossError("not a Z85 CURVE key: `" + z85.substr(0, 64) + "`");
  }
  return std::string(reinterpret_cast<const char*>(key), sizeof key);
}

namespace {

// The frames of one message on `socket` (all of them, whatever their count).
std::vector<std::string> ReceiveFrames(void* socket) {
  std::vector<std::string> frames;
  int more = 1;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, socket, 0) < 0) {
      zmq_msg_close(&m);
      break;
    }
    if (frames.size() < 16) frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  }
  return frames;
}

}  // namespace

bool AnswerZapRequest(void* handler, const std::map<std::string, int>& members, std::string& peer) {
  // Request (RFC 27): version, request id, domain, address, identity,
  // mechanism, credentials (CURVE: the client's 32-byte public key).
  const std::vector<std::string> request = ReceiveFrames(handler);
  int index = -1;
  if (request.size() == 7 && request[0] == "1.0" && request[5] == "CURVE") {
    auto it = members.find(request[6]);
    if (it != members.end()) index = it->second;
  }
  peer = request.size() > 3 ? request[3] : "";
  const std::string user = index >= 0 ? std::to_string(index) : "";
  // Always answered (a REP socket must reply before its next request).
  const std::string reply[6] = {"1.0", request.size() > 1 ? request[1] : "", index >= 0 ? "200" : "400",
                                index >= 0 ? "OK" : "not a process of this job", user, ""};
  for (int i = 0; i < 6; ++i) zmq_send(handler, reply[i].data(), reply[i].size(), i < 5 ? ZMQ_SNDMORE : 0);
  return index >= 0;
}

Result<BindAddress> ResolveBindAddress(const std::string& host) {
  std::string name = host;
  if (name.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return UnavailableError("gethostname failed");
    name = buf;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(name.c_str(), nullptr, &hints, &found); rc != 0) {
    return UnavailableError("resolving `" + name + "`, the address to advertise for the ZeroMQ transport: " +
                            gai_strerror(rc));
  }
  std::vector<BindAddress> candidates;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    BindAddress b;
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      b.loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope to bind
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
      b.ipv6 = true;
      b.loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      continue;
    }
    b.ip = text;
    candidates.push_back(b);
  }
  freeaddrinfo(found);
  if (candidates.empty()) return UnavailableError("`" + name + "` resolves to no IP address to bind");
  for (const BindAddress& b : candidates) {
    if (!b.loopback) return b;
  }
  return candidates.front();
}

}  // namespace cairn::emergency::zmq_curve

#endif  // CAIRN_HAVE_ZMQ
