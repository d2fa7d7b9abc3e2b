// ArrowRows: Parquet files, folders of them and Hugging Face `datasets` folders (Arrow IPC streams)
// read a row at a time as JSON objects, with Apache Arrow's C++ libraries (see arrow_rows.h).
//
// Every file becomes a list of record batches with the row each starts at: a Parquet file one row
// group at a time (decoded when a row of it is asked for, the last one kept), an Arrow file all at
// once (zero-copy views into its memory map). Arrow reports errors as Status (and Parquet sometimes
// as exceptions); both become InputErrors naming the file. Record batches are checked in full
// (ValidateFull: offsets, UTF-8, dictionary indices) before a row is read from them, so a corrupt
// file is an error, never a read out of bounds.
#include "src/data/arrow_rows.h"

#include <algorithm>
#include <fstream>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include <arrow/array.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/scalar.h>
#include <arrow/type.h>
#include <arrow/type_traits.h>
#include <arrow/util/float16.h>
#include <arrow/util/utf8.h>
#include <nlohmann/json.hpp>
#include <parquet/arrow/reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include "core/error.h"

namespace ferry {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

enum class FileKind { parquet, arrow_stream, arrow_file };

[[noreturn]] void input_error(const std::string& message) { throw InputError(message); }

// total + n rows, refusing a negative count or a sum past int64 (a corrupt file's counts).
int64_t plus_rows(int64_t total, int64_t n, const std::string& file, const std::string& what) {
  int64_t sum = 0;
  if (n < 0 || __builtin_add_overflow(total, n, &sum)) {
    input_error(file + ": " + what + " claims " + std::to_string(n) + " rows after " + std::to_string(total) +
                ": the file is corrupt");
  }
  return sum;
}

// Record batches of one file (or of one decoded Parquet row group) and the row each starts at
// (within that file or group); starts has one entry more than batches, the total last.
struct Batches {
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  std::vector<int64_t> starts{0};

  void add(std::shared_ptr<arrow::RecordBatch> batch, const std::string& file) {
    starts.push_back(plus_rows(starts.back(), batch->num_rows(), file,
                               "record batch " + std::to_string(batches.size() + 1)));
    batches.push_back(std::move(batch));
  }
  // The batch that holds row `row` (0 <= row < starts.back()).
  size_t find(int64_t row) const {
    return static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), row) - starts.begin()) - 1;
  }
};

// One file of the source.
struct SourceFile {
  std::string path;  // as shown in messages
  FileKind kind = FileKind::parquet;
  int64_t first_row = 0;  // its first row's index over all files
  int64_t rows = 0;
  std::shared_ptr<arrow::Schema> schema;
  std::vector<int64_t> group_starts{0};  // Parquet: the row each row group starts at, the total last
  std::shared_ptr<arrow::io::MemoryMappedFile> map;  // Arrow: the mapped file ...
  Batches batches;                                   // ... and its batches
  std::vector<char> checked;                         // whether batch k passed ValidateFull
};

// The Parquet row group decoded last.
struct DecodedGroup {
  size_t file = 0;
  int group = -1;
  Batches batches;
};

void check(const arrow::Status& status, const std::string& file, const std::string& what) {
  if (!status.ok()) {
    input_error(file + ": " + what + ": " + status.ToString());
  }
}

template <class T>
T take(arrow::Result<T> result, const std::string& file, const std::string& what) {
  check(result.status(), file, what);
  return std::move(result).ValueUnsafe();
}

// Runs `body`; an exception from Arrow or Parquet (or an allocation a hostile file asked for)
// becomes an InputError naming the file. Ferry's own errors pass through.
template <class Fn>
auto guarded(const std::string& file, const std::string& what, Fn&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    input_error(file + ": " + what + ": " + e.what());
  }
}

std::string columns_text(const arrow::Schema& schema) {
  std::string out;
  for (const auto& field : schema.fields()) {
    out += (out.empty() ? "" : ", ") + field->ToString();
  }
  return out.empty() ? "no columns" : out;
}

