// JsonMatcher — a byte-level recogniser of one value of a Grammar (generation/json_grammar.h): a
// deterministic pushdown automaton whose stack holds one frame per open value. feed() says whether a
// byte may come next (and takes it); minRemaining() is the fewest bytes that complete the value from
// here, which lets the token mask keep a reply finishable within its token limit.
// A matcher is a small value (a vector of frames): copying it to try a token is the intended use.
// Thread-safety: a matcher is used by one thread; the Grammar is shared read-only. Cost: O(1) per
// byte (literal and key matching: O(alternatives)), minRemaining O(depth × keys).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "generation/json_grammar.h"

namespace zipmoe::constrain {

class JsonMatcher {
 public:
  // REQUIRES: `grammar` outlives the matcher. Starts before the root value.
  explicit JsonMatcher(const Grammar& grammar);

  // Takes all bytes or none (returns false and leaves the state as it was).
  bool feed(std::string_view bytes);
  // Takes the byte if the grammar allows it here; on false the matcher is spoilt (use a copy: the
  // token mask tries each token on a scratch copy).
  bool advance(uint8_t b);
  bool advance(std::string_view bytes);
  // The root value is complete (nothing more needed; a number or literal that could still grow
  // counts as complete).
  bool complete() const;
  // Nothing more may follow (the root value is closed).
  bool closed() const { return started_ && stack_.empty(); }
  int minRemaining() const;
  // Inside a string's content at a character boundary (no escape or character pending), where any
  // unescaped, non-control, well-formed UTF-8 bytes of at most stringRoom() characters may come:
  // the token mask's fast path. −1 elsewhere; INT_MAX without a length bound.
  int stringRoom() const;

  static constexpr size_t kMaxDepth = 64;

 private:
  struct Frame {
    int32_t node = 0;
    uint8_t phase = 0;
    bool spaceOk = false;   // one optional space may come now
    bool inEscape = false;  // string: after a backslash
    uint8_t hexLeft = 0;    // string: \u digits still to come
    uint8_t hexHigh = 0;    // string: the \u escape's first digit
    uint8_t surrogate = 0;  // string: where a surrogate pair stands (json_matcher.cpp)
    uint8_t utf8Left = 0;   // string: continuation bytes still to come
    uint8_t utf8Lo = 0x80, utf8Hi = 0xBF;  // the next continuation byte's range
    uint16_t pos = 0;       // literal / key / number bytes so far
    int32_t count = 0;      // array items / string characters
    int32_t keyIndex = 0;   // object: the first declared key that may still come
    uint64_t alive = 0;     // literal / key / tool candidates still matching
  };

  bool step(uint8_t b);
  bool push(int node, uint8_t b);  // opens a value of `node` whose first byte is `b`
  const Node& node(const Frame& f) const { return grammar_->nodes[static_cast<size_t>(f.node)]; }
  bool completeable(const Frame& f) const;
  int frameRemaining(const Frame& f) const;
  int requiredCost(const Node& n, int from, int* count) const;
  // Keys an object may name next, from keyIndex up to its first required key.
  uint64_t keyCandidates(const Node& n, int from) const;

  const Grammar* grammar_;
  std::vector<Frame> stack_;
  bool started_ = false;
};

}  // namespace zipmoe::constrain
