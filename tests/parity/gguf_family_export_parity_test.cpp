// GGUF export round trips for every model family: each tiny random fixture of
// model_families_ref.py (transformers' save_pretrained, with transformers' fp32 logits) is exported
// by io::export_gguf_model at type f32 (exact up to fp32 rounding), then
//   - read back by Ferry (the folder prepared for a .gguf file, as `--model FILE.gguf` reads it):
//     its logits on the fixture's left-padded input equal transformers' within 1e-4 of the logit
//     scale, which tests Ferry's GGUF import of each family;
//   - checked by gguf_family_export_check.py: gguf-py's GGUFReader reads the file, its architecture
//     is llama.cpp's converter's, every tensor has a name llama.cpp's architecture defines
//     (gguf.constants), the shape the metadata implies and the converter's values, and where
//     transformers' GGUF loader knows the architecture, from_pretrained(gguf_file=...) gives the
//     same logits (where its config reader drops a setting: the weights it reads, under the
//     source's setting).
// The fixture folders have no tokenizer; the exported copy gets a byte-level BPE tokenizer.json
// over the fixtures' 128 ids (pad, bos, eos special, then one token per byte 3..127, no merges).
// Where a fixture has a setting llama.cpp fixes otherwise (and export refuses it), the copy's
// config.json is brought to llama.cpp's (kLlamaCppShape) and the reference logits are
// transformers' of that copy (gguf_family_export_check.py --reference), not the fixture's.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "src/io/gguf_export.h"
#include "src/io/model_path.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {
namespace fs = std::filesystem;

fs::path fixture(const std::string& name) { return fs::path(FERRY_FIXTURES_DIR) / "model_families" / name; }

// The config.json changes that make a fixture what llama.cpp runs: Gemma 2/3 scale scores by
// head_dim^-1/2 (not query_pre_attn_scalar); Gemma 3 has every 6th layer global, OLMo 3 every 4th
// (3 layers: all sliding); SmolLM3 leaves every 4th layer without RoPE (3 layers: all rotate).
const std::map<std::string, nlohmann::json> kLlamaCppShape = {
    {"gemma2", {{"query_pre_attn_scalar", 32}}},
    {"gemma3",
     {{"query_pre_attn_scalar", 32},
      {"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention"}}}},
    {"olmo3", {{"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention"}}}},
    {"smollm3", {{"no_rope_layers", {1, 1, 1}}}},
};

fs::path scratch() {
  static const fs::path dir = test_support::process_scratch_dir(
      "gguf_family_export", [] { return ::testing::UnitTest::GetInstance()->Failed(); });
  return dir;
}

// GPT-2's byte-to-character map (bytes_to_unicode): printable bytes stand for themselves, the
// others for U+0100 onwards in byte order; as UTF-8.
std::string byte_level_char(int byte) {
  const bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255);
  int code = byte;
  if (!printable) {
    code = 256;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) ++code;
    }
  }
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
  return out;
}

// A byte-level BPE tokenizer.json (GPT-2 pre-tokenizer: llama.cpp's "gpt-2") over ids
// [0, vocab_size): 0, 1, 2 the special <pad>, <s>, </s> (config.json's pad/bos/eos ids), then the
// byte-level character of byte id, the last id being "ab", the one merge (llama.cpp refuses a BPE
// vocabulary without merges).
void write_tokenizer(const fs::path& dir, int64_t vocab_size) {
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  const std::array<const char*, 3> specials{"<pad>", "<s>", "</s>"};
  for (int64_t id = 0; id < vocab_size; ++id) {
    const std::string text = id < 3                ? specials[id]
                             : id == vocab_size - 1 ? std::string("ab")
                                                    : byte_level_char(static_cast<int>(id));
    vocab[text] = id;
    if (id < 3) {
      added.push_back({{"id", id}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", true}});
    }
  }
  const nlohmann::json tokenizer = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                 {"vocab", vocab}, {"merges", nlohmann::json::array({"a b"})}}},
  };
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump(1);
}

// The fixture's model exported to <scratch>/<name>/<name>.gguf (f32), once per process.
fs::path exported(const std::string& name) {
  static std::map<std::string, fs::path> files;
  if (const auto found = files.find(name); found != files.end()) return found->second;
  const fs::path source = fixture(name) / "model";
  const fs::path dir = scratch() / name;
  const fs::path checkpoint = dir / "model";
  fs::create_directories(checkpoint);
  for (const auto& entry : fs::directory_iterator(source)) {
    fs::copy_file(entry.path(), checkpoint / entry.path().filename(), fs::copy_options::overwrite_existing);
  }
  std::ifstream config_in(source / "config.json");
  nlohmann::json config = nlohmann::json::parse(config_in);
  if (const auto shape = kLlamaCppShape.find(name); shape != kLlamaCppShape.end()) {
    config.merge_patch(shape->second);
    std::ofstream(checkpoint / "config.json") << config.dump(2);
  }
  write_tokenizer(checkpoint, config.at("vocab_size").get<int64_t>());
  io::GgufExportOptions options;
  options.checkpoint = checkpoint;
  options.output = dir / (name + ".gguf");
  options.type = io::GgufFileType::f32;
  // Not the family's name: transformers reads a llama file named "mistral" as Mistral, and
  // llama.cpp's vocabulary loader looks up Phi-3's <|end|> token in a file whose name says phi3.
  options.name = "ferry family fixture";
  const io::GgufExportSummary summary = io::export_gguf_model(options);
  for (const std::string& warning : summary.warnings) std::cout << name << ": export warning: " << warning << "\n";
  return files[name] = summary.file;
}