// The name of a column or struct field of `type` (at any depth) that is not valid UTF-8 (JSON keys
// must be), if any. Arrow leaves names unchecked.
std::optional<std::string> bad_field_name(const arrow::DataType& type) {
  for (const auto& field : type.fields()) {
    if (!arrow::util::ValidateUTF8(field->name())) return field->name();
    if (auto inner = bad_field_name(*field->type())) return inner;
  }
  if (type.id() == arrow::Type::DICTIONARY) {
    return bad_field_name(*static_cast<const arrow::DictionaryType&>(type).value_type());
  }
  return std::nullopt;
}

// Whether two column types give values of the same JSON shape (string and large_string do; a
// column of nulls matches anything).
bool same_json_shape(const arrow::DataType& a, const arrow::DataType& b) {
  using arrow::Type;
  if (a.id() == Type::NA || b.id() == Type::NA) {
    return true;
  }
  if (a.id() == Type::DICTIONARY) {
    return same_json_shape(*static_cast<const arrow::DictionaryType&>(a).value_type(), b);
  }
  if (b.id() == Type::DICTIONARY) {
    return same_json_shape(a, *static_cast<const arrow::DictionaryType&>(b).value_type());
  }
  auto kind = [](const arrow::DataType& t) -> int {
    if (arrow::is_string(t.id()) || t.id() == Type::STRING_VIEW) return 1;
    if (arrow::is_integer(t.id())) return 2;
    if (arrow::is_floating(t.id())) return 3;
    if (t.id() == Type::MAP) return 5;  // before lists: a map is a list type to Arrow
    if (arrow::is_list_like(t.id()) || arrow::is_list_view(t.id())) return 4;
    return 0;
  };
  const int ka = kind(a);
  if (ka != kind(b)) {
    return false;
  }
  if (ka == 4 || ka == 5) {
    if (a.num_fields() != b.num_fields()) return false;
    for (int k = 0; k < a.num_fields(); ++k) {
      if (!same_json_shape(*a.field(k)->type(), *b.field(k)->type())) return false;
    }
    return true;
  }
  if (ka != 0) {
    return true;
  }
  if (a.id() != b.id()) {
    return false;
  }
  if (a.id() == Type::STRUCT) {
    if (a.num_fields() != b.num_fields()) return false;
    for (int k = 0; k < a.num_fields(); ++k) {
      if (a.field(k)->name() != b.field(k)->name() || !same_json_shape(*a.field(k)->type(), *b.field(k)->type())) {
        return false;
      }
    }
    return true;
  }
  return a.Equals(b);
}

// A value whose type has no JSON form the loaders use (binary, timestamp, decimal, ...).
struct UnsupportedValue {
  std::string type;
};

ordered_json value_at(const arrow::Array& array, int64_t i);

template <class ListArray>
ordered_json list_at(const ListArray& list, int64_t i) {
  ordered_json out = ordered_json::array();
  const int64_t begin = list.value_offset(i);
  const int64_t length = list.value_length(i);
  const arrow::Array& values = *list.values();
  out.get_ref<ordered_json::array_t&>().reserve(static_cast<size_t>(length));
  for (int64_t k = 0; k < length; ++k) {
    out.push_back(value_at(values, begin + k));
  }
  return out;
}

