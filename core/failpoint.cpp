// FERRY_FAILPOINT: crash and disk-full injection for the crash-consistency tests (failpoint.h).
#include "core/failpoint.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "core/error.h"

namespace ferry {
namespace {

struct FailpointSpec {
  bool trace = false;
  int64_t file = 0;   // 1-based; 0: none
  std::string match;  // or the first file whose path contains this
  WriteFailure failure = WriteFailure::none;
};

FailpointSpec parse_failpoint(const std::string& text) {
  const std::string how =
      "FERRY_FAILPOINT='" + text + "' is not write:trace, write:K:ACTION (K >= 1) or write@TEXT:ACTION with ACTION kill or enospc; unset it "
      "for a normal run";
  FailpointSpec spec;
  if (text == "write:trace") {
    spec.trace = true;
    return spec;
  }
  const size_t colon = text.rfind(':');
  if (text.size() < 7 || colon == std::string::npos || colon < 6) throw ConfigError(how);
  const std::string target = text.substr(6, colon - 6);
  const std::string action = text.substr(colon + 1);
  if (target.empty()) throw ConfigError(how);
  if (text.starts_with("write@")) {
    spec.match = target;
  } else if (text.starts_with("write:") && target.size() <= 15 &&
             target.find_first_not_of("0123456789") == std::string::npos) {
    spec.file = std::stoll(target);
    if (spec.file < 1) throw ConfigError(how);
  } else {
    throw ConfigError(how);
  }
  if (action == "kill") {
    spec.failure = WriteFailure::kill;
  } else if (action == "enospc") {
    spec.failure = WriteFailure::no_space;
  } else {
    throw ConfigError(how);
  }
  return spec;
}

const std::optional<FailpointSpec>& failpoint_spec() {
  static const std::optional<FailpointSpec> spec = []() -> std::optional<FailpointSpec> {
    const char* text = std::getenv("FERRY_FAILPOINT");
    if (text == nullptr || *text == '\0') return std::nullopt;
    return parse_failpoint(text);
  }();
  return spec;
}

}  // namespace

WriteFailure file_write_failpoint(const std::filesystem::path& path) {
  const std::optional<FailpointSpec>& spec = failpoint_spec();
  if (!spec) return WriteFailure::none;
  static std::atomic<int64_t> files{0};
  static std::atomic<bool> matched{false};
  const int64_t k = ++files;
  if (spec->trace) std::cerr << "ferry failpoint: write " << k << " " << path.string() << std::endl;
  if (!spec->match.empty()) {
    if (path.string().find(spec->match) == std::string::npos || matched.exchange(true)) return WriteFailure::none;
    return spec->failure;
  }
  return k == spec->file ? spec->failure : WriteFailure::none;
}

}  // namespace ferry
