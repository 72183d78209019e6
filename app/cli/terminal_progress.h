// A one-line progress display on stderr, redrawn with '\r' — only when stderr is a terminal, so that
// logs and pipes get no control characters. Thread-safety: use from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace zipmoe::cli {

class TerminalProgress {
 public:
  explicit TerminalProgress(std::string label);
  ~TerminalProgress();  // ends the line if one was drawn
  // Redraws at most ~10 times per second (and always at 100 %).
  void update(uint64_t done, uint64_t total, const std::string& detail = {});
  void finish();
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// Set by SIGINT/SIGTERM while a long command runs; commands pass it as their cancel flag.
const std::atomic<bool>* installInterruptHandler();
// Clears the flag, so that one command can be interrupted more than once (a chat, reply by reply).
void resetInterrupt();

}  // namespace zipmoe::cli