// Element i of `array` as JSON, as pyarrow's to_pylist gives it.
ordered_json value_at(const arrow::Array& array, int64_t i) {
  using arrow::Type;
  if (array.IsNull(i)) {
    return nullptr;
  }
  switch (array.type_id()) {
    case Type::NA:
      return nullptr;
    case Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(array).Value(i);
    case Type::INT8:
      return static_cast<const arrow::Int8Array&>(array).Value(i);
    case Type::INT16:
      return static_cast<const arrow::Int16Array&>(array).Value(i);
    case Type::INT32:
      return static_cast<const arrow::Int32Array&>(array).Value(i);
    case Type::INT64:
      return static_cast<const arrow::Int64Array&>(array).Value(i);
    case Type::UINT8:
      return static_cast<const arrow::UInt8Array&>(array).Value(i);
    case Type::UINT16:
      return static_cast<const arrow::UInt16Array&>(array).Value(i);
    case Type::UINT32:
      return static_cast<const arrow::UInt32Array&>(array).Value(i);
    case Type::UINT64:
      return static_cast<const arrow::UInt64Array&>(array).Value(i);
    case Type::HALF_FLOAT:
      return static_cast<double>(
          arrow::util::Float16::FromBits(static_cast<const arrow::HalfFloatArray&>(array).Value(i)).ToFloat());
    case Type::FLOAT:
      return static_cast<double>(static_cast<const arrow::FloatArray&>(array).Value(i));
    case Type::DOUBLE:
      return static_cast<const arrow::DoubleArray&>(array).Value(i);
    case Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(array).GetView(i));
    case Type::LARGE_STRING:
      return std::string(static_cast<const arrow::LargeStringArray&>(array).GetView(i));
    case Type::STRING_VIEW:
      return std::string(static_cast<const arrow::StringViewArray&>(array).GetView(i));
    case Type::DICTIONARY: {
      const auto& dictionary = static_cast<const arrow::DictionaryArray&>(array);
      return value_at(*dictionary.dictionary(), dictionary.GetValueIndex(i));
    }
    case Type::LIST:
      return list_at(static_cast<const arrow::ListArray&>(array), i);
    case Type::LARGE_LIST:
      return list_at(static_cast<const arrow::LargeListArray&>(array), i);
    case Type::FIXED_SIZE_LIST:
      return list_at(static_cast<const arrow::FixedSizeListArray&>(array), i);
    case Type::LIST_VIEW:
      return list_at(static_cast<const arrow::ListViewArray&>(array), i);
    case Type::LARGE_LIST_VIEW:
      return list_at(static_cast<const arrow::LargeListViewArray&>(array), i);
    case Type::MAP: {  // [[key, value], ...], as pyarrow gives a map
      const auto& map = static_cast<const arrow::MapArray&>(array);
      ordered_json out = ordered_json::array();
      for (int64_t k = map.value_offset(i), end = k + map.value_length(i); k < end; ++k) {
        out.push_back(ordered_json::array({value_at(*map.keys(), k), value_at(*map.items(), k)}));
      }
      return out;
    }
    case Type::STRUCT: {
      const auto& record = static_cast<const arrow::StructArray&>(array);
      const auto& fields = record.struct_type()->fields();
      const arrow::ArrayVector& values = record.fields();  // boxed once, offset applied
      ordered_json out = ordered_json::object();
      for (size_t k = 0; k < fields.size(); ++k) {
        out.emplace(fields[k]->name(), value_at(*values[k], i));
      }
      return out;
    }
    default: {
      // Dates, times, timestamps, durations and decimals as text, as Arrow's cast to string writes
      // them (hub datasets often carry a timestamp column the loaders never use).
      const auto id = array.type_id();
      if (arrow::is_temporal(id) || arrow::is_decimal(id)) {
        const auto scalar = array.GetScalar(i);
        if (scalar.ok()) return (*scalar)->ToString();
      }
      throw UnsupportedValue{array.type()->ToString()};
    }
  }
}

// The first bytes of a file, to tell Parquet from Arrow IPC.
std::string file_head(const fs::path& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string head(bytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(bytes));
  head.resize(in ? bytes : static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return head;
}

bool is_hidden(const fs::path& relative) {
  for (const auto& part : relative) {
    if (part.string().starts_with(".")) return true;
  }
  return false;
}

}  // namespace

struct ArrowRows::Impl {
  std::vector<SourceFile> files;
  std::vector<std::string> file_names;
  std::vector<std::string> columns;
  int64_t rows = 0;

