// A data file as users name it (data.train_file, data.eval_file, data.prompt_file), opened for its
// rows, each a JSON object:
//   FILE.jsonl (any name)      one object per line
//   FILE.json                  a JSON array of objects (a .json file of one object per line is jsonl)
//   FILE.parquet               Parquet (arrow_rows.h), as `datasets`' to_parquet writes it
//   a folder                   a `datasets` folder (save_to_disk's Arrow files), or *.parquet files
//   hf:ORG/NAME[/SUBSET][:SPLIT]  the dataset's Parquet files in the local Hugging Face hub cache
//                              (hf_hub_cache.h; split `train` when not given), found without network
// Rows are streamed, or read again one at a time by their position: a file is never held whole.
// A missing path, an empty file, a binary file or a folder that holds no data is an InputError
// naming it, before any row is read; a bad row names the file and its line or row (where()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "src/data/jsonl_reader.h"  // JsonlStats

namespace ferry {

class DataFile {
 public:
  enum class Kind { jsonl, json_array, arrow };

  DataFile() = default;
  // Resolves and checks `spec` (see above). InputError naming it when there is nothing to read.
  static DataFile open(const std::string& spec);

  const std::string& name() const { return name_; }  // as the user wrote it
  Kind kind() const { return kind_; }

  // Calls on_row(number, position, row) for every row in order: `number` is the 1-based line
  // (jsonl) or item/row number, `position` what read() takes. An InputError from on_row (or a row
  // that does not parse) stops the run with where(number), or with skip_bad_rows is counted and
  // skipped, as read_jsonl does.
  JsonlStats for_each(bool skip_bad_rows,
                      const std::function<void(int64_t number, uint64_t position, const nlohmann::ordered_json& row)>&
                          on_row) const;

  // The row for_each gave at `position` again. InputError naming it when the file changed since.
  nlohmann::ordered_json read(uint64_t position, int64_t number) const;

  // "data/x.jsonl:12", "data/x.json item 12", "train.parquet row 12".
  std::string where(int64_t number) const;

 private:
  struct Source;
  std::string name_;
  Kind kind_ = Kind::jsonl;
  std::shared_ptr<const Source> source_;
};

}  // namespace ferry
