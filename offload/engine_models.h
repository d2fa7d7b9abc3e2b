// The named-model bookkeeping both engines share: look a model up by name (an unknown name is a
// bug in the calling stage) and pick the trainable models a call is about (`{}`: all of them).
// `Model` is an engine's own per-model record; it needs a `bool trainable`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace ferry::offload {

template <class Model>
Model& find_model(std::map<std::string, Model>& models, const std::string& name) {
  auto it = models.find(name);
  FERRY_CHECK(it != models.end(), "no model '", name, "' in the engine");
  return it->second;
}

template <class Model>
const Model& find_model(const std::map<std::string, Model>& models, const std::string& name) {
  auto it = models.find(name);
  FERRY_CHECK(it != models.end(), "no model '", name, "' in the engine");
  return it->second;
}

template <class Model>
std::vector<Model*> trainable_models(std::map<std::string, Model>& models, const std::vector<std::string>& names) {
  std::vector<Model*> out;
  if (names.empty()) {
    for (auto& [name, m] : models) {
      if (m.trainable) out.push_back(&m);
    }
    return out;
  }
  for (const auto& name : names) {
    Model& m = find_model(models, name);
    if (m.trainable) out.push_back(&m);
  }
  return out;
}

}  // namespace ferry::offload