  // The cache, for row() from any thread: the Parquet reader of the file read last, the row group
  // decoded last, which Arrow batches passed ValidateFull.
  mutable std::mutex mutex;
  mutable std::unique_ptr<parquet::arrow::FileReader> reader;
  mutable size_t reader_file = SIZE_MAX;
  mutable std::shared_ptr<const DecodedGroup> decoded;

  void open_path(const fs::path& path);
  void add_file(const fs::path& path, std::optional<FileKind> kind = std::nullopt);
  void add_parquet(SourceFile& file);
  void add_arrow(SourceFile& file);
  std::unique_ptr<parquet::arrow::FileReader> open_parquet(const std::string& path) const;
  std::shared_ptr<const DecodedGroup> decode(size_t file, int group) const;
  const arrow::RecordBatch& batch_of(int64_t i, int64_t& row_in_batch,
                                     std::shared_ptr<const DecodedGroup>& keep) const;
  size_t file_of(int64_t i) const {
    size_t lo = 0, hi = files.size();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      (files[mid].first_row <= i ? lo : hi) = mid;
    }
    return lo;
  }
};

void ArrowRows::Impl::open_path(const fs::path& path) {
  static const bool utf8_tables = (arrow::util::InitializeUTF8(), true);  // for ValidateUTF8
  (void)utf8_tables;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    input_error(path.string() + ": no such file or folder (data: a .jsonl/.json file, a Parquet file or folder, "
                                "or a datasets folder written by Dataset.save_to_disk)");
  }
  if (!fs::is_directory(status)) {
    add_file(path);
  } else if (fs::exists(path / "state.json")) {
    // Dataset.save_to_disk: the shards in the order state.json lists them.
    const std::string state_path = (path / "state.json").string();
    ordered_json state;
    try {
      std::ifstream in(path / "state.json");
      state = ordered_json::parse(in);
    } catch (const std::exception& e) {
      input_error(state_path + ": not a datasets state.json (" + e.what() + ")");
    }
    if (!state.is_object() || !state.contains("_data_files") || !state["_data_files"].is_array() ||
        state["_data_files"].empty()) {
      input_error(state_path + ": no \"_data_files\" list (is this a folder written by Dataset.save_to_disk?)");
    }
    const auto& shards = state["_data_files"];
    for (size_t k = 0; k < shards.size(); ++k) {
      const auto& entry = shards[k];
      if (!entry.is_object() || !entry.contains("filename") || !entry["filename"].is_string() ||
          entry["filename"].get<std::string>().empty() ||
          fs::path(entry["filename"].get<std::string>()).has_parent_path()) {
        input_error(state_path + ": _data_files[" + std::to_string(k) + "] is not {\"filename\": \"<file in this folder>\"}");
      }
      const fs::path shard = path / entry["filename"].get<std::string>();
      if (!fs::is_regular_file(shard)) {
        input_error(shard.string() + ": missing (" + state_path + " lists it as shard " + std::to_string(k + 1) +
                    " of " + std::to_string(shards.size()) + "; copy the whole folder again)");
      }
      add_file(shard);
    }
  } else {
    // A folder of Parquet files (the hub's layout: data/train-00000-of-00002.parquet, ...).
    std::vector<fs::path> parquet_files;
    try {
      for (auto it = fs::recursive_directory_iterator(path); it != fs::recursive_directory_iterator(); ++it) {
        const fs::path relative = fs::relative(it->path(), path);
        if (is_hidden(relative)) {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file() && it->path().extension() == ".parquet") {
          parquet_files.push_back(it->path());
        }
      }
    } catch (const fs::filesystem_error& e) {
      input_error(path.string() + ": cannot list the folder: " + e.what());
    }
    if (parquet_files.empty()) {
      if (fs::exists(path / "dataset_dict.json")) {
        input_error(path.string() + ": a DatasetDict folder (dataset_dict.json): name one split's folder, e.g. " +
                    (path / "train").string());
      }
      input_error(path.string() + ": holds no *.parquet files and no state.json (a data folder is a folder of "
                                  "Parquet files or one written by Dataset.save_to_disk)");
    }
    std::sort(parquet_files.begin(), parquet_files.end());
    for (const auto& file : parquet_files) {
      add_file(file, FileKind::parquet);
    }
  }
  if (files.empty()) {
    input_error(path.string() + ": no data files");
  }
  for (size_t k = 1; k < files.size(); ++k) {
    const auto& a = *files.front().schema;
    const auto& b = *files[k].schema;
    bool same = a.num_fields() == b.num_fields();
    for (int c = 0; same && c < a.num_fields(); ++c) {
      same = a.field(c)->name() == b.field(c)->name() && same_json_shape(*a.field(c)->type(), *b.field(c)->type());
    }
    if (!same) {
      input_error(files[k].path + ": its columns (" + columns_text(b) + ") do not match those of " +
                  files.front().path + " (" + columns_text(a) + "); every file of " + path.string() +
                  " must have the same columns");
    }
  }
  for (const auto& field : files.front().schema->fields()) {
    columns.push_back(field->name());
  }
}

