// Shared pieces of the node protocol (see node_protocol.h) and the address and token checks of
// zipmoe/dist/expert_node.h.
#include "dist/node_protocol.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <fstream>

#include "zipmoe/base/error.h"
#include "zipmoe/dist/expert_node.h"

namespace zipmoe {
namespace dist {

std::string describeStatus(const grpc::Status& status) {
  static const char* const names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                      "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const int code = static_cast<int>(status.error_code());
  const std::string name = code >= 0 && code < 17 ? names[code] : "code " + std::to_string(code);
  return status.error_message().empty() ? name : name + ": " + status.error_message();
}

bool sameToken(const std::string& presented, const std::string& expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < presented.size() ? presented[i] : 0));
  return diff == 0;
}

std::shared_ptr<grpc::Channel> openChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxNodeMessageBytes);
  args.SetMaxSendMessageSize(kMaxNodeMessageBytes);
  // Reconnect quickly after a node restarts; a dead node is noticed by the call's deadline.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace dist

void checkNodeAddress(const std::string& address, const std::string& what, bool listening) {
  const auto bad = [&](const std::string& why) {
    throw Error(what + ": '" + address + "' " + why +
                " (give host:port with an IPv4 address, localhost or a bracketed IPv6 address, e.g. 127.0.0.1:7001)");
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) bad("is not host:port");
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) bad("has no numeric port");
  const long p = std::strtol(port.c_str(), nullptr, 10);
  if (p > 65535 || (p == 0 && !listening)) bad("has port " + port + ", outside 1..65535");
  unsigned char buf[16];
  if (host == "localhost") return;
  if (host.front() == '[' && host.back() == ']') {
    const std::string inner = host.substr(1, host.size() - 2);
    if (::inet_pton(AF_INET6, inner.c_str(), buf) != 1) bad("has no valid IPv6 address");
    static const unsigned char any6[16] = {};
    if (std::equal(buf, buf + 16, any6)) bad("is a wildcard address: name the interface (loopback: [::1])");
    return;
  }
  if (::inet_pton(AF_INET, host.c_str(), buf) != 1) bad("has no IPv4 address, localhost or [IPv6] as its host");
  if (buf[0] == 0 && buf[1] == 0 && buf[2] == 0 && buf[3] == 0) bad("is a wildcard address: name the interface (loopback: 127.0.0.1)");
}

std::string loadNodeToken(const std::filesystem::path& file) {
  std::string token;
  std::string from;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw Error("node token: cannot read " + file.string());
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    from = file.string();
  } else if (const char* env = std::getenv("ZIPMOE_NODE_TOKEN")) {
    token = env;
    from = "$ZIPMOE_NODE_TOKEN";
  } else {
    throw Error("node token: the nodes of a cluster share a secret token: set ZIPMOE_NODE_TOKEN or give --token-file FILE");
  }
  if (token.size() < 16)
    throw Error("node token from " + from + " has " + std::to_string(token.size()) +
                " characters; use at least 16 (e.g. `head -c 24 /dev/urandom | base64`)");
  return token;
}

}  // namespace zipmoe
