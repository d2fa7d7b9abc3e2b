// OnigurumaRegex: Oniguruma behind Ferry's errors.
#include "src/tokenizer/onig_regex.h"

#include <oniguruma.h>

#include <memory>
#include <mutex>

#include "core/error.h"
#include "src/tokenizer/utf8.h"

namespace ferry {
namespace {

void initialize_oniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

struct RegionDeleter {
  void operator()(OnigRegion* region) const { onig_region_free(region, 1); }
};

}  // namespace

OnigurumaRegex::OnigurumaRegex(const std::string& pattern, const std::string& where) {
  initialize_oniguruma();
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc = onig_new(&regex_, begin, begin + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                          ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    regex_ = nullptr;
    throw InputError(where + " '" + pattern + "' is not a valid regular expression (Oniguruma: " +
                     reinterpret_cast<const char*>(message) + ")");
  }
}

OnigurumaRegex::~OnigurumaRegex() {
  if (regex_) onig_free(regex_);
}

void OnigurumaRegex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local std::unique_ptr<OnigRegion, RegionDeleter> region(onig_region_new());
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  size_t search_from = 0;
  bool skip_next_empty = false;  // set by a non-empty match, cleared by the empty match it skips
  while (search_from <= text.size()) {
    const int at = onig_search(regex_, str, end, str + search_from, end, region.get(), ONIG_OPTION_NONE);
    if (at < 0) {
      if (at != ONIG_MISMATCH) {
        OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(message, at);
        throw InternalError(std::string("Oniguruma search failed: ") + reinterpret_cast<const char*>(message));
      }
      return;
    }
    const auto begin = static_cast<size_t>(region->beg[0]);
    const auto finish = static_cast<size_t>(region->end[0]);
    search_from = finish;
    if (begin == finish) {
      search_from += finish < text.size() ? utf8::char_length(static_cast<unsigned char>(text[finish])) : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    out.emplace_back(begin, finish);
  }
}

}  // namespace ferry
