// StopStringFilter — cuts streamed text at the first stop string, holding back any tail that may
// still grow into one (the generator's and the serving scheduler's streaming).
// Thread-safety: one user. Cost: O(pending × stop strings) per piece.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zipmoe {

class StopStringFilter {
 public:
  // REQUIRES: `stops` outlives the filter; no stop string is empty.
  explicit StopStringFilter(const std::vector<std::string>& stops) : stops_(stops) {}

  // Returns the text that is safe to emit; `hit` is set when a stop string was found (the text before
  // it is returned, the rest is dropped).
  std::string push(std::string_view piece, bool& hit) {
    pending_ += piece;
    size_t first = std::string::npos;
    for (const auto& s : stops_) first = std::min(first, pending_.find(s));
    if (first != std::string::npos) {
      hit = true;
      std::string out = pending_.substr(0, first);
      pending_.clear();
      return out;
    }
    size_t hold = 0;
    for (const auto& s : stops_)
      for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len)
        if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
          hold = len;
          break;
        }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
  }

  std::string release() { return std::exchange(pending_, {}); }

 private:
  const std::vector<std::string>& stops_;
  std::string pending_;
};


}  // namespace zipmoe
