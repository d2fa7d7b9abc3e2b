// What a family's GGUF reader (model_family.h) sees of a GGUF file: its metadata. src/io/gguf_model.cpp implements it over a GgufFile; this floor stays below src/io.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry {

class GgufMetadata {
 public:
  virtual ~GgufMetadata() = default;
  virtual const std::string& architecture() const = 0;  // general.architecture
  // Keys are given without the "<architecture>." prefix ("attention.sliding_window").
  virtual int64_t get_int(const std::string& key, int64_t fallback) const = 0;
  virtual double get_float(const std::string& key, double fallback) const = 0;
  // An array of integers or bools (bools as 0 / 1); empty when the key is absent. InputError when
  // it holds something else.
  virtual std::vector<int64_t> get_int_array(const std::string& key) const = 0;
  // The values of a one-dimensional F32 tensor (LongRoPE's rope_factors_long.weight), or none when
  // the file has no such tensor; InputError for another type or shape.
  virtual std::vector<double> float_tensor(const std::string& name) const = 0;
  // Throws InputError naming the file.
  [[noreturn]] virtual void fail(const std::string& what) const = 0;
};

}  // namespace ferry
