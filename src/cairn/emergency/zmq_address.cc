// The bind address of the ZeroMQ transport (zmq_address.h).
#include "cairn/emergency/zmq_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace cairn::emergency::zmq_address {

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

}  // namespace cairn::emergency::zmq_address
