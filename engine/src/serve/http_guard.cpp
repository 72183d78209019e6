// HttpGuard (see http_guard.h): header checks before routing.
#include "serve/http_guard.h"

#include <algorithm>
#include <cctype>

#include "zipmoe/serve/listen_address.h"

namespace zipmoe::serve {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool allDigits(const std::string& s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The name of a Host header ("Name:8080", "[::1]:8080", "name"): lower case, without brackets or
// port; empty when the header is malformed.
std::string hostName(const std::string& header) {
  const std::string h = lower(trimmed(header));
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    if (close == std::string::npos) return {};
    const std::string rest = h.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !allDigits(rest.substr(1)))) return {};
    return h.substr(1, close - 1);
  }
  const size_t colon = h.find(':');
  if (colon == std::string::npos) return h;
  if (!allDigits(h.substr(colon + 1))) return {};
  return h.substr(0, colon);
}

std::string unbracketed(const std::string& host) {
  return host.size() >= 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
}

ApiError forbidden(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(403, "invalid_request_error", message, param, code);
}

}  // namespace

HttpGuard::HttpGuard(HttpGuardOptions options) : options_(std::move(options)) {
  anyHost_ = isWildcardHost(options_.boundHost);
  hosts_.push_back(lower(unbracketed(options_.boundHost)));
  if (isLoopbackHost(options_.boundHost)) hosts_.insert(hosts_.end(), {"localhost", "127.0.0.1", "::1"});
  for (const std::string& h : options_.allowedHosts) {  // "name", "name:port", "[v6]:port" or a bare IPv6
    const std::string name = hostName(h);
    hosts_.push_back(name.empty() ? lower(unbracketed(h)) : name);
  }
}

bool HttpGuard::hostAllowed(const std::string& header) const {
  if (anyHost_) return true;
  const std::string name = hostName(header);
  return !name.empty() && std::find(hosts_.begin(), hosts_.end(), name) != hosts_.end();
}

bool HttpGuard::originAllowed(const std::string& origin) const {
  return !origin.empty() &&
         std::find(options_.corsOrigins.begin(), options_.corsOrigins.end(), origin) != options_.corsOrigins.end();
}

std::optional<ApiError> HttpGuard::refusal(const httplib::Request& req) const {
  if (req.has_header("Host") && !hostAllowed(req.get_header_value("Host")))
    return forbidden("The Host header '" + req.get_header_value("Host") +
                         "' does not name this server; start it with --allowed-host NAME to accept that name.",
                     "Host", "host_not_allowed");
  if (req.method == "OPTIONS") {
    const std::string origin = req.get_header_value("Origin");
    if (options_.corsOrigins.empty())
      return forbidden(
          "Cross-origin requests are off: start the server with --cors ORIGIN to allow a web page's origin.", "Origin",
          "cors_disabled");
    if (!originAllowed(origin))
      return forbidden("The origin '" + origin + "' is not allowed: the server allows --cors origins only.", "Origin",
                       "origin_not_allowed");
    return std::nullopt;
  }
  if (req.method != "POST") return std::nullopt;
  if (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length"))
    return ApiError(411, "invalid_request_error",
                    "A POST must declare its body's length with Content-Length (chunked bodies are not accepted).",
                    "Content-Length", "length_required");
  const std::string length = trimmed(req.get_header_value("Content-Length"));
  const bool number = !length.empty() && length.size() <= 19 &&
                      std::all_of(length.begin(), length.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!number)
    return ApiError(400, "invalid_request_error", "The Content-Length '" + length + "' is not a number.",
                    "Content-Length", "invalid_content_length");
  if (std::stoull(length) > options_.maxBodyBytes)
    return ApiError(413, "invalid_request_error",
                    "The request body is larger than this server accepts (Content-Length " + length + " > " +
                        std::to_string(options_.maxBodyBytes) + " bytes).",
                    "body", "request_too_large");
  const std::string type = req.get_header_value("Content-Type");
  if (lower(trimmed(type.substr(0, type.find(';')))) != "application/json")
    return ApiError(415, "invalid_request_error",
                    type.empty()
                        ? std::string("The request has no Content-Type: send 'Content-Type: application/json'.")
                        : "The Content-Type '" + type + "' is not accepted: send 'Content-Type: application/json'.",
                    "Content-Type", "unsupported_media_type");
  return std::nullopt;
}

bool HttpGuard::answerCors(const httplib::Request& req, httplib::Response& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (!originAllowed(origin)) return false;
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
  if (req.method != "OPTIONS") return false;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
  res.set_header("Access-Control-Max-Age", "600");
  res.status = 204;
  return true;
}

bool bodyLeftUnread(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  const std::string length = trimmed(req.get_header_value("Content-Length"));
  return !length.empty() && length != "0";
}

}  // namespace zipmoe::serve