void ArrowRows::Impl::add_file(const fs::path& path, std::optional<FileKind> kind) {
  SourceFile file;
  file.path = path.string();
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  if (ec) {
    input_error(file.path + ": cannot read it (" + ec.message() + ")");
  }
  if (bytes == 0) {
    input_error(file.path + ": the file is empty");
  }
  const std::string head = file_head(path, 8);
  if (head.starts_with("PAR1")) {
    file.kind = FileKind::parquet;
  } else if (kind == FileKind::parquet) {
    input_error(file.path + ": not a Parquet file (it does not start with the magic bytes PAR1)");
  } else if (head.starts_with("ARROW1")) {
    file.kind = FileKind::arrow_file;
  } else if (head.starts_with("\xff\xff\xff\xff")) {
    file.kind = FileKind::arrow_stream;
  } else {
    input_error(file.path + ": neither a Parquet file (magic bytes PAR1) nor an Arrow IPC file (a datasets "
                            "data-*.arrow shard); data files are .jsonl, .json, Parquet or datasets folders");
  }
  file.first_row = rows;
  guarded(file.path, "cannot read it", [&] {
    if (file.kind == FileKind::parquet) {
      add_parquet(file);
    } else {
      add_arrow(file);
    }
  });
  for (const auto& field : file.schema->fields()) {
    std::optional<std::string> bad = arrow::util::ValidateUTF8(field->name()) ? bad_field_name(*field->type())
                                                                              : field->name();
    if (bad) {
      input_error(file.path + ": a column or field name is not valid UTF-8 (" + ordered_json(*bad).dump(-1, ' ', true,
                  ordered_json::error_handler_t::replace) + "): the file is corrupt");
    }
  }
  rows = plus_rows(rows, file.rows, file.path, "the file");
  file_names.push_back(file.path);
  files.push_back(std::move(file));
}

std::unique_ptr<parquet::arrow::FileReader> ArrowRows::Impl::open_parquet(const std::string& path) const {
  return guarded(path, "not a readable Parquet file", [&] {
    auto input = take(arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ), path, "cannot open it");
    parquet::ReaderProperties properties(arrow::system_memory_pool());
    parquet::ArrowReaderProperties arrow_properties(/*use_threads=*/false);
    arrow_properties.set_pre_buffer(false);  // memory-mapped: nothing to gain
    parquet::arrow::FileReaderBuilder builder;
    check(builder.Open(input, properties), path, "not a readable Parquet file");
    builder.memory_pool(arrow::system_memory_pool())->properties(arrow_properties);
    return take(builder.Build(), path, "not a readable Parquet file");
  });
}

