// Internal: stream buffers that compute the CRC-32C (base/crc32c.h) of the bytes passing through, so
// that a file's checksum is taken while it is written or read, without holding it whole in memory.
// Crc32cWriter forwards to an ostream; Crc32cReader reads at most `limit` bytes from an istream
// (the bytes the checksum covers, not the checksum after them).
// Thread-safety: none (one stream's). Cost: one copy through a 64 KiB buffer plus the CRC.
#pragma once

#include <algorithm>
#include <cstdint>
#include <istream>
#include <ostream>
#include <streambuf>

#include "base/crc32c.h"

namespace zipmoe::detail {

class Crc32cWriter : public std::streambuf {
 public:
  explicit Crc32cWriter(std::ostream& out) : out_(out) { setp(buffer_, buffer_ + sizeof buffer_); }
  Crc32cWriter(const Crc32cWriter&) = delete;
  Crc32cWriter& operator=(const Crc32cWriter&) = delete;
  // The CRC of every byte written so far (they are flushed to the ostream first).
  uint32_t crc() {
    drain();
    return crc_;
  }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const std::streamsize n = pptr() - pbase();
    if (n > 0) {
      crc_ = crc32c(pbase(), static_cast<size_t>(n), crc_);
      out_.write(pbase(), n);
    }
    setp(buffer_, buffer_ + sizeof buffer_);
    return static_cast<bool>(out_);
  }
  std::ostream& out_;
  uint32_t crc_ = 0;
  char buffer_[1 << 16];
};

class Crc32cReader : public std::streambuf {
 public:
  Crc32cReader(std::istream& in, uint64_t limit) : in_(in), left_(limit) {}
  Crc32cReader(const Crc32cReader&) = delete;
  Crc32cReader& operator=(const Crc32cReader&) = delete;
  uint32_t crc() const { return crc_; }  // of every byte taken from the istream so far
  uint64_t left() const { return left_ + static_cast<uint64_t>(egptr() - gptr()); }  // of the limit, unread

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (left_ == 0) return traits_type::eof();
    in_.read(buffer_, static_cast<std::streamsize>(std::min<uint64_t>(left_, sizeof buffer_)));
    const std::streamsize got = in_.gcount();
    if (got <= 0) return traits_type::eof();
    crc_ = crc32c(buffer_, static_cast<size_t>(got), crc_);
    left_ -= static_cast<uint64_t>(got);
    setg(buffer_, buffer_, buffer_ + got);
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::istream& in_;
  uint64_t left_;
  uint32_t crc_ = 0;
  char buffer_[1 << 16];
};

}  // namespace zipmoe::detail
