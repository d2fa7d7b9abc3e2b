// Opening data files of every kind and streaming their rows (see data_file.h).
#include "src/data/data_file.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/data/arrow_rows.h"
#include "src/io/hf_hub_cache.h"

namespace ferry {
namespace fs = std::filesystem;

struct DataFile::Source {
  fs::path path;                       // jsonl / json: the file
  uintmax_t bytes = 0;                 // its size and modification time when opened
  int64_t mtime = 0;
  std::vector<ArrowRows> tables;       // arrow: one or more tables, rows numbered across them
  std::vector<int64_t> table_starts;   // first row of each table
};

namespace {

using Json = nlohmann::ordered_json;

std::pair<uintmax_t, int64_t> file_stamp(const fs::path& path) {
  std::error_code error;
  const uintmax_t bytes = fs::file_size(path, error);
  if (error) throw InputError("cannot read data file '" + path.string() + "': " + error.message());
  const auto time = fs::last_write_time(path, error);
  return {bytes, static_cast<int64_t>(
                     std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count())};
}

// The first bytes of a file (at most 4 KiB).
std::string file_head(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

bool looks_binary(const std::string& head) { return head.find('\0') != std::string::npos; }

char first_non_space(const std::string& head) {
  for (char c : head) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\xEF' && c != '\xBB' && c != '\xBF') return c;
  }
  return '\0';
}

// A JSON array of objects, streamed an item at a time: each item's text is cut out by tracking
// strings and bracket depth, then parsed on its own, so memory holds one item.
class JsonArrayScanner {
 public:
  JsonArrayScanner(std::istream& in, uint64_t offset) : in_(in), offset_(offset) {}

  // Moves to the next item's first byte; false after the closing ']'.
  bool next_item(bool first) {
    int c = skip_space();
    if (first) {
      if (c != '[') throw InputError("expected a JSON array of objects ('[' first)");
      c = skip_space();
      if (c == ']') return false;
    } else {
      if (c == ']') return false;
      if (c != ',') throw InputError(where_now() + "expected ',' or ']' after an item of the array");
      c = skip_space();
    }
    if (c == std::char_traits<char>::eof()) throw InputError("the file ends inside the array (truncated?)");
    pending_ = c;
    return true;
  }

  // The first byte of the item next_item moved to (already read).
  int pending() const { return pending_; }

  // The text of the object item whose first byte `first` was just read, up to its closing brace.
  std::string item(int first, int64_t max_bytes) {
    item_line_ = line_;
    item_offset_ = offset_ - 1;
    if (first != '{') throw InputError("expected an object ('{') as the array's item");
    std::string text;
    int depth = 0;
    bool in_string = false, escaped = false;
    for (int c = first; c != std::char_traits<char>::eof(); c = get()) {
      if (static_cast<int64_t>(text.size()) >= max_bytes) {
        throw InputError("an item is more than " + std::to_string(max_bytes) + " bytes");
      }
      text.push_back(static_cast<char>(c));
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return text;
      }
    }
    throw InputError("the file ends inside an item of the array (truncated?)");
  }

  int64_t item_line() const { return item_line_; }
  int64_t line() const { return line_; }
  uint64_t item_offset() const { return item_offset_; }

 private:
  int get() {
    const int c = in_.get();
    if (c != std::char_traits<char>::eof()) {
      ++offset_;
      if (c == '\n') ++line_;
    }
    return c;
  }
  int skip_space() {
    int c = get();
    while (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0xEF || c == 0xBB || c == 0xBF) c = get();
    return c;
  }
  std::string where_now() const { return "line " + std::to_string(line_) + ": "; }

  std::istream& in_;
  uint64_t offset_ = 0;
  int64_t line_ = 1;
  int pending_ = 0;
  int64_t item_line_ = 0;
  uint64_t item_offset_ = 0;
};

Json parse_item(const std::string& text) {
  Json object;
  try {
    object = Json::parse(text);
  } catch (const Json::exception& e) {
    throw InputError(std::string("invalid JSON: ") + e.what());
  }
  if (!object.is_object()) throw InputError("expected a JSON object, got " + std::string(object.type_name()));
  return object;
}

constexpr const char* kAccepted =
    "give a .jsonl file (one JSON object per line), a .json array, a .parquet file, a `datasets` folder "
    "(save_to_disk) or hf:ORG/NAME[:SPLIT] (docs/data.md)";

}  // namespace

