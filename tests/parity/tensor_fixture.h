// A parity fixture of tensors: the inputs.safetensors and expected.safetensors a Python reference
// (tests/parity/<stem>_ref.py) wrote into FERRY_FIXTURES_DIR/<stem>/, and the largest difference
// between a result and its reference. Header-only; shared by the parity tests.
#pragma once

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "src/io/safetensors.h"

namespace ferry_test {

struct TensorFixture {
  ferry::io::TensorMap in, expected;
  // A missing fixture is a test failure that says how to make it.
  explicit TensorFixture(const std::string& stem) {
    const std::filesystem::path folder = std::filesystem::path(FERRY_FIXTURES_DIR) / stem;
    if (!std::filesystem::exists(folder / "expected.safetensors")) {
      ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
      return;
    }
    in = ferry::io::load_safetensors(folder / "inputs.safetensors");
    expected = ferry::io::load_safetensors(folder / "expected.safetensors");
  }
  const torch::Tensor& operator[](const std::string& name) const { return in.at(name); }
  torch::Tensor want(const std::string& name) const { return expected.at(name); }
};

inline double max_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble).reshape(a.sizes())).abs().max().item<double>();
}

}  // namespace ferry_test