void ArrowRows::Impl::add_parquet(SourceFile& file) {
  auto opened = open_parquet(file.path);
  check(opened->GetSchema(&file.schema), file.path, "cannot read its schema");
  const auto metadata = opened->parquet_reader()->metadata();
  for (int g = 0; g < metadata->num_row_groups(); ++g) {
    file.group_starts.push_back(plus_rows(file.group_starts.back(), metadata->RowGroup(g)->num_rows(), file.path,
                                          "row group " + std::to_string(g + 1)));
  }
  file.rows = file.group_starts.back();
  if (file.rows != metadata->num_rows()) {
    input_error(file.path + ": its row groups hold " + std::to_string(file.rows) + " rows but its footer says " +
                std::to_string(metadata->num_rows()) + ": the file is corrupt");
  }
  reader = std::move(opened);  // keep the last file's reader: a one-file source never reopens it
  reader_file = files.size();
}

void ArrowRows::Impl::add_arrow(SourceFile& file) {
  file.map = take(arrow::io::MemoryMappedFile::Open(file.path, arrow::io::FileMode::READ), file.path, "cannot open it");
  auto options = arrow::ipc::IpcReadOptions::Defaults();
  options.memory_pool = arrow::system_memory_pool();
  options.use_threads = false;
  // A well-formed file's buffers are aligned and stay views into the map; a corrupt file's misaligned
  // ones are copied (reading them in place is undefined behaviour).
  options.ensure_alignment = arrow::ipc::Alignment::kDataTypeSpecificAlignment;
  const std::string what = "not a readable Arrow IPC file";
  if (file.kind == FileKind::arrow_stream) {
    std::shared_ptr<arrow::io::InputStream> stream = file.map;
    auto reader = take(arrow::ipc::RecordBatchStreamReader::Open(stream, options), file.path, what);
    file.schema = reader->schema();
    for (;;) {
      std::shared_ptr<arrow::RecordBatch> batch;
      check(reader->ReadNext(&batch), file.path, what);
      if (!batch) break;
      check(batch->Validate(), file.path, "record batch " + std::to_string(file.batches.batches.size()) + " is corrupt");
      file.batches.add(std::move(batch), file.path);
    }
  } else {
    std::shared_ptr<arrow::io::RandomAccessFile> input = file.map;
    auto reader = take(arrow::ipc::RecordBatchFileReader::Open(input, options), file.path, what);
    file.schema = reader->schema();
    for (int k = 0; k < reader->num_record_batches(); ++k) {
      auto batch = take(reader->ReadRecordBatch(k), file.path, what);
      check(batch->Validate(), file.path, "record batch " + std::to_string(k) + " is corrupt");
      file.batches.add(std::move(batch), file.path);
    }
  }
  file.rows = file.batches.starts.back();
  file.checked.assign(file.batches.batches.size(), 0);
}

// Decodes row group `group` of Parquet file `index` (under the mutex).
std::shared_ptr<const DecodedGroup> ArrowRows::Impl::decode(size_t index, int group) const {
  const SourceFile& file = files[index];
  const std::string what = "row group " + std::to_string(group + 1) + " of " +
                           std::to_string(file.group_starts.size() - 1) + " cannot be read";
  if (reader_file != index) {
    reader.reset();
    reader_file = SIZE_MAX;
    auto opened = open_parquet(file.path);
    const auto metadata = opened->parquet_reader()->metadata();
    if (metadata->num_row_groups() != static_cast<int>(file.group_starts.size()) - 1 ||
        metadata->num_rows() != file.rows) {
      input_error(file.path + ": the file changed since it was opened (its row groups differ); start again");
    }
    reader = std::move(opened);
    reader_file = index;
  }
  auto out = std::make_shared<DecodedGroup>();
  out->file = index;
  out->group = group;
  guarded(file.path, what, [&] {
    const auto table = take(reader->ReadRowGroup(group), file.path, what);
    arrow::TableBatchReader batches(*table);
    for (;;) {
      std::shared_ptr<arrow::RecordBatch> batch;
      check(batches.ReadNext(&batch), file.path, what);
      if (!batch) break;
      check(batch->ValidateFull(), file.path, what);
      out->batches.add(std::move(batch), file.path);
    }
  });
  const int64_t expected = file.group_starts[group + 1] - file.group_starts[group];
  if (out->batches.starts.back() != expected) {
    input_error(file.path + ": " + what + ": it holds " + std::to_string(out->batches.starts.back()) +
                " rows, its footer says " + std::to_string(expected));
  }
  return out;
}

