// HttpGuard — what the server checks before it reads a request's body or routes it, so that a web
// page in the user's browser cannot drive a server on this machine (docs/SERVER.md, "Safety on a
// desktop"):
//   - Host must name this server: on a loopback bind localhost, 127.0.0.1 or [::1] (any port, any
//     case), or the bound address itself, or a name given with --allowed-host; a bind to 0.0.0.0 or ::
//     takes any name. A page that rebinds its own DNS name to 127.0.0.1 sends its name: 403.
//     A request without Host (HTTP/1.0 tools) passes: browsers always send one.
//   - A POST must declare Content-Type: application/json (parameters such as charset allowed): a
//     page may send text/plain or a form without asking first, never JSON. Else 415.
//   - A POST must declare Content-Length (411; no chunked bodies), and one over the body limit is
//     refused at once (413), before a byte of the body is read.
//   - CORS is off: no Access-Control-* header, an OPTIONS preflight is refused (403). With
//     --cors ORIGIN (repeatable), a preflight from a listed origin is answered (204) and that
//     origin's requests get Access-Control-Allow-Origin for it alone.
// Thread-safety: const after construction; every worker calls it. Cost: a few string compares.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "zipmoe/serve/openai_request.h"

namespace zipmoe::serve {

struct HttpGuardOptions {
  std::string boundHost;                  // what the server listens on (--host)
  std::vector<std::string> allowedHosts;  // --allowed-host: more names the Host header may give
  std::vector<std::string> corsOrigins;   // --cors: origins a browser page may call from
  size_t maxBodyBytes = 1 << 20;
};

class HttpGuard {
 public:
  explicit HttpGuard(HttpGuardOptions options);

  // The refusal for a request that must not go on (its OpenAI error names the header and value), or
  // nothing. An OPTIONS request passes only when it is a preflight from an allowed origin.
  std::optional<ApiError> refusal(const httplib::Request& req) const;
  // For a request that passed: answers an allowed preflight (204 with the Access-Control-* headers;
  // returns true), or adds Access-Control-Allow-Origin when the request comes from an allowed origin.
  bool answerCors(const httplib::Request& req, httplib::Response& res) const;

 private:
  bool hostAllowed(const std::string& host) const;
  bool originAllowed(const std::string& origin) const;

  HttpGuardOptions options_;
  bool anyHost_ = false;
  std::vector<std::string> hosts_;  // lower case, without brackets or port
};

// True when the request declared a body that the server has not read (a refusal before routing): its
// connection must close after the reply, or the body would be read as the next request.
bool bodyLeftUnread(const httplib::Request& req);

}  // namespace zipmoe::serve
