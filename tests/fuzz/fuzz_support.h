// Shared by the fuzz targets (tests/fuzz/*_fuzz.cpp): what counts as a finding, and temp files for
// parsers that read paths. A target feeds hostile bytes to one parser; a UserError (a clear
// message for the user) is the right answer to bad input, anything else — another exception, a
// crash, a sanitizer report, a hang — is a bug, so it aborts and libFuzzer keeps the input.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "tests/support/scratch_dir.h"

namespace ferry_fuzz {

// Runs `parse`; returns normally for success or a UserError, aborts on anything else.
template <class Fn>
void expect_clean(Fn&& parse) {
  try {
    parse();
  } catch (const ferry::UserError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz finding: %s escaped instead of a UserError: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz finding: a non-std exception escaped\n");
    std::abort();
  }
}

// A folder of this process's own under the system temp folder (created once, removed at exit).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = ferry::test_support::process_scratch_dir("ferry_fuzz");
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes `bytes` to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::filesystem::path path = scratch_dir() / name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ferry_fuzz
