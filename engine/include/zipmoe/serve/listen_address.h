// Listen addresses of `zipmoe serve`: which hosts are loopback, which mean every interface, and the
// URL a person can paste for a bound host and port. The server's Host-header check and the CLI's
// refusal of a keyless non-loopback bind read the same answers (docs/SERVER.md, "Safety on a desktop").
// Thread-safety: pure functions. Cost: a few string operations.
#pragma once

#include <string>

namespace zipmoe {

// 127.0.0.0/8, ::1, ::ffff:127.x.y.z, or the name "localhost" (any case).
bool isLoopbackHost(const std::string& host);
// 0.0.0.0 or :: — the server listens on every interface of the machine.
bool isWildcardHost(const std::string& host);
// "http://HOST:PORT", an IPv6 literal in brackets ("http://[::1]:8080").
std::string httpUrl(const std::string& host, int port);

}  // namespace zipmoe
