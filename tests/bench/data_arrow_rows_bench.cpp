// Rows per second ArrowRows (src/data/arrow_rows.h) reads from a Parquet file or a datasets folder:
// every row in order (what a loader does), then a sample of rows in random order (a row group
// decoded per jump). scripts/bench-arrow-rows.sh runs it beside pyarrow's to_pylist() on the same file.
//
//   data_arrow_rows_bench PATH [RANDOM_ROWS]
//
// Prints "RESULT <what> <value>" lines.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/data/arrow_rows.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: data_arrow_rows_bench PATH [RANDOM_ROWS]\n");
    return 2;
  }
  const int64_t random_rows = argc > 2 ? std::atoll(argv[2]) : 1000;
  using Clock = std::chrono::steady_clock;
  try {
    auto start = Clock::now();
    const ferry::ArrowRows rows(argv[1]);
    const double open_s = std::chrono::duration<double>(Clock::now() - start).count();
    start = Clock::now();
    size_t bytes = 0;  // used, so the rows are not optimised away
    for (int64_t i = 0; i < rows.size(); ++i) {
      bytes += rows.row(i).size();
    }
    const double in_order_s = std::chrono::duration<double>(Clock::now() - start).count();
    std::mt19937_64 rng(1);
    const int64_t sample = std::min(random_rows, rows.size());
    start = Clock::now();
    for (int64_t k = 0; k < sample; ++k) {
      bytes += rows.row(static_cast<int64_t>(rng() % static_cast<uint64_t>(rows.size()))).size();
    }
    const double random_s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("RESULT arrow_rows_rows %lld (%zu files, %zu columns; open %.3f s; %zu fields)\n",
                static_cast<long long>(rows.size()), rows.files().size(), rows.columns().size(), open_s, bytes);
    std::printf("RESULT arrow_rows_in_order_rows_per_s %.0f (%.3f s)\n", static_cast<double>(rows.size()) / in_order_s,
                in_order_s);
    std::printf("RESULT arrow_rows_random_rows_per_s %.0f (%lld rows, %.3f s)\n",
                static_cast<double>(sample) / random_s, static_cast<long long>(sample), random_s);
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
