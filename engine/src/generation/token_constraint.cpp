// Constrained decoding (see token_constraint.h).
#include "generation/token_constraint.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "zipmoe/base/error.h"

namespace zipmoe::constrain {
namespace {

constexpr int kMaxParallelCalls = 16;
// mask() checks every token's completability itself when the reply is this close to its limit.
constexpr int kExactEndSlack = 8;
constexpr std::string_view kNextCall = "\n<tool_call>\n";

// Whether `bytes` may stand inside a JSON string that is at a character boundary: no quote,
// backslash or control byte, and well-formed UTF-8 (a character may be cut at the end).
bool plainStringBytes(const std::string& bytes) {
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (need > 0) {
      if (b < lo || b > hi) return false;
      --need;
      lo = 0x80;
      hi = 0xBF;
      continue;
    }
    if (b < 0x20 || b == '"' || b == '\\' || b == 0x7F) return false;
    if (b < 0x80) continue;
    if (b >= 0xC2 && b <= 0xDF) { need = 1; }
    else if (b >= 0xE0 && b <= 0xEF) { need = 2; lo = b == 0xE0 ? 0xA0 : 0x80; hi = b == 0xED ? 0x9F : 0xBF; }
    else if (b >= 0xF0 && b <= 0xF4) { need = 3; lo = b == 0xF0 ? 0x90 : 0x80; hi = b == 0xF4 ? 0x8F : 0xBF; }
    else return false;
  }
  return true;
}

}  // namespace

TokenIndex::TokenIndex(const Tokenizer& tokenizer) : vocab(tokenizer.vocabSize()) {
  bytes.resize(static_cast<size_t>(vocab));
  plainString.assign(static_cast<size_t>(vocab), 0);
  chars.assign(static_cast<size_t>(vocab), 0);
  for (int32_t id = 0; id < vocab; ++id) {
    auto b = tokenizer.tokenBytes(id);
    if (!b || b->empty()) continue;
    const size_t i = static_cast<size_t>(id);
    bytes[i] = std::move(*b);
    byFirst[static_cast<uint8_t>(bytes[i][0])].push_back(id);
    if (plainStringBytes(bytes[i])) {
      plainString[i] = 1;
      size_t leads = 0;
      for (char c : bytes[i]) leads += (static_cast<uint8_t>(c) & 0xC0) != 0x80 ? 1 : 0;
      chars[i] = static_cast<uint16_t>(std::min<size_t>(leads, 0xFFFF));
    } else {
      notPlain.push_back(id);
    }
    if (bytes[i].find('<') != std::string::npos) withAngle.push_back(id);
  }
}

std::shared_ptr<const ConstraintSpec> ConstraintSpec::compile(const OutputSpec& output) {
  auto spec = std::make_shared<ConstraintSpec>();
  const bool tools = !output.tools.empty() && output.toolChoice.mode != ToolChoiceMode::None;
  const ResponseFormat& format = output.responseFormat;
  if (tools) {
    if (format.kind != ResponseFormatKind::Text && output.toolChoice.mode == ToolChoiceMode::Auto)
      throw Error("response_format: with tools and tool_choice \"auto\" only \"text\" is supported (use tool_choice "
                  "\"none\" for structured output, or \"required\")");
    std::vector<ToolSpec> offered = output.tools;
    if (output.toolChoice.mode == ToolChoiceMode::Named) {
      offered.clear();
      for (const ToolSpec& t : output.tools)
        if (t.name == output.toolChoice.name) offered.push_back(t);
      if (offered.empty()) throw Error("tool_choice: no tool named '" + output.toolChoice.name + "' among the tools");
    }
    spec->toolCalls = true;
    spec->freeText = output.toolChoice.mode == ToolChoiceMode::Auto;
    spec->maxCalls = output.parallelToolCalls && output.toolChoice.mode != ToolChoiceMode::Named ? kMaxParallelCalls : 1;
    try {
      spec->grammar = toolCallGrammar(offered);
    } catch (const Error& e) {
      // toolCallGrammar names tools by their index among `offered`: for a named choice that is 0.
      throw Error(output.toolChoice.mode == ToolChoiceMode::Named ? "tool_choice: " + std::string(e.what()) : e.what());
    }
    return spec;
  }
  if (format.kind == ResponseFormatKind::Text) return nullptr;
  if (format.kind == ResponseFormatKind::JsonObject) {
    spec->grammar = anyObjectGrammar();
    return spec;
  }
  const std::string where = "response_format.json_schema.schema";
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(format.schemaJson);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not JSON: " + e.what());
  }
  try {
    spec->grammar = compileSchema(schema);
  } catch (const Error& e) {
    throw Error(where + std::string(e.what()));
  }
  return spec;
}

