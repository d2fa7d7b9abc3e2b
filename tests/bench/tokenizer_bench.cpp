// BpeTokenizer throughput: encodes a corpus document by document on one thread, as
// scripts/bench-tokenizer.sh has the Python `tokenizers` library do with the same tokenizer.json,
// and prints characters (Unicode code points, as Python counts them) per second.
//
//   tokenizer_bench --tokenizer tokenizer.json --corpus corpus.txt [--reps 5]
//
// Documents are the corpus split at blank lines ("\n\n"). Each repetition encodes them all with
// encode_with_control_pieces (the library's default: special tokens matched); the first is cold
// (empty word cache), the best of the rest warm. Prints "RESULT <what> <value>" lines and a
// checksum of the ids (position-weighted) that the Python side prints too.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_util.h"
#include "src/tokenizer/bpe_tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

size_t code_points(std::string_view text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, corpus_path;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--tokenizer") {
      tokenizer_path = argv[++i];
    } else if (a == "--corpus") {
      corpus_path = argv[++i];
    } else if (a == "--reps") {
      reps = std::max(2, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (tokenizer_path.empty() || corpus_path.empty()) {
    std::fprintf(stderr, "usage: tokenizer_bench --tokenizer tokenizer.json --corpus corpus.txt [--reps 5]\n");
    return 2;
  }
  try {
    const auto load_start = Clock::now();
    const ferry::BpeTokenizer tokenizer(tokenizer_path);
    const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
    const std::string corpus = ferry::read_file(corpus_path);
    std::vector<std::string_view> documents;
    for (size_t pos = 0; pos <= corpus.size();) {
      const size_t end = std::min(corpus.find("\n\n", pos), corpus.size());
      documents.push_back(std::string_view(corpus).substr(pos, end - pos));
      pos = end + 2;
    }
    const size_t chars = code_points(corpus) - 2 * (documents.size() - 1);  // without the separators

    double cold = 0, best = 1e30;
    size_t tokens = 0;
    for (int rep = 0; rep < reps; ++rep) {
      size_t count = 0;
      const auto start = Clock::now();
      for (const std::string_view doc : documents) count += tokenizer.encode_with_control_pieces(doc).size();
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (rep == 0) {
        cold = seconds;
      } else {
        best = std::min(best, seconds);
      }
      tokens = count;
    }
    uint64_t checksum = 0;  // untimed: what the ids are
    for (const std::string_view doc : documents) {
      const auto ids = tokenizer.encode_with_control_pieces(doc);
      for (size_t i = 0; i < ids.size(); ++i) checksum += static_cast<uint64_t>(ids[i]) * (i % 7 + 1);
    }
    std::printf("ferry: %s: %zu documents, %zu chars, %zu tokens, load %.3f s\n", tokenizer_path.c_str(),
                documents.size(), chars, tokens, load_s);
    std::printf("  cold %.3f s = %.3g chars/s, warm best of %d: %.3f s = %.3g chars/s\n", cold, chars / cold, reps - 1,
                best, chars / best);
    std::printf("RESULT ferry_cold_chars_per_s %.6g\n", chars / cold);
    std::printf("RESULT ferry_warm_chars_per_s %.6g\n", chars / best);
    std::printf("RESULT ferry_tokens %zu\n", tokens);
    std::printf("RESULT ferry_checksum %llu\n", static_cast<unsigned long long>(checksum));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
