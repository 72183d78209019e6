// primeFile (see zipmoe/io/file_priming.h).
#include "zipmoe/io/file_priming.h"

#include <fcntl.h>

#include "io/file_io.h"

namespace zipmoe {

uint64_t primeFile(const std::filesystem::path& path, ReadMode mode) {
  io::FileHandle f(path, O_RDONLY | (mode == ReadMode::Direct ? O_DIRECT : 0));
  io::AlignedBuffer buffer(8 << 20);
  const uint64_t size = f.size();
  for (uint64_t offset = 0; offset < size; offset += buffer.size())
    f.readUpTo(buffer.data(), buffer.size(), offset);  // the last block ends at the file's end
  return size;
}

}  // namespace zipmoe
