// Correct answers counted overall and per task kind (a line's string "kind" field, as the demo
// data carries), printed the same way by `ferry eval` and `ferry score`:
//   exact match: 17/200 = 8.5%
//     add_sub: 1/52 = 1.9%
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

namespace ferry::cli {

class AccuracyTally {
 public:
  void add(const nlohmann::ordered_json& line, bool correct);
  int64_t total() const { return total_.second; }
  // "<title>: c/n = p%" and, when lines had kinds, one indented line per kind.
  void print(std::ostream& out, const std::string& title) const;

 private:
  std::pair<int64_t, int64_t> total_{0, 0};                 // (correct, lines)
  std::map<std::string, std::pair<int64_t, int64_t>> kinds_;  // kind -> (correct, lines)
};

}  // namespace ferry::cli
