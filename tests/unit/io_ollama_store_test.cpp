// Resolving `ollama:NAME[:TAG]` through a fake Ollama store folder laid out as Ollama lays it out
// (manifests/<host>/<namespace>/<model>/<tag>, blobs/sha256-<hex>), and the errors for a missing
// store, model or blob and for malformed manifests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "src/io/ollama_store.h"
#include "tests/support/scratch_dir.h"

namespace ferry::io {
namespace {
namespace fs = std::filesystem;

const std::string kHex(64, 'a');
const std::string kOtherHex(64, 'b');

fs::path make_store(const std::string& case_name) {
  const fs::path store = test_support::process_scratch_dir("io_ollama_store_test") / case_name;
  fs::create_directories(store / "blobs");
  return store;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string manifest(const std::string& hex, int64_t size) {
  return R"({"schemaVersion": 2, "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
           "digest": "sha256:)" + kOtherHex + R"("}, "layers": [
           {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:)" + kOtherHex + R"(", "size": 3},
           {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)" + hex +
         R"(", "size": )" + std::to_string(size) + "}]}";
}

std::string error_of(const std::string& name, const fs::path& store) {
  try {
    ollama_model_file(name, store);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(OllamaStore, ResolvesNamesWithOllamasDefaults) {
  const fs::path store = make_store("defaults");
  write(store / "blobs" / ("sha256-" + kHex), "GGUF....");
  const fs::path library = store / "manifests/registry.ollama.ai/library";
  write(library / "smollm2/latest", manifest(kHex, 8));
  write(library / "smollm2/135m", manifest(kHex, 8));
  write(store / "manifests/registry.ollama.ai/someone/tiny/q4", manifest(kHex, 8));
  write(store / "manifests/hf.co/user/repo/Q4_K_M", manifest(kHex, 8));
  const fs::path blob = store / "blobs" / ("sha256-" + kHex);
  EXPECT_EQ(ollama_model_file("smollm2", store), blob);
  EXPECT_EQ(ollama_model_file("smollm2:135m", store), blob);
  EXPECT_EQ(ollama_model_file("library/smollm2:latest", store), blob);
  EXPECT_EQ(ollama_model_file("someone/tiny:q4", store), blob);
  EXPECT_EQ(ollama_model_file("hf.co/user/repo:Q4_K_M", store), blob);
}

TEST(OllamaStore, OlderStoresNameBlobsWithAColon) {
  const fs::path store = make_store("colon");
  write(store / "blobs" / ("sha256:" + kHex), "GGUF");
  write(store / "manifests/registry.ollama.ai/library/m/latest", manifest(kHex, 4));
  EXPECT_EQ(ollama_model_file("m", store), store / "blobs" / ("sha256:" + kHex));
}

TEST(OllamaStore, AMissingModelListsWhatTheStoreHas) {
  const fs::path store = make_store("missing");
  write(store / "manifests/registry.ollama.ai/library/qwen2.5/0.5b", manifest(kHex, 4));
  write(store / "manifests/registry.ollama.ai/someone/tiny/latest", manifest(kHex, 4));
  const std::string message = error_of("llama3", store);
  EXPECT_NE(message.find("no model 'llama3'"), std::string::npos) << message;
  EXPECT_NE(message.find("qwen2.5:0.5b, someone/tiny:latest"), std::string::npos) << message;
  EXPECT_NE(message.find("ollama pull llama3"), std::string::npos) << message;
  EXPECT_NE(error_of("m", store / "nowhere").find("OLLAMA_MODELS"), std::string::npos);
}

TEST(OllamaStore, BadManifestsAndBlobsAreNamed) {
  const fs::path store = make_store("bad");
  const fs::path m = store / "manifests/registry.ollama.ai/library/m/latest";
  write(m, "{not json");
  EXPECT_NE(error_of("m", store).find("is not valid JSON"), std::string::npos);
  write(m, R"({"layers": 3})");
  EXPECT_NE(error_of("m", store).find("'layers'"), std::string::npos);
  write(m, R"({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "md5:xyz"}]})");
  EXPECT_NE(error_of("m", store).find("sha256:<64 hex digits>"), std::string::npos);
  write(m, R"({"layers": [{"mediaType": "application/vnd.ollama.image.license", "digest": "sha256:)" + kHex + "\"}]}");
  EXPECT_NE(error_of("m", store).find("no layer of type application/vnd.ollama.image.model"), std::string::npos);
  write(m, manifest(kHex, 8));
  EXPECT_NE(error_of("m", store).find("which is not in"), std::string::npos);  // no blob
  write(store / "blobs" / ("sha256-" + kHex), "GGUF");
  EXPECT_NE(error_of("m", store).find("incomplete"), std::string::npos);  // 4 bytes, manifest says 8
  EXPECT_NE(error_of("../m", store).find("not an Ollama model name"), std::string::npos);
  EXPECT_NE(error_of("m:", store).find("tag"), std::string::npos);
}

}  // namespace
}  // namespace ferry::io