DataFile DataFile::open(const std::string& spec) {
  DataFile file;
  file.name_ = spec;
  auto source = std::make_shared<Source>();
  const auto add_table = [&](const fs::path& path) {
    source->table_starts.push_back(source->tables.empty()
                                       ? 0
                                       : source->table_starts.back() + source->tables.back().size());
    source->tables.emplace_back(path);
  };
  if (spec.rfind("hf:", 0) == 0) {
    file.kind_ = Kind::arrow;
    for (const fs::path& path : io::hub_dataset_parquet_files(spec.substr(3))) add_table(path);
    file.source_ = std::move(source);
    return file;
  }
  if (spec.empty()) throw InputError("no data file given (data.train_file / data.prompt_file is empty)");
  const fs::path path = spec;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) {
    throw InputError("data file '" + spec + "' does not exist (relative paths are from the directory ferry runs in)");
  }
  if (fs::is_directory(status)) {
    bool has_parquet = false;
    for (auto it = fs::recursive_directory_iterator(path, error); !error && it != fs::recursive_directory_iterator();
         it.increment(error)) {
      if (it->path().extension() == ".parquet") has_parquet = true;
    }
    if (!ArrowRows::is_datasets_folder(path) && !has_parquet) {
      throw InputError("data file '" + spec + "' is a folder, but neither a `datasets` folder (save_to_disk: state.json "
                       "and data-*.arrow) nor one holding .parquet files; " + std::string(kAccepted));
    }
    file.kind_ = Kind::arrow;
    add_table(path);
    file.source_ = std::move(source);
    return file;
  }
  if (!fs::is_regular_file(status)) throw InputError("data file '" + spec + "' is not a regular file");
  const std::string head = file_head(path);
  if (head.empty()) throw InputError("data file '" + spec + "' is empty; " + std::string(kAccepted));
  if (ArrowRows::is_parquet_file(path) || path.extension() == ".parquet" || path.extension() == ".arrow") {
    file.kind_ = Kind::arrow;
    add_table(path);
    file.source_ = std::move(source);
    return file;
  }
  if (looks_binary(head)) {
    throw InputError("data file '" + spec + "' is binary, not JSON text (it is not Parquet either); " +
                     std::string(kAccepted));
  }
  file.kind_ = first_non_space(head) == '[' ? Kind::json_array : Kind::jsonl;
  source->path = path;
  std::tie(source->bytes, source->mtime) = file_stamp(path);
  file.source_ = std::move(source);
  return file;
}

std::string DataFile::where(int64_t number) const {
  switch (kind_) {
    case Kind::jsonl:
      return name_ + ":" + std::to_string(number);
    case Kind::json_array:
      return name_ + " item " + std::to_string(number);
    case Kind::arrow: {
      const auto& starts = source_->table_starts;
      const size_t t = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), number - 1) - starts.begin()) - 1;
      return source_->tables[t].where(number - 1 - starts[t]);
    }
  }
  return name_;
}

JsonlStats DataFile::for_each(bool skip_bad_rows,
                              const std::function<void(int64_t, uint64_t, const nlohmann::ordered_json&)>& on_row) const {
  FERRY_CHECK(source_ != nullptr, "DataFile used before open()");
  if (kind_ == Kind::jsonl) {
    // read_jsonl names the file as given; keep the user's spelling.
    return read_jsonl_at(source_->path.string(), skip_bad_rows, on_row);
  }
  JsonlStats stats;
  // One row through on_row with the reader's error policy (as read_jsonl_at has it).
  const auto handle = [&](int64_t number, const std::string& where, const std::function<void()>& call) {
    ++stats.lines;
    std::string problem;
    try {
      call();
      return;
    } catch (const nlohmann::ordered_json::exception& e) {
      problem = std::string("unexpected value: ") + e.what();
    } catch (const InputError& e) {
      problem = e.what();
    }
    const std::string message = where + ": " + problem;
    if (!skip_bad_rows) throw InputError(message + " (fix the row, or set data.skip_bad_lines: true to skip bad rows)");
    if (stats.skipped++ == 0) stats.first_skipped_error = message;
    (void)number;
  };
  if (kind_ == Kind::json_array) {
    std::ifstream in(source_->path, std::ios::binary);
    if (!in) throw InputError("cannot read data file '" + name_ + "': " + std::strerror(errno));
    JsonArrayScanner scanner(in, 0);
    int64_t number = 0;
    try {
      for (bool first = true; scanner.next_item(first); first = false) {
        ++number;
        std::string text;
        try {
          text = scanner.item(scanner.pending(), kMaxJsonlLineBytes);
        } catch (const InputError& e) {
          throw InputError(where(number) + " (line " + std::to_string(scanner.line()) + "): " + e.what());
        }
        const uint64_t position = scanner.item_offset();
        handle(number, where(number) + " (line " + std::to_string(scanner.item_line()) + ")",
               [&] { on_row(number, position, parse_item(text)); });
      }
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.rfind(name_, 0) == 0) throw;
      throw InputError(name_ + ": " + what);
    }
    return stats;
  }
  const int64_t total = source_->tables.empty() ? 0 : source_->table_starts.back() + source_->tables.back().size();
  for (int64_t row = 0; row < total; ++row) {
    handle(row + 1, where(row + 1), [&] { on_row(row + 1, static_cast<uint64_t>(row), read(static_cast<uint64_t>(row), row + 1)); });
  }
  return stats;
}

nlohmann::ordered_json DataFile::read(uint64_t position, int64_t number) const {
  FERRY_CHECK(source_ != nullptr, "DataFile used before open()");
  if (kind_ == Kind::arrow) {
    const auto& starts = source_->table_starts;
    const auto row = static_cast<int64_t>(position);
    const size_t t = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), row) - starts.begin()) - 1;
    return source_->tables[t].row(row - starts[t]);
  }
  const auto [bytes, mtime] = file_stamp(source_->path);
  if (bytes != source_->bytes || mtime != source_->mtime) {
    throw InputError(detail::concat(name_, ": the file changed since the run first read it (", source_->bytes,
                                    " bytes then, ", bytes, " now); the run reads its rows again as it goes, so ",
                                    "restore it, or edit a copy and restart the run"));
  }
  if (kind_ == Kind::jsonl) return read_jsonl_line(source_->path.string(), position, number);
  std::ifstream in(source_->path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(position));
  try {
    JsonArrayScanner scanner(in, position + 1);
    return parse_item(scanner.item(in.get(), kMaxJsonlLineBytes));
  } catch (const InputError& e) {
    throw InputError(where(number) + ": " + e.what() + " (the file changed since it was first read?)");
  }
}

}  // namespace ferry
