// BpeModel: vocabulary, merges and the merge loop.
#include "src/tokenizer/bpe_model.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <shared_mutex>

#include "src/tokenizer/byte_level.h"
#include "src/tokenizer/tokenizer_json.h"

namespace ferry {
namespace {

constexpr size_t kCacheCapacity = 1 << 16;   // words; the cache stops growing when full
constexpr size_t kCacheMaxWordBytes = 256;   // longer words are merged each time

}  // namespace

struct BpeModel::Cache {
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::vector<BpeToken>, StringHash, std::equal_to<>> words;
};

void BpeModel::MergeTable::reserve(size_t count) {
  size_t capacity = 16;
  shift = 60;
  while (capacity < 2 * count) {
    capacity *= 2;
    --shift;
  }
  slots.assign(capacity, Slot{});
}

void BpeModel::MergeTable::insert(int32_t left, int32_t right, uint32_t rank, int32_t id) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift;
  while (slots[i].key != ~uint64_t{0} && slots[i].key != key) i = (i + 1) & (slots.size() - 1);
  slots[i] = {key, rank, id};
}

const BpeModel::MergeTable::Slot* BpeModel::MergeTable::find(int32_t left, int32_t right) const {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift;
  while (true) {
    const Slot& slot = slots[i];
    if (slot.key == key) return &slot;
    if (slot.key == ~uint64_t{0}) return nullptr;
    i = (i + 1) & (slots.size() - 1);
  }
}

BpeModel::BpeModel() : cache_(std::make_unique<Cache>()) { std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1); }
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

BpeModel BpeModel::from_json(const nlohmann::json& model, const JsonField& field) {
  if (!model.is_object()) field.fail("must be an object (the BPE model)");
  const std::string type = model.contains("type") ? json_type(model, field) : "BPE";
  if (type != "BPE") field.at("type").unsupported(type, {"BPE"});
  if (const auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      field.at("dropout").fail(it->dump() + " is not supported: BPE dropout samples a different encoding each time");
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!json_string(model, key, "", field).empty()) {
      field.at(key).fail("'" + json_string(model, key, "", field) +
                         "' is not supported (byte-level BPE files leave it null or empty)");
    }
  }

  BpeModel out;
  out.ignore_merges_ = json_bool(model, "ignore_merges", false, field);
  out.byte_fallback_ = json_bool(model, "byte_fallback", false, field);
  out.fuse_unk_ = json_bool(model, "fuse_unk", false, field);

  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) field.at("vocab").fail("must be an object of piece -> id");
  out.pieces_.reserve(vocab->size());
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX) {
      field.at("vocab").fail("'" + it.key() + "' has id " + it->dump() + "; ids are integers from 0");
    }
    const auto id = it->get<int32_t>();
    out.pieces_[it.key()] = id;
    max_id = std::max<int64_t>(max_id, id);
  }
  out.id_pieces_.resize(static_cast<size_t>(max_id + 1));
  out.has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [piece, id] : out.pieces_) {
    out.id_pieces_[static_cast<size_t>(id)] = piece;
    out.has_id_[static_cast<size_t>(id)] = true;
    if (auto bytes = byte_level::decode(piece)) {
      if (bytes->size() == 1) out.byte_ids_[static_cast<unsigned char>((*bytes)[0])] = id;
      out.byte_pieces_.emplace(std::move(*bytes), id);
    }
  }

  const std::string unk = json_string(model, "unk_token", "", field);
  if (!unk.empty()) {
    const auto it = out.pieces_.find(unk);
    if (it == out.pieces_.end()) field.at("unk_token").fail("'" + unk + "' is not in model.vocab");
    out.unk_id_ = it->second;
  } else if (model.contains("unk_token") && model["unk_token"].is_string()) {
    field.at("unk_token").fail("is the empty string; use null for no unknown token");
  }

  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) field.at("merges").fail("must be a list of merges");
  out.merges_.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const nlohmann::json& merge = (*merges)[rank];
    std::string left, right;
    if (merge.is_string()) {  // the legacy "a b" form: exactly one space
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        field.at("merges").at(rank).fail("'" + text + "' is not two pieces separated by one space");
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      field.at("merges").at(rank).fail(merge.dump() + " is not a merge (\"a b\" or [\"a\", \"b\"])");
    }
    const auto find_piece = [&](const std::string& piece) {
      const auto it = out.pieces_.find(piece);
      if (it == out.pieces_.end()) {
        field.at("merges").at(rank).fail("'" + left + " " + right + "' uses '" + piece +
                                         "', which is not in model.vocab");
      }
      return it->second;
    };
    const int32_t left_id = find_piece(left), right_id = find_piece(right), merged_id = find_piece(left + right);
    out.merges_.insert(left_id, right_id, static_cast<uint32_t>(rank), merged_id);
  }
  return out;
}