OutputConstraint::OutputConstraint(std::shared_ptr<const ConstraintSpec> spec, std::shared_ptr<const TokenIndex> index,
                                   std::span<const int32_t> eos)
    : spec_(std::move(spec)), index_(std::move(index)), eos_(eos), state_(spec_->grammar), scratch_(spec_->grammar) {
  if (spec_->toolCalls) {
    state_.phase = spec_->freeText ? Phase::Free : Phase::Literal;
    state_.literal = kToolCallOpen;
  }
}

bool OutputConstraint::advance(State& s, uint8_t b) const {
  switch (s.phase) {
    case Phase::Free:
      // Free text; "<tool_call>" switches to the format (no byte of the trigger repeats its first).
      if (static_cast<uint8_t>(kToolCallTrigger[s.trigger]) == b) {
        if (++s.trigger == kToolCallTrigger.size()) {
          s.phase = Phase::Literal;
          s.literal = kToolCallOpen;
          s.pos = kToolCallTrigger.size();
        }
      } else {
        s.trigger = b == static_cast<uint8_t>(kToolCallTrigger[0]) ? 1 : 0;
      }
      return true;
    case Phase::Literal:
      if (static_cast<uint8_t>(s.literal[s.pos]) != b) return false;
      if (++s.pos == s.literal.size()) {
        if (s.literal == kToolCallClose) {
          ++s.calls;
          s.phase = Phase::After;
        } else {
          s.phase = Phase::Value;
          s.value = JsonMatcher(spec_->grammar);
        }
      }
      return true;
    case Phase::Value:
      if (s.value.closed()) {
        if (!spec_->toolCalls) return false;
        s.phase = Phase::Literal;
        s.literal = kToolCallClose;
        s.pos = 0;
        return advance(s, b);
      }
      return s.value.advance(b);
    case Phase::After:
      if (s.calls >= spec_->maxCalls) return false;
      s.phase = Phase::Literal;
      s.literal = kNextCall;
      s.pos = 0;
      return advance(s, b);
  }
  return false;
}

bool OutputConstraint::advance(State& s, const std::string& bytes) const {
  for (char c : bytes)
    if (!advance(s, static_cast<uint8_t>(c))) return false;
  return true;
}

bool OutputConstraint::canEnd(const State& s) const {
  switch (s.phase) {
    case Phase::Free: case Phase::After: return true;
    case Phase::Value: return !spec_->toolCalls && s.value.complete();
    case Phase::Literal: return false;
  }
  return false;
}

int OutputConstraint::minRemaining(const State& s) const {
  const int close = static_cast<int>(kToolCallClose.size());
  const int call = spec_->grammar.nodes[static_cast<size_t>(spec_->grammar.root)].minBytes;
  switch (s.phase) {
    case Phase::Free: case Phase::After: return 0;
    case Phase::Value: return s.value.minRemaining() + (spec_->toolCalls ? close : 0);
    case Phase::Literal: {
      const int rest = static_cast<int>(s.literal.size() - s.pos);
      return s.literal == kToolCallClose ? rest : rest + call + close;
    }
  }
  return 0;
}

