#include "io/file_io.h"
#include "io/page_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <utility>

#include "zipmoe/base/error.h"

namespace zipmoe::io {

FileHandle::FileHandle(const std::filesystem::path& path, int flags, int mode) : path_(path) {
  do {
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    const int err = errno;
    if ((flags & O_DIRECT) && err == EINVAL)
      throw Error("cannot open " + path.string() + " with O_DIRECT: the file system does not support it "
                  "(use buffered reads)");
    throw Error(systemErrorMessage("cannot open " + path.string(), err));
  }
}

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

FileHandle::FileHandle(FileHandle&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

FileHandle& FileHandle::operator=(FileHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

uint64_t FileHandle::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw Error(systemErrorMessage("cannot stat " + path_.string(), errno));
  return static_cast<uint64_t>(st.st_size);
}

void FileHandle::readExact(void* dst, size_t length, uint64_t offset) const {
  const size_t done = readUpTo(dst, length, offset);
  if (done < length)
    throw Error(path_.string() + " is truncated: wanted " + std::to_string(length) + " bytes at offset " +
                std::to_string(offset) + ", file ends at " + std::to_string(offset + done));
}

size_t FileHandle::readUpTo(void* dst, size_t length, uint64_t offset) const {
  auto* p = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < length) {
    const ssize_t r = ::pread(fd_, p + done, length - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(systemErrorMessage("read of " + std::to_string(length) + " bytes at offset " +
                                         std::to_string(offset) + " in " + path_.string() + " failed",
                                     errno));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  std::memset(p + done, 0, length - done);
  return done;
}

void FileHandle::writeAll(const void* src, size_t length) {
  const auto* p = static_cast<const uint8_t*>(src);
  size_t done = 0;
  while (done < length) {
    const ssize_t r = ::write(fd_, p + done, length - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(systemErrorMessage("writing " + path_.string() + " failed", errno));
    }
    done += static_cast<size_t>(r);
  }
}

void FileHandle::writeAllAt(const void* src, size_t length, uint64_t offset) {
  const auto* p = static_cast<const uint8_t*>(src);
  size_t done = 0;
  while (done < length) {
    const ssize_t r = ::pwrite(fd_, p + done, length - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(systemErrorMessage("writing " + path_.string() + " at offset " + std::to_string(offset) +
                                         " failed",
                                     errno));
    }
    done += static_cast<size_t>(r);
  }
}

void FileHandle::sync() {
  if (::fsync(fd_) != 0) throw Error(systemErrorMessage("fsync of " + path_.string() + " failed", errno));
}

void FileHandle::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 && errno != EINTR)
    throw Error(systemErrorMessage("closing " + path_.string() + " failed", errno));
}

std::string readTextFile(const std::filesystem::path& path) {
  FileHandle f(path, O_RDONLY);
  const uint64_t n = f.size();
  std::string s(n, '\0');
  if (n > 0) f.readExact(s.data(), n, 0);
  return s;
}

void syncDirectory(const std::filesystem::path& dir) {
  FileHandle d(dir, O_RDONLY | O_DIRECTORY);
  d.sync();
}

void writeFileAtomically(const std::filesystem::path& path, const std::string& contents) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    FileHandle f(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    f.writeAll(contents.data(), contents.size());
    f.sync();
    f.close();
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(systemErrorMessage("cannot rename " + tmp.string() + " to " + path.string(), err));
  }
  syncDirectory(path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path());
}

void adviseHugePages(void* p, size_t bytes) {
  // Whole huge pages only; an error (EINVAL without THP) leaves ordinary pages, which still work.
  const size_t whole = bytes / kHugePageBytes * kHugePageBytes;
  if (whole > 0) (void)::madvise(p, whole, MADV_HUGEPAGE);
}

AlignedBuffer::AlignedBuffer(size_t size, size_t alignment) : alignment_(alignment) { reserve(size); }

void AlignedBuffer::reserve(size_t size) {
  if (size <= size_) return;
  if (const std::shared_ptr<PagePool>& pool = data_.get_deleter().pool) {
    *this = pool->allocate(size);
    return;
  }
  if (data_.get_deleter().release)
    throw Error("AlignedBuffer: cannot grow a buffer of " + std::to_string(size_) + " bytes to " + std::to_string(size) +
                " that another allocator gave (a compute backend's); allocate a new one from it");
  const size_t rounded = static_cast<size_t>(alignUp(size, alignment_));
  const bool huge = rounded >= kHugePageBytes;
  void* p = nullptr;
  if (::posix_memalign(&p, huge ? std::max(alignment_, kHugePageBytes) : alignment_, rounded) != 0) throw std::bad_alloc();
  if (huge) adviseHugePages(p, rounded);  // before the first write faults it in
  std::memset(p, 0, rounded);
  data_.reset(static_cast<uint8_t*>(p));
  size_ = rounded;
}

}  // namespace zipmoe::io
