// ActivationTrace (see activation_trace.h): parsing and validating a trace file.
// Thread-safety: load() is independent per call; a trace is immutable. Cost: one pass over the file.
#include "zipmoe/trace/activation_trace.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>

#include "io/file_io.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

// A value as it appears in an error message: quoted, and shortened when long.
std::string quoted(std::string_view text) {
  constexpr size_t kMax = 60;
  return "'" + std::string(text.substr(0, kMax)) + (text.size() > kMax ? "…'" : "'");
}

std::vector<std::string_view> splitTabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) return fields;
    start = tab + 1;
  }
}

// Walks the file line by line and formats "file:line: " for errors.
class LineReader {
 public:
  LineReader(std::string path, std::string_view text) : path_(std::move(path)), text_(text) {}

  // The next line without its '\n' (and '\r'); false at the end of the file.
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const size_t end = text_.find('\n', pos_);
    line = text_.substr(pos_, end == std::string_view::npos ? std::string_view::npos : end - pos_);
    pos_ = end == std::string_view::npos ? text_.size() : end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(path_ + ":" + std::to_string(std::max(number_, 1)) + ": " + what);
  }

 private:
  std::string path_;
  std::string_view text_;
  size_t pos_ = 0;
  int number_ = 0;
};

// A non-negative integer no larger than `max`, the whole field; otherwise fails naming the field
// (`name()` builds its name only then).
template <typename Name>
uint64_t parseCount(const LineReader& reader, std::string_view field, uint64_t max, Name name) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || ec == std::errc::invalid_argument || end != field.data() + field.size())
    reader.fail(name() + ": " + quoted(field) + " is not a non-negative integer");
  if (ec == std::errc::result_out_of_range || value > max)
    reader.fail(name() + ": " + quoted(field) + " is out of range (at most " + std::to_string(max) + ")");
  return value;
}

// The comment line: `# … model=NAME top_k=K experts=N layers=L …` (a value may end in ';' or ',').
struct TraceShape {
  std::string model;
  int topK = 0, experts = 0, layers = 0;
};

TraceShape parseComment(const LineReader& reader, std::string_view line) {
  if (line.empty() || line.front() != '#')
    reader.fail("expected the comment line '# … model=NAME top_k=K experts=N layers=L', found " + quoted(line));
  TraceShape shape;
  bool seen[4] = {false, false, false, false};
  static constexpr std::string_view kKeys[4] = {"model", "top_k", "experts", "layers"};
  size_t pos = 1;
  while (pos < line.size()) {
    const size_t space = line.find_first_of(" \t", pos);
    std::string_view word = line.substr(pos, space == std::string_view::npos ? std::string_view::npos : space - pos);
    pos = space == std::string_view::npos ? line.size() : space + 1;
    while (!word.empty() && (word.back() == ';' || word.back() == ',')) word.remove_suffix(1);
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    for (int i = 0; i < 4; ++i) {
      if (key != kKeys[i]) continue;
      if (seen[i]) reader.fail("the comment line names " + std::string(key) + "= twice");
      seen[i] = true;
      const std::string name = "comment " + std::string(key);
      if (i == 0) {
        if (value.empty()) reader.fail(name + ": empty model name");
        shape.model = std::string(value);
        continue;
      }
      const auto n = static_cast<int>(parseCount(reader, value, 1u << 20, [&] { return name; }));
      if (n == 0) reader.fail(name + ": must be at least 1, found 0");
      (i == 1 ? shape.topK : i == 2 ? shape.experts : shape.layers) = n;
    }
  }
  for (int i = 0; i < 4; ++i)
    if (!seen[i])
      reader.fail("the comment line lacks " + std::string(kKeys[i]) +
                  "= (expected '# … model=NAME top_k=K experts=N layers=L')");
  if (shape.topK > shape.experts)
    reader.fail("comment top_k=" + std::to_string(shape.topK) + " exceeds experts=" + std::to_string(shape.experts));
  return shape;
}

void checkHeader(const LineReader& reader, std::string_view line, int experts) {
  std::string expected = "prompt\tlayer";
  for (int e = 0; e < experts; ++e) expected += "\te" + std::to_string(e);
  if (line == expected) return;
  const std::vector<std::string_view> fields = splitTabs(line);
  std::string what = "expected the header 'prompt<TAB>layer<TAB>e0 … e" + std::to_string(experts - 1) + "' (" +
                     std::to_string(experts) + " experts, from the comment line), found ";
  if (fields.size() >= 2 && fields[0] == "prompt" && fields[1] == "layer")
    reader.fail(what + std::to_string(fields.size() - 2) + " expert columns");
  reader.fail(what + quoted(line));
}

}  // namespace