struct CommandResult {
  int status = -1;
  std::string output;
};

// gguf_family_export_check.py with `arguments` (already quoted), its output and exit status.
CommandResult run_check(const std::string& arguments) {
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/gguf_family_export_check.py' " + arguments + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  result.status = pclose(pipe);
  return result;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// The logits Ferry's reading of the export must give: the fixture's (transformers'), or for a copy
// brought to llama.cpp's shape, transformers' logits of that copy.
torch::Tensor reference_logits(const std::string& name, const io::TensorMap& fixture_tensors) {
  if (kLlamaCppShape.count(name) == 0) return fixture_tensors.at("logits");
  const fs::path out = scratch() / name / "reference.safetensors";
  const CommandResult run =
      run_check("--reference " + quoted(scratch() / name / "model") + " " + quoted(fixture(name)) + " " + quoted(out));
  if (run.status != 0) {
    ADD_FAILURE() << run.output;
    return {};
  }
  return io::load_safetensors(out).at("logits");
}

// Largest |a - b| over the positions where mask (B, T) is 1; a, b: (B, T, V).
double max_error_on_tokens(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask) {
  const torch::Tensor keep = mask.to(torch::kBool).unsqueeze(-1);
  return ((a.to(torch::kFloat) - b.to(torch::kFloat)).abs() * keep).max().item<double>();
}

class GgufFamilyCase : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    ASSERT_TRUE(fs::exists(fixture(GetParam()) / "logits.safetensors"))
        << "missing " << fixture(GetParam()) << ": run `ctest -R parity_fixture_model_families` first";
  }
};

class GgufExportReadByFerry : public GgufFamilyCase {};
class GgufExportReadByGgufPyAndTransformers : public GgufFamilyCase {};

TEST_P(GgufExportReadByFerry, LogitsEqualTransformers) {
  const fs::path file = exported(GetParam());
  const io::TensorMap inputs = io::load_safetensors(fixture(GetParam()) / "logits.safetensors");
  const torch::Tensor reference = reference_logits(GetParam(), inputs);
  ASSERT_TRUE(reference.defined());
  CausalLM model = causal_lm_from_pretrained(io::prepare_gguf_model_folder(file, scratch() / "cache"));
  torch::NoGradGuard no_grad;
  const torch::Tensor& mask = inputs.at("attention_mask");
  const torch::Tensor logits = model(inputs.at("input_ids"), mask);
  ASSERT_EQ(logits.sizes(), reference.sizes());
  const double scale = reference.abs().max().item<double>();
  const double error = max_error_on_tokens(logits, reference, mask);
  EXPECT_LE(error, 1e-4 * std::max(1.0, scale)) << "max |ferry(gguf) - transformers| over non-pad positions, logit scale "
                                                << scale;
  std::cout << GetParam() << ": Ferry's import of its f32 GGUF export, max error " << error << " (logit scale " << scale
            << (kLlamaCppShape.count(GetParam()) ? "; reference: transformers on the llama.cpp-shaped copy" : "")
            << ")\n";
}

TEST_P(GgufExportReadByGgufPyAndTransformers, NamesShapesValuesAndLogitsAreLlamaCppsAndTransformers) {
  const fs::path file = exported(GetParam());
  std::string arguments = quoted(file) + " " + quoted(fixture(GetParam()));
  if (kLlamaCppShape.count(GetParam()) != 0) arguments += " --source " + quoted(file.parent_path() / "model");
  const CommandResult run = run_check(arguments);
  EXPECT_EQ(run.status, 0) << run.output;
  std::cout << run.output;
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Families, GgufExportReadByFerry,
                         ::testing::Values("gemma2", "gemma3", "smollm3", "olmo2", "olmo3", "qwen3", "mistral", "phi3",
                                           "phi3_longrope"),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Families, GgufExportReadByGgufPyAndTransformers,
                         ::testing::Values("gemma2", "gemma3", "smollm3", "olmo2", "olmo3", "qwen3", "mistral", "phi3",
                                           "phi3_longrope", "phi3_long_context"),
                         case_name);

}  // namespace
}  // namespace ferry
