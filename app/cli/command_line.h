// A command's options, declared once: the parser, the checks and the `--help` text all come from
// the same CommandSpec, so a usage text cannot drift from what the command accepts.
//
// CommandLine::parse reads every argument before the command does any work: an unknown option, a
// missing value, an option given twice or the wrong number of positional arguments is an Error
// naming it. `--help` or `-h` anywhere (not as an option's value) makes help() true instead, and no
// other error is reported. Values are then read with checked accessors: integers are range-checked
// before they are narrowed, numbers must be finite decimals, and every message names the option
// and the text it was given. Thread-safety: values. Cost: negligible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "commands.h"

namespace zipmoe::cli {

struct OptionSpec {
  std::string name;         // "--budget"
  std::string value;        // "SIZE|PCT%"; empty for a flag
  std::string help;         // one line
  bool repeatable = false;  // --stop STR...: every value is kept
};

struct CommandSpec {
  std::string synopsis;  // "zipmoe convert HF_DIR OUT_DIR [OPTIONS]"
  std::string summary;   // what the command does, a line or two
  std::vector<OptionSpec> options;
  size_t minPositionals = 0, maxPositionals = 0;
  std::string notes;     // printed after the options (may be empty)
};

// The --help text: synopsis, summary, one line per option, notes.
std::string usageText(const CommandSpec& spec);
// Prints usageText to stdout; returns 0 (the exit status of `--help`).
int printUsage(const CommandSpec& spec);

// Whole-text integer in [min, max]; throws Error naming the option, the text and the range. The
// range is checked on the full 64-bit value, before narrowing to T.
long long parseIntegerIn(const std::string& option, const std::string& text, long long min, long long max);
template <class T>
T parseInt(const std::string& option, const std::string& text, T min = std::numeric_limits<T>::min(),
           T max = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T> && sizeof(T) <= sizeof(long long));
  const long long hi = std::is_unsigned_v<T> && sizeof(T) == sizeof(long long) ? std::numeric_limits<long long>::max()
                                                                              : static_cast<long long>(max);
  return static_cast<T>(parseIntegerIn(option, text, static_cast<long long>(min), hi));
}
// A finite decimal number in [min, max] (nan, inf, hex and trailing text are refused).
double parseNumberIn(const std::string& option, const std::string& text, double min, double max);
// Comma-separated integers, each in [min, max]; at least one.
std::vector<int> parseIntList(const std::string& option, const std::string& text, int min, int max);

class CommandLine {
 public:
  // Throws zipmoe::Error (with the usage) for a bad command line; see the file comment.
  static CommandLine parse(const CommandSpec& spec, const Args& args);

  bool help() const { return help_; }
  const Args& positionals() const { return positionals_; }
  const std::string& positional(size_t i) const { return positionals_.at(i); }

  bool has(const std::string& option) const;
  std::optional<std::string> text(const std::string& option) const;
  std::string text(const std::string& option, const std::string& fallback) const;
  std::vector<std::string> texts(const std::string& option) const;  // a repeatable option's values
  template <class T>
  T integer(const std::string& option, T min, T max, T fallback) const {
    const auto v = text(option);
    return v ? parseInt<T>(option, *v, min, max) : fallback;
  }
  double number(const std::string& option, double min, double max, double fallback) const;

 private:
  const OptionSpec& find(const std::string& option) const;  // throws std::logic_error: not declared
  const CommandSpec* spec_ = nullptr;
  bool help_ = false;
  Args positionals_;
  std::map<std::string, std::vector<std::string>> values_;  // flags hold one empty value
};

// The whole of a file a command reads as input (a corpus, a text to encode); throws zipmoe::Error
// naming the file when it cannot be read.
std::string readInputFile(const std::filesystem::path& path);

}  // namespace zipmoe::cli
