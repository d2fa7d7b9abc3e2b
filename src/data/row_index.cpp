// Indexing a data file's kept rows and reading them again (see row_index.h).
#include "src/data/row_index.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ferry {

RowIndex::RowIndex(DataFile file, bool skip_bad_rows,
                   const std::function<bool(int64_t, const nlohmann::ordered_json&)>& keep, int64_t max_kept)
    : file_(std::move(file)) {
  stats_ = file_.for_each(skip_bad_rows, [&](int64_t number, uint64_t position, const nlohmann::ordered_json& row) {
    if (max_kept > 0 && static_cast<int64_t>(positions_.size()) >= max_kept) return;
    if (!keep(number, row)) return;
    positions_.push_back(position);
    numbers_.push_back(number);
  });
  positions_.shrink_to_fit();
  numbers_.shrink_to_fit();
}

nlohmann::ordered_json RowIndex::read(size_t i) const {
  FERRY_CHECK(i < positions_.size(), "data row index out of range");
  return file_.read(positions_[i], numbers_[i]);
}

}  // namespace ferry
