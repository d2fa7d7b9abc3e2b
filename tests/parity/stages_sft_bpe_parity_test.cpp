// End to end with the tokenizers today's small models ship: `train-sft` with LoRA on tiny random
// Qwen2- and Llama-3-shaped models whose folders hold only a Hugging Face tokenizer.json
// (byte-level BPE, stages_sft_bpe_ref.py), 20 steps, then:
//   - the trained folders carry tokenizer.json and tokenizer_config.json;
//   - peft loads final/'s adapter and transformers loads `ferry export --lora merged` of the last
//     checkpoint, both with the trained Ferry model's logits (<= 1e-4) on a conversation Ferry
//     tokenised with the family's chat template;
//   - the tokenizer transformers loads from the export encodes that conversation's text to Ferry's ids.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "src/io/lora_adapter.h"
#include "src/io/safetensors.h"
#include "src/model/lora.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "stages/sft.h"
#include "train/model_setup.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

struct Family {
  std::string name;           // the fixture folder
  std::string chat_template;  // tokenizer.chat_template
};

void PrintTo(const Family& family, std::ostream* os) { *os << family.name; }

fs::path fixture(const std::string& family) {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "stages_sft_bpe" / family / "model";
  if (!fs::exists(folder / "tokenizer.json")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
  }
  return folder;
}

int run_checker(const std::string& args) {
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/stages_sft_lora_check.py' " + args;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Llama 3's template as Ferry's template file (what the model folder's Jinja renders).
std::string write_llama3_template(const fs::path& dir) {
  const fs::path path = dir / "llama3.yaml";
  std::ofstream(path) << "name: llama3\n"
                         "system_prefix: \"<|start_header_id|>system<|end_header_id|>\\n\\n\"\n"
                         "system_suffix: \"<|eot_id|>\"\n"
                         "user_prefix: \"<|start_header_id|>user<|end_header_id|>\\n\\n\"\n"
                         "user_suffix: \"<|eot_id|>\"\n"
                         "assistant_prefix: \"<|start_header_id|>assistant<|end_header_id|>\\n\\n\"\n"
                         "assistant_suffix: \"<|eot_id|>\"\n"
                         "stop_strings: [\"<|eot_id|>\"]\n"
                         "bos: true\n";
  return path.string();
}

class SftBpe : public ::testing::TestWithParam<Family> {};

TEST_P(SftBpe, LoraTrainsAndTheExportLoadsInTransformersWithFerrysLogitsAndIds) {
  torch::set_num_threads(1);
  const Family family = GetParam();
  const fs::path base = fixture(family.name);
  const std::string root = FERRY_SOURCE_DIR;
  const fs::path dir = fs::temp_directory_path() / ("ferry_sft_bpe_" + family.name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);

  Config config;
  config.model.path = base.string();  // tokenizer.path empty: the folder's tokenizer.json
  config.tokenizer.chat_template = family.chat_template.empty() ? write_llama3_template(dir) : family.chat_template;
  config.lora.rank = 4;
  config.lora.alpha = 8;
  config.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  config.lora.export_as = LoraExport::adapter;
  config.data.train_file = root + "/data/sft_train.jsonl";
  config.data.max_samples = 64;
  config.data.max_length = 96;
  config.train.device = Device::cpu;
  config.train.learning_rate = 1e-2;
  config.train.warmup_steps = 0;
  config.train.micro_batch_size = 4;
  config.train.max_steps = 20;
  config.output.dir = (dir / "run").string();
  config.logging.progress = ProgressMode::never;
  config.logging.tensorboard = false;
  run_sft(config);

  const fs::path final_dir = dir / "run" / "final", step = dir / "run" / "step-20";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "adapter_config.json"}) {
    EXPECT_TRUE(fs::exists(final_dir / file)) << file;
  }
  EXPECT_FALSE(fs::exists(final_dir / "tokenizer.model"));

  // The trained model as Ferry resumes it from the last checkpoint: base + adapters, not merged.
  const Tokenizer tokenizer(step.string());
  EXPECT_EQ(tokenizer.kind(), TokenizerKind::byte_level_bpe);
  CausalLM model = causal_lm_from_pretrained(base);
  prepare_lora(*model, config);
  stage_trained_model("policy", *model, model->config(), config, tokenizer).load(step);
  model->eval();

  const ChatTemplate chat_template = load_chat_template(config.tokenizer.chat_template);
  const Conversation conversation{{ChatRole::system, "You are a careful assistant."},
                                  {ChatRole::user, "Sort from smallest to largest: 99 20 81 27"},
                                  {ChatRole::assistant, "20 27 81 99"}};
  const TokenizedConversation tokens = chat_template.apply(conversation, tokenizer);
  const auto n = static_cast<int64_t>(tokens.ids.size());
  const torch::Tensor ids = torch::tensor(tokens.ids, torch::kLong).view({1, n});
  const torch::Tensor mask = torch::ones({1, n}, torch::kLong);
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = model->forward(ids, mask);
  }
  io::save_safetensors(dir / "ferry_logits.safetensors",
                       {{"input_ids", ids}, {"attention_mask", mask}, {"logits", logits.contiguous()}});
  std::string text = chat_template.render_text(conversation);
  if (chat_template.bos) text = tokenizer.id_to_piece(tokenizer.bos_id()) + text;
  EXPECT_EQ(tokenizer.encode_with_control_pieces(text), tokens.ids) << "template pieces and whole text differ";
  std::ofstream(dir / "probe.json") << nlohmann::json{{"text", text}, {"ids", tokens.ids}}.dump();

  const std::string export_command = std::string("'") + FERRY_BINARY + "' export --checkpoint '" + step.string() +
                                     "' --output '" + (dir / "merged").string() + "' --lora merged";
  ASSERT_EQ(std::system(export_command.c_str()), 0);
  EXPECT_TRUE(fs::exists(dir / "merged" / "tokenizer.json"));

  const std::string args = "'" + base.string() + "' '" + final_dir.string() + "' '" + (dir / "merged").string() +
                           "' '" + (dir / "ferry_logits.safetensors").string() + "' '" + (dir / "probe.json").string() +
                           "'";
  EXPECT_EQ(run_checker(args), 0) << "peft or transformers disagree with Ferry (see the lines above)";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, SftBpe,
                         ::testing::Values(Family{"qwen2", "chatml"}, Family{"llama3", ""}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ferry