// The record batch that holds row i and the row within it; `keep` holds a decoded row group alive.
const arrow::RecordBatch& ArrowRows::Impl::batch_of(int64_t i, int64_t& row_in_batch,
                                                    std::shared_ptr<const DecodedGroup>& keep) const {
  const size_t index = file_of(i);
  const SourceFile& file = files[index];
  const int64_t row = i - file.first_row;
  std::lock_guard<std::mutex> lock(mutex);
  if (file.kind == FileKind::parquet) {
    const int group = static_cast<int>(
        std::upper_bound(file.group_starts.begin(), file.group_starts.end(), row) - file.group_starts.begin() - 1);
    if (!decoded || decoded->file != index || decoded->group != group) {
      decoded = nullptr;  // free the old group before decoding the next
      decoded = decode(index, group);
    }
    keep = decoded;
    const int64_t in_group = row - file.group_starts[group];
    const size_t b = keep->batches.find(in_group);
    row_in_batch = in_group - keep->batches.starts[b];
    return *keep->batches.batches[b];
  }
  const size_t b = file.batches.find(row);
  if (!file.checked[b]) {
    check(file.batches.batches[b]->ValidateFull(), file.path,
          "record batch " + std::to_string(b + 1) + " of " + std::to_string(file.batches.batches.size()) +
              " is corrupt");
    const_cast<SourceFile&>(file).checked[b] = 1;
  }
  row_in_batch = row - file.batches.starts[b];
  return *file.batches.batches[b];
}

ArrowRows::ArrowRows(const fs::path& path) : impl_(std::make_unique<Impl>()) { impl_->open_path(path); }
ArrowRows::~ArrowRows() = default;
ArrowRows::ArrowRows(ArrowRows&&) noexcept = default;
ArrowRows& ArrowRows::operator=(ArrowRows&&) noexcept = default;

bool ArrowRows::is_parquet_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && file_head(path, 4) == "PAR1";
}

bool ArrowRows::is_datasets_folder(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || !fs::is_regular_file(path / "state.json", ec)) {
    return false;
  }
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".arrow") return true;
  }
  return false;
}

int64_t ArrowRows::size() const { return impl_->rows; }
const std::vector<std::string>& ArrowRows::columns() const { return impl_->columns; }
const std::vector<std::string>& ArrowRows::files() const { return impl_->file_names; }

std::string ArrowRows::where(int64_t i) const {
  FERRY_CHECK(i >= 0 && i < impl_->rows, "row ", i, " of ", impl_->rows);
  const auto& file = impl_->files[impl_->file_of(i)];
  return file.path + " row " + std::to_string(i - file.first_row + 1);
}

ordered_json ArrowRows::row(int64_t i) const {
  FERRY_CHECK(i >= 0 && i < impl_->rows, "row ", i, " of ", impl_->rows);
  std::shared_ptr<const DecodedGroup> keep;
  int64_t r = 0;
  const arrow::RecordBatch& batch = impl_->batch_of(i, r, keep);
  const auto& fields = batch.schema()->fields();
  const auto& values = batch.columns();
  ordered_json out = ordered_json::object();
  for (int c = 0; c < batch.num_columns(); ++c) {
    try {
      out.emplace(fields[c]->name(), value_at(*values[c], r));
    } catch (const UnsupportedValue& unsupported) {
      input_error(where(i) + ": column '" + fields[c]->name() + "' holds a value of type " + unsupported.type +
                  ", which Ferry does not read (binary, dates, times, decimals, ...): drop the column or cast it "
                  "to a string (datasets: remove_columns / cast_column)");
    }
  }
  return out;
}

}  // namespace ferry
