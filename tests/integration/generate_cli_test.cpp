// `ferry generate` as a user runs it, on a tiny random model saved with data/tokenizer.model:
// the CLI's greedy text equals the library's generate() decoded, sampling repeats with a seed,
// batches from jsonl come back one line per prompt, and bad input exits 2 naming file:line.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include "tests/integration/ferry_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "src/generate/generate.h"
#include "src/generate/sampling.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry {
namespace {

using Result = ferry_test::CommandResult;
inline Result run(const std::string& command_line, bool with_stderr = true) {
  return ferry_test::run_command(command_line, with_stderr);
}

class GenerateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("ferry_generate_cli_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / "model");
    const std::string tokenizer_file = std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model";
    const Tokenizer tokenizer(tokenizer_file);
    ModelShape config = test_support::tiny_llama_config(
        {.vocab_size = tokenizer.vocab_size(), .max_position_embeddings = 512, .rms_norm_eps = 1e-6});
    config.bos_token_id = tokenizer.bos_id();
    config.eos_token_ids = {tokenizer.eos_id()};
    config.pad_token_id = tokenizer.pad_id();
    CausalLM model(config);
    init_model_weights(*model, config, 0.5, 3);  // large weights: varied, prompt-dependent text
    save_pretrained(*model, config, dir_ / "model");
    std::filesystem::copy_file(tokenizer_file, dir_ / "model" / "tokenizer.model",
                               std::filesystem::copy_options::overwrite_existing);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::string ferry(const std::string& args) {
    return std::string("'") + FERRY_BINARY + "' generate --model '" + (dir_ / "model").string() + "' " + args;
  }
  static std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  static std::filesystem::path dir_;
};
std::filesystem::path GenerateCli::dir_;

TEST_F(GenerateCli, GreedyChatTextEqualsTheLibrary) {
  const Result r = run(ferry("--prompt 'What is 2 + 3?' --chat --greedy --max-new-tokens 12"), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  CausalLM model = causal_lm_from_pretrained(dir_ / "model");
  const Tokenizer tokenizer((dir_ / "model").string());
  const ChatTemplate chat = load_chat_template("demo");
  const std::vector<int64_t> prompt = chat.render_prompt({{ChatRole::user, "What is 2 + 3?"}}, tokenizer);
  GenerateOptions options{.max_new_tokens = 12, .eos_token_ids = {tokenizer.eos_id()},
                          .stop_token_ids = chat.stop_token_ids(tokenizer)};
  const GenerateResult result = generate(*model, torch::tensor(prompt).unsqueeze(0), torch::Tensor(), options);
  std::vector<int64_t> ids;
  for (int64_t t = result.prompt_length; t < result.tokens.size(1); ++t) {
    const int64_t id = result.tokens[0][t].item<int64_t>();
    if (id == tokenizer.eos_id() || std::count(options.stop_token_ids.begin(), options.stop_token_ids.end(), id)) break;
    ids.push_back(id);
  }
  EXPECT_EQ(r.output, tokenizer.decode(ids) + "\n");
}

TEST_F(GenerateCli, SeededSamplingRepeats) {
  const std::string args = "--prompt 'Sort: 3 1 2' --temperature 1.3 --top-k 50 --top-p 0.95 --max-new-tokens 16";
  const Result a = run(ferry(args + " --seed 4"), false);
  const Result b = run(ferry(args + " --seed 4"), false);
  const Result c = run(ferry(args + " --seed 5"), false);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);
}

TEST_F(GenerateCli, BatchFromJsonlWritesOneLinePerPrompt) {
  const std::string prompts = write("prompts.jsonl",
                                    "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 4 * 8?\"}], \"gt_answer\": \"32\"}\n"
                                    "{\"prompt\": \"Reverse: abc\"}\n"
                                    "\n"
                                    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}\n");
  const std::string out = (dir_ / "out.jsonl").string();
  const Result r = run(ferry("--prompts '" + prompts + "' --output '" + out + "' --greedy --max-new-tokens 6 --batch-size 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "wrote 3 completions");
  std::ifstream in(out);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_CONTAINS(line, "\"completion\":");
  }
  EXPECT_EQ(lines, 3);
}

// --batch-size only sets how many prompts decode at once (the others join as rows end): each
// prompt samples from its own generator (seeded by --seed and its line), so the sampled
// completions are the same at every batch size, and each equals the library's generate() of that
// prompt alone with that line's generator.
TEST_F(GenerateCli, SampledCompletionsDoNotDependOnTheBatchSize) {
  const std::vector<std::string> texts = {"Sort: 3 1 2", "What is 4 * 8?", "Reverse: abc", "Hi", "Count to five",
                                          "Name a colour", "2 + 2 ="};
  std::string lines;
  for (const std::string& text : texts) lines += "{\"prompt\": \"" + text + "\"}\n";
  const std::string prompts = write("sampled_prompts.jsonl", lines);
  auto completions = [&](int batch_size) {
    const std::string out = (dir_ / ("sampled_" + std::to_string(batch_size) + ".jsonl")).string();
    const Result r = run(ferry("--prompts '" + prompts + "' --output '" + out + "' --temperature 1.3 --seed 9 " +
                               "--max-new-tokens 12 --batch-size " + std::to_string(batch_size)));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<nlohmann::json> rows;
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
    return rows;
  };
  const std::vector<nlohmann::json> all = completions(7);
  ASSERT_EQ(all.size(), texts.size());
  EXPECT_EQ(completions(1), all);
  EXPECT_EQ(completions(3), all);

  CausalLM model = causal_lm_from_pretrained(dir_ / "model");
  const Tokenizer tokenizer((dir_ / "model").string());
  std::set<std::string> distinct;
  for (size_t i = 0; i < texts.size(); ++i) {
    at::Generator generator = row_sampling_generator(9, static_cast<int64_t>(i));
    GenerateOptions options{.max_new_tokens = 12, .sampling = {.greedy = false, .temperature = 1.3},
                            .eos_token_ids = {tokenizer.eos_id()}, .generator = &generator};
    std::vector<int64_t> prompt = {tokenizer.bos_id()};  // as the CLI encodes a {"prompt"} line without --chat
    const std::vector<int64_t> body = tokenizer.encode(texts[i]);
    prompt.insert(prompt.end(), body.begin(), body.end());
    const GenerateResult alone = generate(*model, torch::tensor(prompt).unsqueeze(0), torch::Tensor(), options);
    std::vector<int64_t> ids;
    for (int64_t t = alone.prompt_length; t < alone.tokens.size(1); ++t) {
      const int64_t id = alone.tokens[0][t].item<int64_t>();
      if (id == tokenizer.eos_id()) break;
      ids.push_back(id);
    }
    EXPECT_EQ(all[i]["completion"], tokenizer.decode(ids)) << "line " << i + 1;
    distinct.insert(all[i]["completion"].get<std::string>());
  }
  EXPECT_GE(distinct.size(), 5u) << "the prompts' completions should differ";
}

// A stop string taken from the middle of a free greedy run (several characters, so usually more
// than one token, wherever the tokens split): given as --set generation.stop_strings or as --stop,
// the output ends right before it; --max-new-tokens still wins over the config's value.
TEST_F(GenerateCli, StopStringsCutTheOutput) {
  const std::string args = "--prompt 'Sort: 3 1 2' --greedy --max-new-tokens 24";
  const Result free_run = run(ferry(args), false);
  ASSERT_EQ(free_run.exit_code, 0) << free_run.output;
  const std::string text = free_run.output.substr(0, free_run.output.size() - 1);  // without the newline
  std::string stop;
  size_t at = 0;
  for (size_t i = 2; i + 6 <= text.size() && stop.empty(); ++i) {
    const std::string candidate = text.substr(i, 6);
    if (candidate.find_first_of("'\"\\\n") != std::string::npos || text.find(candidate) != i) continue;
    stop = candidate;
    at = i;
  }
  ASSERT_FALSE(stop.empty()) << "no usable 6-character window in: " << text;

  Result r = run(ferry(args + " --set 'generation.stop_strings=[\"" + stop + "\"]'"), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, text.substr(0, at) + "\n") << "stop string '" << stop << "' in '" << text << "'";
  r = run(ferry(args + " --stop 'never written' --stop '" + stop + "'"), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, text.substr(0, at) + "\n");

  // jsonl output says the row stopped; the config's max_new_tokens applies when the flag is absent.
  const std::string prompts = write("stop.jsonl", "{\"prompt\": \"Sort: 3 1 2\"}\n");
  const std::string out = (dir_ / "stop_out.jsonl").string();
  r = run(ferry("--prompts '" + prompts + "' --output '" + out + "' --greedy --stop '" + stop + "'"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_CONTAINS(line, "\"stopped\":true");
  r = run(ferry("--prompt 'Sort: 3 1 2' --greedy --set generation.max_new_tokens=2"), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(r.output.size(), text.size()) << r.output;
  r = run(ferry(args + " --set 'generation.stop_strings=[\"\"]'"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "stop string");
}

TEST_F(GenerateCli, BadInputExitsTwoNamingTheLine) {
  const std::string prompts = write("bad.jsonl", "{\"prompt\": \"ok\"}\n{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}]}\n");
  Result r = run(ferry("--prompts '" + prompts + "' --greedy"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "bad.jsonl:2");
  r = run(ferry("--prompts '" + write("bad2.jsonl", "{\"text\": \"no prompt key\"}\n") + "'"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "bad2.jsonl:1");
  r = run(std::string("'") + FERRY_BINARY + "' generate --model /nonexistent/model --prompt hi");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "/nonexistent/model");
  r = run(ferry("--prompt hi --temperature 0"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "temperature");
}

// A config.json that disagrees with its weights (a huge intermediate_size): exit 2 naming the key,
// the config's value and the shape in the weight file, before anything is allocated.
TEST_F(GenerateCli, AConfigThatDisagreesWithItsWeightsIsRefusedBeforeAllocating) {
  const std::filesystem::path bad = dir_ / "model-bad-config";
  std::filesystem::create_directories(bad);
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "model")) {
    std::filesystem::copy_file(entry.path(), bad / entry.path().filename(),
                               std::filesystem::copy_options::overwrite_existing);
  }
  nlohmann::json config = nlohmann::json::parse(ferry_test::read_text((bad / "config.json").string()));
  ASSERT_EQ(config["intermediate_size"], 128);
  config["intermediate_size"] = 1000000000000;
  std::ofstream(bad / "config.json") << config.dump(2);
  const Result r = run(std::string("'") + FERRY_BINARY + "' generate --model '" + bad.string() + "' --prompt hello");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, (bad / "config.json").string() + ": intermediate_size is 1000000000000");
  EXPECT_CONTAINS(r.output, "the weights say 128 (model.layers.0.mlp.gate_proj.weight is [128, 64])");
  EXPECT_EQ(r.output.find("allocat"), std::string::npos) << r.output;
}

// A model folder whose weights cannot fit in host memory: config.json and a sparse model.safetensors
// whose header describes a 256 GiB embedding (one 16384-wide layer, tied embeddings). Exit 2 with
// the figures, before anything is allocated or read.
TEST_F(GenerateCli, AModelLargerThanHostMemoryIsRefusedWithTheFigures) {
  const std::filesystem::path big = dir_ / "model-huge";
  std::filesystem::create_directories(big);
  const int64_t hidden = 16384, vocab = int64_t{1} << 23;
  std::ofstream(big / "config.json") << nlohmann::json{
      {"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", hidden},
      {"intermediate_size", hidden}, {"num_hidden_layers", 1}, {"num_attention_heads", 128},
      {"num_key_value_heads", 128}, {"vocab_size", vocab}, {"max_position_embeddings", 4096},
      {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"hidden_act", "silu"}, {"tie_word_embeddings", true},
      {"bos_token_id", 1}, {"eos_token_id", 2}, {"torch_dtype", "bfloat16"}}.dump(2);
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {{"model.embed_tokens.weight", {vocab, hidden}}};
  for (const char* name : {"input_layernorm", "post_attention_layernorm"}) {
    tensors.push_back({std::string("model.layers.0.") + name + ".weight", {hidden}});
  }
  for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
    tensors.push_back({std::string("model.layers.0.") + name + ".weight", {hidden, hidden}});
  }
  tensors.push_back({"model.norm.weight", {hidden}});
  nlohmann::json header;
  int64_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    int64_t bytes = 2;
    for (const int64_t dim : shape) bytes *= dim;
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t length = text.size();
  {
    std::ofstream out(big / "model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << text;
  }
  std::filesystem::resize_file(big / "model.safetensors", 8 + length + offset);  // sparse: no blocks written
  std::filesystem::copy_file(dir_ / "model" / "tokenizer.model", big / "tokenizer.model");
  const Result r = run(std::string("'") + FERRY_BINARY + "' generate --model '" + big.string() + "' --prompt hello");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "loading model folder " + big.string() + " needs");
  EXPECT_CONTAINS(r.output, "GiB of host memory (139 billion parameters x 4 bytes + 259.50 GiB read from the weight files)");
  EXPECT_CONTAINS(r.output, "is available (MemAvailable)");
  EXPECT_EQ(r.output.find("allocat"), std::string::npos) << r.output;
}


// A GGUF file and an Ollama store name as --model (the fuzz seed tests/fuzz/corpus/gguf/qwen2_bpe.gguf,
// written by gguf-py): a folder is prepared in FERRY_CACHE and the model generates; a truncated
// file is exit 2 naming the file.
TEST_F(GenerateCli, GgufFileAndOllamaNameAreModels) {
  const std::filesystem::path seed = std::filesystem::path(FERRY_SOURCE_DIR) / "tests/fuzz/corpus/gguf/qwen2_bpe.gguf";
  const std::filesystem::path store = dir_ / "ollama";
  const std::string hex(64, 'c');
  std::filesystem::create_directories(store / "blobs");
  std::filesystem::copy_file(seed, store / "blobs" / ("sha256-" + hex), std::filesystem::copy_options::overwrite_existing);
  std::filesystem::create_directories(store / "manifests/registry.ollama.ai/library/tiny");
  std::ofstream(store / "manifests/registry.ollama.ai/library/tiny/latest")
      << R"({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)" << hex << "\"}]}";
  const std::string env = "FERRY_CACHE='" + (dir_ / "cache").string() + "' OLLAMA_MODELS='" + store.string() + "' ";
  const std::string binary = std::string("'") + FERRY_BINARY + "'";
  Result r = run(env + binary + " generate --model '" + seed.string() + "' --prompt ab --max-new-tokens 3 --greedy");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run(env + binary + " generate --model ollama:tiny --prompt ab --max-new-tokens 3 --greedy");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run(env + binary + " generate --model ollama:absent --prompt ab");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "it has: tiny:latest");

  std::string bytes;
  {
    std::ifstream in(seed, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = write("cut.gguf", bytes.substr(0, bytes.size() / 2));
  r = run(env + binary + " generate --model '" + cut + "' --prompt ab");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "GGUF file '" + cut + "'");
  EXPECT_CONTAINS(r.output, "truncated or corrupt");
}

}  // namespace
}  // namespace ferry