std::optional<int64_t> BpeModel::find(std::string_view piece) const {
  const auto it = pieces_.find(piece);
  if (it == pieces_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::piece(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(id_pieces_.size()) || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &id_pieces_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<BpeToken>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    // Llama 3: a word that is itself a piece is that piece, whatever the merges would make of it.
    const auto it = byte_pieces_.find(word);
    if (it != byte_pieces_.end()) {
      out.push_back({it->second, 0, static_cast<uint32_t>(word.size())});
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_->mutex);
    const auto it = cache_->words.find(word);
    if (it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_->mutex);
    if (cache_->words.size() < kCacheCapacity) {
      cache_->words.try_emplace(std::string(word), out.begin() + static_cast<long>(first), out.end());
    }
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<BpeToken>& out) const {
  // Word::add / merge_all of the Rust library. Symbol lengths count bytes of the ByteLevel
  // spelling (1 or 2 per byte), as there, so offsets come out the same even when a byte had to
  // fall back to <0xNN> pieces or the unknown token.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;
  };
  struct Merge {
    uint32_t rank;
    int32_t pos;
    int32_t id;
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Merge> queue;
  symbols.clear();
  queue.clear();
  const auto add = [&](int32_t id, uint32_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };

  bool pending_unk = false;
  uint32_t unk_len = 0;
  for (const char ch : word) {
    const auto byte = static_cast<unsigned char>(ch);
    const auto width = static_cast<uint32_t>(byte_level::char_of(byte).size());
    if (byte_ids_[byte] >= 0) {
      if (pending_unk) {
        add(unk_id_, unk_len);
        pending_unk = false;
      }
      add(byte_ids_[byte], width);
      continue;
    }
    if (byte_fallback_) {
      // The <0xNN> pieces of the UTF-8 bytes of the ByteLevel character, if all exist.
      const std::string_view spelled = byte_level::char_of(byte);
      int32_t ids[2] = {-1, -1};
      bool all = true;
      for (size_t i = 0; i < spelled.size(); ++i) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(spelled[i]));
        const auto it = pieces_.find(std::string_view(name));
        if (it == pieces_.end()) {
          all = false;
          break;
        }
        ids[i] = it->second;
      }
      if (all) {
        for (size_t i = 0; i < spelled.size(); ++i) add(ids[i], 1);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk && fuse_unk_) {
        unk_len += width;
      } else {
        if (pending_unk) add(unk_id_, unk_len);
        pending_unk = true;
        unk_len = width;
      }
    }
    // Neither a piece, a fallback nor an unknown token: the byte is dropped, as in Rust.
  }
  if (pending_unk) add(unk_id_, unk_len);

  const auto later = [](const Merge& a, const Merge& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = merges_.find(symbols[i].id, symbols[i + 1].id)) {
      queue.push_back({m->rank, static_cast<int32_t>(i), m->id});
    }
  }
  std::make_heap(queue.begin(), queue.end(), later);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    const Merge top = queue.back();
    queue.pop_back();
    Symbol& current = symbols[static_cast<size_t>(top.pos)];
    if (current.len == 0 || current.next < 0) continue;  // merged away, or last
    const Symbol right = symbols[static_cast<size_t>(current.next)];
    const auto* m = merges_.find(current.id, right.id);
    if (!m || m->id != top.id) continue;  // a stale entry
    current.id = top.id;
    current.len += right.len;
    symbols[static_cast<size_t>(current.next)].len = 0;
    current.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (current.prev >= 0) {
      if (const auto* p = merges_.find(symbols[static_cast<size_t>(current.prev)].id, current.id)) {
        queue.push_back({p->rank, current.prev, p->id});
        std::push_heap(queue.begin(), queue.end(), later);
      }
    }
    if (current.next >= 0) {
      if (const auto* n = merges_.find(current.id, symbols[static_cast<size_t>(current.next)].id)) {
        queue.push_back({n->rank, top.pos, n->id});
        std::push_heap(queue.begin(), queue.end(), later);
      }
    }
  }

  // Offsets: the Rust library adds up symbol lengths (in spelling bytes); translate those
  // positions back to word bytes.
  thread_local std::vector<uint32_t> starts;  // spelling position where each word byte starts
  starts.resize(word.size() + 1);
  starts[0] = 0;
  for (size_t i = 0; i < word.size(); ++i) {
    starts[i + 1] = starts[i] + static_cast<uint32_t>(byte_level::char_of(static_cast<unsigned char>(word[i])).size());
  }
  size_t byte = 0;
  const auto byte_of = [&](uint32_t position) {  // positions only grow
    while (byte + 1 < word.size() && starts[byte + 1] <= position) ++byte;
    return static_cast<uint32_t>(byte);
  };
  uint32_t position = 0;
  for (const Symbol& s : symbols) {
    if (s.len == 0) continue;
    const uint32_t begin = byte_of(position);
    position += s.len;
    out.push_back({s.id, begin, byte_of(position - 1) + 1});
  }
}

}  // namespace ferry
