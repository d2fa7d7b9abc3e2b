// Finding stop strings in decoded text and cutting completions (see stop_strings.h).
#include "src/generate/stop_strings.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "src/generate/generate.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {

StopStrings::StopStrings(const std::vector<std::string>& strings) {
  for (const auto& s : strings) {
    if (s.empty()) throw UserError("a stop string is empty; it would end generation before the first token");
    if (std::find(strings_.begin(), strings_.end(), s) == strings_.end()) strings_.push_back(s);
  }
}

size_t StopStrings::find_in(std::string_view text) const {
  size_t first = std::string_view::npos;
  for (const auto& s : strings_) first = std::min(first, text.find(s));
  return first;
}

Completion completion_of(const GenerateResult& result, int64_t row, const Tokenizer& tokenizer,
                         const std::vector<int64_t>& stop_ids, const StopStrings& stop_strings) {
  const int64_t begin = result.prompt_length;
  const at::Tensor tokens = result.tokens[row].slice(0, begin).cpu().contiguous();
  const at::Tensor mask = result.attention_mask[row].slice(0, begin).cpu().contiguous();
  const auto* token = tokens.data_ptr<int64_t>();
  const auto* keep = mask.data_ptr<int64_t>();
  Completion completion;
  for (int64_t t = 0; t < tokens.size(0) && keep[t] == 1; ++t) {
    if (std::find(stop_ids.begin(), stop_ids.end(), token[t]) != stop_ids.end()) {
      completion.stopped = true;
      break;
    }
    completion.ids.push_back(token[t]);
  }
  completion.text = tokenizer.decode(completion.ids);
  if (const size_t cut = stop_strings.find_in(completion.text); cut != std::string::npos) {
    completion.text.resize(cut);
    completion.stopped = true;
  }
  return completion;
}

}  // namespace ferry
