#include "terminal_progress.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

namespace zipmoe::cli {
namespace {
std::atomic<bool> gInterrupted{false};
extern "C" void onInterrupt(int) { gInterrupted.store(true); }
}  // namespace

const std::atomic<bool>* installInterruptHandler() {
  struct sigaction sa {};
  sa.sa_handler = onInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return &gInterrupted;
}

void resetInterrupt() { gInterrupted.store(false); }

TerminalProgress::TerminalProgress(std::string label)
    : label_(std::move(label)), enabled_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

TerminalProgress::~TerminalProgress() { finish(); }

void TerminalProgress::update(uint64_t done, uint64_t total, const std::string& detail) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const int width = 30;
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::string d = detail.size() > 40 ? "..." + detail.substr(detail.size() - 37) : detail;
  std::fprintf(stderr, "\r%s [%s] %5.1f%%  %6.1fs  %-40s", label_.c_str(), bar.c_str(), 100.0 * frac, secs, d.c_str());
  std::fflush(stderr);
}

void TerminalProgress::finish() {
  if (enabled_ && drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

}  // namespace zipmoe::cli