bool OutputConstraint::isEos(int32_t token) const { return std::find(eos_.begin(), eos_.end(), token) != eos_.end(); }

bool OutputConstraint::tokenFits(const std::string& bytes, int remaining, bool exactEnd, State& scratch) const {
  scratch = state_;
  if (!advance(scratch, bytes)) return false;
  return !exactEnd || minRemaining(scratch) <= remaining - 1;
}

void OutputConstraint::mask(std::span<float> logits, int remaining, bool exactEnd) const {
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  const TokenIndex& index = *index_;
  const size_t n = std::min(logits.size(), index.bytes.size());
  for (size_t i = index.bytes.size(); i < logits.size(); ++i) logits[i] = kOff;  // padding beyond the vocabulary
  exactEnd = exactEnd || remaining - 1 <= minRemaining(state_) + kExactEndSlack;
  const bool ending = canEnd(state_);
  const bool free = state_.phase == Phase::Free;
  // Special tokens: EOS where the reply may end; others only in free text.
  for (size_t i = 0; i < n; ++i)
    if (index.bytes[i].empty() && !(free || (ending && isEos(static_cast<int32_t>(i))))) logits[i] = kOff;
  if (free && !exactEnd) {
    // Only tokens that may write (part of) the trigger can be refused.
    auto check = [&](int32_t t) {
      if (!tokenFits(index.bytes[static_cast<size_t>(t)], remaining, false, scratch_)) logits[static_cast<size_t>(t)] = kOff;
    };
    for (int32_t t : index.withAngle) check(t);
    if (state_.trigger > 0)
      for (int32_t t : index.byFirst[static_cast<uint8_t>(kToolCallTrigger[state_.trigger])]) check(t);
    return;
  }
  // Inside a string: plain tokens pass on their character count; a plain token ends at most one
  // character short (≤ 3 continuation bytes more to come), so near the limit they are tried too.
  const int room = state_.phase == Phase::Value ? state_.value.stringRoom() : -1;
  if (room >= 0 && remaining - 1 >= minRemaining(state_) + 3) {
    for (size_t i = 0; i < n; ++i)
      if (index.plainString[i] && index.chars[i] > room) logits[i] = kOff;
    for (int32_t t : index.notPlain)
      if (!tokenFits(index.bytes[static_cast<size_t>(t)], remaining, exactEnd, scratch_)) logits[static_cast<size_t>(t)] = kOff;
    return;
  }
  // Everything else: only tokens whose first byte fits are tried.
  std::vector<uint8_t>& allowed = allowed_;
  allowed.assign(n, 0);
  for (int b = 0; b < 256; ++b) {
    scratch_ = state_;
    if (!advance(scratch_, static_cast<uint8_t>(b))) continue;
    for (int32_t t : index.byFirst[static_cast<size_t>(b)])
      if (static_cast<size_t>(t) < n && tokenFits(index.bytes[static_cast<size_t>(t)], remaining, exactEnd, scratch_))
        allowed[static_cast<size_t>(t)] = 1;
  }
  for (size_t i = 0; i < n; ++i)
    if (!index.bytes[i].empty() && !allowed[i]) logits[i] = kOff;
}

bool OutputConstraint::allows(int32_t token, int remaining) const {
  if (token < 0 || static_cast<size_t>(token) >= index_->bytes.size()) return false;
  const std::string& bytes = index_->bytes[static_cast<size_t>(token)];
  if (bytes.empty()) return state_.phase == Phase::Free || (canEnd(state_) && isEos(token));
  return tokenFits(bytes, remaining, true, scratch_);
}

void OutputConstraint::accept(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= index_->bytes.size()) return;
  const std::string& bytes = index_->bytes[static_cast<size_t>(token)];
  if (!bytes.empty()) advance(state_, bytes);
}

}  // namespace zipmoe::constrain