std::shared_ptr<const ActivationTrace> ActivationTrace::load(const std::filesystem::path& path) {
  const std::string text = io::readTextFile(path);
  LineReader reader(path.string(), text);
  std::string_view line;
  if (!reader.next(line)) reader.fail("empty file (expected a '#' comment line, a header and rows)");
  const TraceShape shape = parseComment(reader, line);
  if (!reader.next(line)) reader.fail("the header line is missing");
  checkHeader(reader, line, shape.experts);

  std::shared_ptr<ActivationTrace> trace(new ActivationTrace());
  trace->model_ = shape.model;
  trace->topK_ = shape.topK;
  trace->numExperts_ = shape.experts;
  trace->numLayers_ = shape.layers;
  const auto experts = static_cast<size_t>(shape.experts);
  const size_t columns = experts + 2;
  std::vector<bool> active(static_cast<size_t>(shape.layers), false);
  int prompt = 0, layer = 0;  // the row expected next
  int64_t promptTokens = 0;   // of the current prompt, from its first non-zero row (0 = none yet)
  bool blankSeen = false;
  while (reader.next(line)) {
    if (line.empty()) {
      blankSeen = true;  // allowed only at the end of the file
      continue;
    }
    if (blankSeen) reader.fail("a row follows a blank line");
    const std::vector<std::string_view> fields = splitTabs(line);
    if (fields.size() != columns)
      reader.fail(std::to_string(fields.size()) + " columns, expected " + std::to_string(columns) +
                  " (prompt, layer, e0 … e" + std::to_string(experts - 1) + ")");
    const auto p =
        static_cast<int>(parseCount(reader, fields[0], 1u << 30, [] { return std::string("column 1 (prompt)"); }));
    const auto l = static_cast<int>(parseCount(reader, fields[1], std::numeric_limits<uint32_t>::max(),
                                               [] { return std::string("column 2 (layer)"); }));
    if (l >= shape.layers)
      reader.fail("column 2 (layer): " + std::to_string(l) + " is out of range 0 .. " +
                  std::to_string(shape.layers - 1) + " (layers=" + std::to_string(shape.layers) +
                  " in the comment line)");
    if (p != prompt || l != layer)
      reader.fail("expected prompt " + std::to_string(prompt) + " layer " + std::to_string(layer) + ", found prompt " +
                  std::to_string(p) + " layer " + std::to_string(l) +
                  " (rows run through layers 0 .. " + std::to_string(shape.layers - 1) + " of each prompt in turn)");
    uint64_t sum = 0, largest = 0;
    for (size_t e = 0; e < experts; ++e) {
      const uint64_t count = parseCount(reader, fields[e + 2], std::numeric_limits<uint32_t>::max(), [e] {
        return "column " + std::to_string(e + 3) + " (e" + std::to_string(e) + ")";
      });
      trace->counts_.push_back(static_cast<uint32_t>(count));
      sum += count;
      largest = std::max(largest, count);
    }
    if (sum > 0) {
      const std::string where = "prompt " + std::to_string(p) + " layer " + std::to_string(l) + ": ";
      if (sum % static_cast<uint64_t>(shape.topK) != 0)
        reader.fail(where + "the counts sum to " + std::to_string(sum) + ", not a multiple of top_k=" +
                    std::to_string(shape.topK) + " (a row sums to tokens × top_k)");
      const auto tokens = static_cast<int64_t>(sum / static_cast<uint64_t>(shape.topK));
      if (promptTokens != 0 && tokens != promptTokens)
        reader.fail(where + "the counts cover " + std::to_string(tokens) + " tokens (sum / top_k), the prompt's " +
                    "earlier layers " + std::to_string(promptTokens));
      if (largest > static_cast<uint64_t>(tokens))
        reader.fail(where + "an expert serves " + std::to_string(largest) + " of " + std::to_string(tokens) +
                    " tokens (at most once per token)");
      promptTokens = tokens;
      active[static_cast<size_t>(l)] = true;
    }
    if (++layer == shape.layers) {
      trace->promptTokens_.push_back(promptTokens);
      layer = 0;
      ++prompt;
      promptTokens = 0;
    }
  }
  if (layer != 0)
    reader.fail("the file ends inside prompt " + std::to_string(prompt) + " (after layer " + std::to_string(layer - 1) +
                " of 0 .. " + std::to_string(shape.layers - 1) + ")");
  if (prompt == 0) reader.fail("no rows after the header");
  trace->numPrompts_ = prompt;
  for (int i = 0; i < shape.layers; ++i)
    if (active[static_cast<size_t>(i)]) trace->activeLayers_.push_back(i);
  return trace;
}

std::span<const uint32_t> ActivationTrace::counts(int prompt, int layer) const {
  if (prompt < 0 || prompt >= numPrompts_ || layer < 0 || layer >= numLayers_)
    throw Error("activation trace of " + model_ + ": prompt " + std::to_string(prompt) + " layer " +
                std::to_string(layer) + " is out of range (" + std::to_string(numPrompts_) + " prompts × " +
                std::to_string(numLayers_) + " layers)");
  const auto experts = static_cast<size_t>(numExperts_);
  const size_t row = static_cast<size_t>(prompt) * static_cast<size_t>(numLayers_) + static_cast<size_t>(layer);
  return std::span<const uint32_t>(counts_).subspan(row * experts, experts);
}

int64_t ActivationTrace::tokens(int prompt) const {
  if (prompt < 0 || prompt >= numPrompts_)
    throw Error("activation trace of " + model_ + ": prompt " + std::to_string(prompt) + " is out of range (" +
                std::to_string(numPrompts_) + " prompts)");
  return promptTokens_[static_cast<size_t>(prompt)];
}

}  // namespace zipmoe
