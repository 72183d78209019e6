// Internal: thin, checked wrappers over POSIX file I/O, and page-aligned buffers for O_DIRECT.
//
// Every failure throws zipmoe::Error naming the file, the operation and the offset. Short reads and
// EINTR are handled; a read that hits end-of-file early is reported as truncation.
// Thread-safety: FileHandle is move-only; pread/pwrite on one handle may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>
#include <string>

namespace zipmoe::io {

class FileHandle {
 public:
  FileHandle() = default;
  // Opens with open(2) flags; throws zipmoe::Error naming the path.
  FileHandle(const std::filesystem::path& path, int flags, int mode = 0644);
  ~FileHandle();
  FileHandle(FileHandle&& other) noexcept;
  FileHandle& operator=(FileHandle&& other) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;

  int fd() const { return fd_; }
  bool isOpen() const { return fd_ >= 0; }
  const std::filesystem::path& path() const { return path_; }
  uint64_t size() const;
  // Reads exactly `length` bytes at `offset`; throws on error or end-of-file.
  void readExact(void* dst, size_t length, uint64_t offset) const;
  // Reads up to `length` bytes at `offset`, stopping early only at end-of-file, and zero-fills the
  // rest of dst (an aligned O_DIRECT read of a file's last block ends at the file's end). Returns
  // the bytes read. Throws on error.
  size_t readUpTo(void* dst, size_t length, uint64_t offset) const;
  // Writes all bytes at the current position / at `offset`.
  void writeAll(const void* src, size_t length);
  void writeAllAt(const void* src, size_t length, uint64_t offset);
  void sync();
  void close();  // closes, reporting errors (a failed close can mean lost writes)

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// A range of an open file that one request reads: for O_DIRECT, offset and length are multiples of
// 4 KiB. The file must outlive the range.
struct FileRange {
  const FileHandle* file = nullptr;
  uint64_t offset = 0, length = 0;
};

// Reads a whole (small) file into a string; throws naming the path.
std::string readTextFile(const std::filesystem::path& path);
// Writes a file atomically: PATH.tmp, fsync, rename, fsync of the directory.
void writeFileAtomically(const std::filesystem::path& path, const std::string& contents);
void syncDirectory(const std::filesystem::path& dir);

class PagePool;

// Frees an AlignedBuffer's memory: back to its PagePool (io/page_pool.h) when it came from one,
// through `release` when another allocator gave it (a compute backend's pinned or device memory,
// backend/compute_backend.h), else with free().
struct BufferDeleter {
  std::shared_ptr<PagePool> pool;
  void (*release)(uint8_t*) = nullptr;
  void operator()(uint8_t* p) const;
};

// A buffer whose start and size are multiples of `alignment` (4 KiB for O_DIRECT): zero-initialised
// when allocated here; pages recycled by a PagePool (PagePool::allocate) hold old contents.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, size_t alignment = 4096);
  // Adopts `size` bytes of a pool's pages (PagePool::allocate only).
  AlignedBuffer(uint8_t* data, size_t size, std::shared_ptr<PagePool> pool)
      : data_(data, BufferDeleter{std::move(pool)}), size_(size) {}
  // Adopts `size` bytes another allocator gave at `alignment`, handed back through `release` (a
  // compute backend's pinned host or device memory). Such a buffer cannot grow (reserve throws):
  // its owner allocates a new one from the same allocator.
  AlignedBuffer(uint8_t* data, size_t size, size_t alignment, void (*release)(uint8_t*))
      : data_(data, BufferDeleter{nullptr, release}), size_(size), alignment_(alignment) {}
  // A moved-from buffer is empty (size 0), so that whoever holds it next allocates again.
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)), alignment_(other.alignment_) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    alignment_ = other.alignment_;
    return *this;
  }
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t alignment() const { return alignment_; }
  // Grows (never shrinks) to at least `size` bytes; contents are not preserved. A pool's buffer
  // grows from the same pool.
  void reserve(size_t size);

 private:
  std::unique_ptr<uint8_t, BufferDeleter> data_;
  size_t size_ = 0, alignment_ = 4096;
};

inline uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Buffers that O_DIRECT reads land in are backed by transparent huge pages where the kernel allows
// (MADV_HUGEPAGE; THP "madvise" or "always"). The device reads into memory through a list of
// physically contiguous segments: in 4 KiB pages a 5.5 MiB read became ten requests on this
// project's VM and ran at about 1.0 GB/s, in 2 MiB pages it became fewer, larger ones and ran at
// 2.2 GB/s (docs/RUNTIME.md, "Huge pages for reads"). From kHugePageBytes up, a buffer starts on a
// 2 MiB boundary and is advised; smaller ones gain nothing (no whole huge page fits).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Advises [p, p + bytes) for huge pages (p 2 MiB-aligned); a kernel without THP ignores it.
void adviseHugePages(void* p, size_t bytes);

}  // namespace zipmoe::io
