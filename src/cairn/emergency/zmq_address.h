// The pieces of the ZeroMQ transport's authentication (zmq_transport.h has
// the handshake, step by step): CURVE keypairs, the ZAP handler's answer
// to one request, and the one address a process binds and advertises.
//
// Only built with ZeroMQ (CAIRN_HAVE_ZMQ).
#pragma once

#include <map>
#include <string>

#include "cairn/result.h"

namespace cairn::emergency::zmq_curve {

// A CURVE keypair, each key in Z85 (40 characters).
struct Keys {
  std::string public_z85;
  std::string secret_z85;
};
Result<Keys> NewKeys();

// The 32 bytes of a Z85 key (DataLoss for anything else).
Result<std::string> DecodeKey(const std::string& z85);

// Takes one ZAP request (RFC 27) off `handler` (a REP socket bound to
// inproc://zeromq.zap.01) and answers it: 200 with user id "<index>" for a
// CURVE client whose public key (32 bytes) is `members`' key of process
// <index>, 400 for anything else. Returns whether it accepted; `peer` gets
// the client's address.
bool AnswerZapRequest(void* handler, const std::map<std::string, int>& members, std::string& peer);

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

}  // namespace cairn::emergency::zmq_curve
