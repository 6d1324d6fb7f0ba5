// The one address a process of the ZeroMQ transport binds and advertises
// (zmq_transport.h, step 2).
#pragma once

#include <string>

#include "cairn/result.h"

namespace cairn::emergency::zmq_address {

// The numeric address to bind and advertise for `host` ("" = this host's
// name): the host as given when it is an IP address, else its resolved
// addresses, a non-loopback one first.
struct BindAddress {
  std::string ip;
  bool ipv6 = false;
  bool loopback = false;
  std::string Endpoint(const std::string& port) const { return "tcp://" + (ipv6 ? "[" + ip + "]" : ip) + ":" + port; }
};
Result<BindAddress> ResolveBindAddress(const std::string& host);

}  // namespace cairn::emergency::zmq_address
