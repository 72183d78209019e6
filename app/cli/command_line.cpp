// The command-line parser and checked value parsers (see command_line.h).
#include "command_line.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "zipmoe/base/error.h"

namespace zipmoe::cli {

std::string usageText(const CommandSpec& spec) {
  std::string out = "usage: " + spec.synopsis + "\n";
  if (!spec.summary.empty()) out += "\n" + spec.summary + "\n";
  if (!spec.options.empty()) {
    size_t width = 0;
    for (const auto& o : spec.options) width = std::max(width, o.name.size() + (o.value.empty() ? 0 : o.value.size() + 1));
    out += "\noptions:\n";
    for (const auto& o : spec.options) {
      std::string left = o.name + (o.value.empty() ? "" : " " + o.value);
      left.resize(width, ' ');
      out += "  " + left + "  " + o.help + (o.repeatable ? " (repeatable)" : "") + "\n";
    }
    std::string help = "--help, -h";
    help.resize(width, ' ');
    out += "  " + help + "  print this help and exit\n";
  }
  if (!spec.notes.empty()) out += "\n" + spec.notes + "\n";
  return out;
}

int printUsage(const CommandSpec& spec) {
  std::fputs(usageText(spec).c_str(), stdout);
  return 0;
}

long long parseIntegerIn(const std::string& option, const std::string& text, long long min, long long max) {
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (ec == std::errc::result_out_of_range)
    throw Error("option " + option + ": " + text + " is out of range (" + range + ")");
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
    throw Error("option " + option + ": '" + text + "' is not an integer");
  if (v < min || v > max) throw Error("option " + option + ": " + text + " is out of range (" + range + ")");
  return v;
}

double parseNumberIn(const std::string& option, const std::string& text, double min, double max) {
  double v = 0;
  // from_chars takes no sign '+', no leading space and no hex; it does take nan and inf: refused below.
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || !std::isfinite(v))
    throw Error("option " + option + ": '" + text + "' is not a number");
  if (v < min || v > max) {
    char range[96];
    std::snprintf(range, sizeof range, "%g..%g", min, max);
    throw Error("option " + option + ": " + text + " is out of range (" + range + ")");
  }
  return v;
}

std::vector<int> parseIntList(const std::string& option, const std::string& text, int min, int max) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw Error("option " + option + ": '" + text + "' has an empty item (give a comma-separated list)");
    out.push_back(parseInt<int>(option, item, min, max));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

CommandLine CommandLine::parse(const CommandSpec& spec, const Args& args) {
  CommandLine c;
  c.spec_ = &spec;
  std::string error;  // the first problem; reported unless --help was asked for
  const auto fail = [&error](std::string message) {
    if (error.empty()) error = std::move(message);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      c.help_ = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-' || (a[1] != '-' && !std::isalpha(static_cast<unsigned char>(a[1])))) {
      c.positionals_.push_back(a);  // "-", "-3" and plain words are arguments
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const OptionSpec* o = nullptr;
    for (const auto& candidate : spec.options)
      if (candidate.name == name) o = &candidate;
    if (!o) {
      fail("unknown option '" + name + "'");
      continue;
    }
    std::string value;
    if (o->value.empty()) {
      if (eq != std::string::npos) fail("option " + name + " takes no value");
    } else if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      fail("option " + name + " needs a value (" + o->value + ")");
      continue;
    }
    auto& slot = c.values_[name];
    if (!slot.empty() && !o->repeatable) fail("option " + name + " is given more than once");
    slot.push_back(value);
  }
  if (c.help_) return c;
  const size_t n = c.positionals_.size();
  if (error.empty() && (n < spec.minPositionals || n > spec.maxPositionals)) {
    if (spec.minPositionals == spec.maxPositionals)
      error = "expected " + std::to_string(spec.minPositionals) + " argument" + (spec.minPositionals == 1 ? "" : "s") +
              ", got " + std::to_string(n);
    else
      error = "expected " + std::to_string(spec.minPositionals) + " to " + std::to_string(spec.maxPositionals) +
              " arguments, got " + std::to_string(n);
    if (n > spec.maxPositionals) error += " ('" + c.positionals_[spec.maxPositionals] + "' is one too many)";
  }
  if (!error.empty()) throw Error(error + "\nusage: " + spec.synopsis + "\n(--help lists the options)");
  return c;
}

const OptionSpec& CommandLine::find(const std::string& option) const {
  for (const auto& o : spec_->options)
    if (o.name == option) return o;
  throw std::logic_error("option " + option + " is not declared in the spec of '" + spec_->synopsis + "'");
}

bool CommandLine::has(const std::string& option) const {
  find(option);
  return values_.count(option) != 0;
}

std::optional<std::string> CommandLine::text(const std::string& option) const {
  find(option);
  const auto it = values_.find(option);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::string CommandLine::text(const std::string& option, const std::string& fallback) const {
  return text(option).value_or(fallback);
}

std::vector<std::string> CommandLine::texts(const std::string& option) const {
  find(option);
  const auto it = values_.find(option);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

double CommandLine::number(const std::string& option, double min, double max, double fallback) const {
  const auto v = text(option);
  return v ? parseNumberIn(option, *v, min, max) : fallback;
}

std::string readInputFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path.string() + ": cannot read");
  return text.str();
}

}  // namespace zipmoe::cli
