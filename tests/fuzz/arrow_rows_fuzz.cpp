// Fuzz target: ArrowRows (src/data/arrow_rows.h) on hostile bytes as a data file, told apart by its
// magic bytes: Parquet (footer, row groups, pages) or an Arrow IPC stream / file (a datasets shard).
// Opens it, then reads up to 256 rows (first, last, and in order) with where() and columns().
#include <algorithm>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "src/data/arrow_rows.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ferry_fuzz::write_scratch("data.parquet", ferry_fuzz::as_text(data, size));
  ferry_fuzz::expect_clean([&] {
    const ferry::ArrowRows rows(path);
    (void)rows.columns();
    if (rows.size() == 0) return;
    (void)rows.where(rows.size() - 1);
    try {
      (void)rows.row(rows.size() - 1).dump();
    } catch (const ferry::UserError&) {
    }
    for (int64_t i = 0; i < std::min<int64_t>(rows.size(), 256); ++i) {
      (void)rows.row(i).dump();  // dump: the strings must be valid UTF-8
    }
  });
  return 0;
}
