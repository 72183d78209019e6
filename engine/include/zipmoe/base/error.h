// zipmoe::Error — the one exception type the engine throws for bad input and failed I/O.
//
// Every message names what was being processed (a file, a tensor, a chunk), where (an offset or a
// field), what was expected and what was found, so that a user can act on it without a debugger.
// Thread-safety: plain value type. Cost: only on the error path.
#pragma once

#include <stdexcept>
#include <string>

namespace zipmoe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when a long operation (conversion, generation) is cancelled through its cancel flag.
class Cancelled : public Error {
 public:
  using Error::Error;
};

// "<what>: <strerror(errno)>" — for failed system calls.
[[nodiscard]] std::string systemErrorMessage(const std::string& what, int errnoValue);

}  // namespace zipmoe
