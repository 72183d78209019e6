// ConnectionStream (see connection_stream.h): poll() with deadlines around recv and send.
#include "serve/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace zipmoe::serve {
namespace {

constexpr size_t kReadChunk = 4096;
thread_local ConnectionStream* currentStream = nullptr;

void addressOf(const sockaddr_storage& a, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    sockaddr_in v4{};
    std::memcpy(&v4, &a, sizeof v4);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    sockaddr_in6 v6{};
    std::memcpy(&v6, &a, sizeof v6);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

}  // namespace

ConnectionStream::ConnectionStream(int fd, std::string buffered, std::chrono::milliseconds writeTimeout)
    : fd_(fd), buffer_(std::move(buffered)), writeTimeout_(writeTimeout) {}

std::string ConnectionStream::takeBuffered() {
  std::string rest = buffer_.substr(taken_);
  buffer_.clear();
  taken_ = 0;
  return rest;
}

bool ConnectionStream::peerClosed() const {
  pollfd p{fd_, static_cast<short>(POLLRDHUP), 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

ConnectionStream* ConnectionStream::current() { return currentStream; }
ConnectionStream::Scope::Scope(ConnectionStream& s) { currentStream = &s; }
ConnectionStream::Scope::~Scope() { currentStream = nullptr; }

bool ConnectionStream::waitFor(short events, Clock::time_point deadline) const {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool ConnectionStream::is_readable() const {
  if (taken_ < buffer_.size()) return true;
  if (waitFor(POLLIN, readDeadline_)) return true;
  timedOut_ = Clock::now() >= readDeadline_;
  return false;
}

bool ConnectionStream::is_writable() const { return waitFor(POLLOUT, Clock::now() + writeTimeout_); }

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (taken_ >= buffer_.size()) {
    if (!is_readable()) return -1;
    buffer_.resize(kReadChunk);
    taken_ = 0;
    ssize_t n = 0;
    do {
      n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
    } while (n < 0 && errno == EINTR);
    buffer_.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (n <= 0) return n;
  }
  const size_t n = std::min(size, buffer_.size() - taken_);
  std::memcpy(ptr, buffer_.data() + taken_, n);
  taken_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  ssize_t n = 0;
  do {
    n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) addressOf(a, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) addressOf(a, ip, port);
}

}  // namespace zipmoe::serve
