// The chat-template corpus in tests/data/chat-templates: published models' templates (llama.cpp's
// and chujiezheng/chat_templates', SOURCES.md there) that the parity tests render and mask against
// transformers. kCorpusTemplates is how many there are: a template dropped from the folder, or one
// that a reference script silently skips, fails the tests that count them. The references add
// synthetic templates of their own ({% generation %} blocks); those are counted apart.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace ferry::test_support {

inline constexpr size_t kCorpusTemplates = 52;

inline std::filesystem::path chat_template_corpus_dir() {
  return std::filesystem::path(FERRY_SOURCE_DIR) / "tests" / "data" / "chat-templates";
}

// The corpus' template file names ("llamacpp__GLM-4.6.jinja"), sorted.
inline std::vector<std::string> chat_template_corpus_files() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(chat_template_corpus_dir())) {
    if (entry.path().extension() == ".jinja") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ferry::test_support
