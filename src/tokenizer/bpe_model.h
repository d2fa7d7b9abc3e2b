// BpeModel: the tokenizer.json `model` of type BPE — vocabulary, ranked merges, the options
// byte-level files use (ignore_merges, byte_fallback, unk_token, fuse_unk) — and the merge loop of
// the Rust library: a word starts as one symbol per byte and the adjacent pair with the lowest
// merge rank is merged first, the leftmost among equal ranks, until no pair has a merge. Results
// are cached per word.
//
// Words arrive as raw bytes (what ByteLevel stands for); the vocabulary is kept in both spellings:
// the file's byte-level characters ("Ġthe", for find_piece / id_to_piece) and the bytes they stand
// for (" the", for encoding).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ferry {

struct JsonField;

// One token of a word: its id and the word bytes [begin, end) it covers.
struct BpeToken {
  int32_t id = 0;
  uint32_t begin = 0;
  uint32_t end = 0;
};

class BpeModel {
 public:
  BpeModel();  // empty: encodes nothing (from_json makes a real one)
  // From tokenizer.json's `model`. InputError for another type or an option Ferry does not
  // implement (dropout, continuing_subword_prefix, end_of_word_suffix), or merges naming
  // pieces that are not in the vocabulary.
  static BpeModel from_json(const nlohmann::json& model, const JsonField& field);
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the tokens of one word (its raw bytes, at most 4 GiB) to `out`. Thread-safe.
  void tokenize(std::string_view word, std::vector<BpeToken>& out) const;

  // The id of a piece in the file's spelling ("Ġthe"), or nullopt.
  std::optional<int64_t> find(std::string_view piece) const;
  // The file's spelling of `id`, or null when no piece has that id.
  const std::string* piece(int64_t id) const;
  // Number of pieces (the Rust library's vocab size, which numbers new added tokens) and the
  // largest id.
  size_t size() const { return pieces_.size(); }
  int64_t max_id() const { return static_cast<int64_t>(id_pieces_.size()) - 1; }

 private:
  void merge_word(std::string_view word, std::vector<BpeToken>& out) const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  // (left id, right id) -> (rank, merged id), open addressing.
  struct MergeTable {
    struct Slot {
      uint64_t key = ~uint64_t{0};
      uint32_t rank = 0;
      int32_t id = 0;
    };
    std::vector<Slot> slots;
    int shift = 64;
    void reserve(size_t count);
    void insert(int32_t left, int32_t right, uint32_t rank, int32_t id);  // a repeated pair: the last wins
    const Slot* find(int32_t left, int32_t right) const;
  };

  PieceMap pieces_;                     // file spelling -> id
  PieceMap byte_pieces_;                // raw bytes -> id (pieces spelled in ByteLevel characters)
  std::vector<std::string> id_pieces_;  // id -> file spelling
  std::vector<bool> has_id_;
  int32_t byte_ids_[256];               // the one-byte pieces, -1 if missing
  MergeTable merges_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;

  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace ferry
