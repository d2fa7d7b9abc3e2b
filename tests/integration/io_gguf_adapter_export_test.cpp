// `ferry export --format gguf --lora adapter` as a user runs it: a llama.cpp LoRA adapter from a
// LoRA run Ferry trains here (the GQA llama of tests/parity/gguf_export_ref.py as model.path, rank-4
// adapters on all seven projections, 3 steps), from that fixture's LoRA checkpoint (q/v adapters,
// biases, one KV head) and from a LoRA run on its bf16 Qwen2 (no permutation). Checked three ways, none of them against Ferry's own output:
//   - tests/parity/gguf_adapter_check.py converts the same run's PEFT adapter (`--format hf --lora
//     adapter`) with llama.cpp's convert_lora_to_gguf.py rules and compares every metadata value
//     and every tensor bit for bit (f32, f16, bf16, q8_0); llama.cpp's own convert_lora_to_gguf.py
//     (the copy scripts/deps.sh puts in the deps venv, or FERRY_LLAMA_CPP_CONVERTER) too;
//   - tests/parity/gguf_adapter_apply_check.py applies the adapter to the base GGUF as llama.cpp
//     does (W + alpha / rank * B @ A, NumPy) and must get Ferry's merged export (fp32, 1e-6);
//   - llama.cpp (llama-cpp-python in the deps venv) runs base + adapter and must give the merged
//     model's logits (tests/parity/gguf_adapter_llama_cpp_check.py).
// Runs without LoRA, LoRA on modules llama.cpp cannot map, and score heads are exit-2 errors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>

#include "src/io/safetensors.h"
#include "tests/integration/ferry_process.h"

namespace {

namespace fs = std::filesystem;
using ferry_test::run_command;
using ferry_test::run_ferry;

// Input models (tests/parity/gguf_export_ref.py, run once as the gguf_export fixture).
const fs::path kModels = fs::path(FERRY_FIXTURES_DIR) / "gguf_export";

std::string shell_quoted(const fs::path& path) {
  std::string out(1, '\'');  // built up, not "'" + ...: GCC 12 warns falsely about that form (-Wstringop-overflow)
  out.append(path.string()).push_back('\'');
  return out;
}

ferry_test::CommandResult python(const std::string& script, const std::string& args) {
  return run_command(std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                     "/tests/parity/" + script + "' " + args);
}

// llama.cpp's convert_lora_to_gguf.py: FERRY_LLAMA_CPP_CONVERTER when set, else the copy that
// scripts/deps.sh extracts from the llama-cpp-python sdist's vendor/llama.cpp into the deps venv
// (<venv>/share/llama.cpp, beside the conversion/ and gguf-py/ it imports). "" when there is none.
std::string llama_cpp_converter() {
  const char* env = std::getenv("FERRY_LLAMA_CPP_CONVERTER");
  const fs::path path = env != nullptr ? fs::path(env)
                                       : fs::path(FERRY_PYTHON).parent_path().parent_path() / "share" / "llama.cpp" /
                                             "convert_lora_to_gguf.py";
  return fs::exists(path) ? path.string() : std::string();
}

ferry_test::CommandResult ferry_export(const fs::path& checkpoint, const fs::path& output, const std::string& flags) {
  return run_ferry("export --checkpoint " + shell_quoted(checkpoint) + " --output " + shell_quoted(output) + " " + flags);
}

class IoGgufAdapterExportTest : public ::testing::Test {
 protected:
  // One LoRA run for the whole program: 3 SFT steps on the GQA llama fixture (4 heads, 2 KV heads:
  // q and k permuted with different groups), every projection adapted, scale 12 / 4 = 3.
  static void SetUpTestSuite() {
    root_ = new fs::path(ferry_test::process_temp_dir("ferry_gguf_adapter"));
    fs::create_directories(*root_);
    const fs::path run = *root_ / "run";
    const std::string config = ferry_test::write_text(
        *root_, "lora.yaml",
        "stage: sft\nmodel: {path: " + (kModels / "llama_spm").string() +
            "}\ntokenizer: {path: data/tokenizer.model, chat_template: demo}\n"
            "data: {train_file: data/sft_train.jsonl, max_samples: 32, max_length: 48}\n"
            "train: {micro_batch_size: 4, max_steps: 3, save_every: 3, learning_rate: 1.0e-2, warmup_steps: 0}\n"
            "lora: {rank: 4, alpha: 12.0, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
            "down_proj]}\n"
            "output: {dir: " + run.string() + "}\n");
    const auto r = run_ferry("train-sft --config " + shell_quoted(config) + ferry_test::kQuietCpu);
    training_output_ = new std::string(r.output);
    checkpoint_ = new fs::path(run / "step-3");
  }
  static void TearDownTestSuite() {
    delete root_;
    delete checkpoint_;
    delete training_output_;
  }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kModels / "llama_spm" / "config.json"))
        << "missing fixture " << kModels << " (run the parity_fixture_gguf_export test first)";
    ASSERT_TRUE(fs::exists(*checkpoint_ / "adapter_config.json")) << *training_output_;
    dir_ = *root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  // The PEFT adapter of `checkpoint` (Ferry's --format hf --lora adapter), once per test.
  fs::path peft_adapter(const fs::path& checkpoint, const std::string& tag) {
    const fs::path out = dir_ / ("peft_" + tag);
    if (!fs::exists(out)) {
      const auto r = ferry_export(checkpoint, out, "--lora adapter");
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    return out;
  }

  // Exports `checkpoint`'s adapter as `type` and has the checker compare it with its own conversion
  // of the PEFT adapter (and llama.cpp's converter's, when `converter` is given).
  void export_and_check(const fs::path& checkpoint, const std::string& tag, const std::string& type,
                        const std::string& name, int64_t tensors, const std::string& converter = "") {
    SCOPED_TRACE(tag + " as " + type);
    const fs::path file = dir_ / (tag + "_" + type + ".gguf");
    const auto r = ferry_export(checkpoint, file, "--format gguf --lora adapter --gguf-type " + type);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_CONTAINS(r.output, "exported " + std::to_string(tensors) + " tensors");
    EXPECT_CONTAINS(r.output, "as a GGUF llama LoRA adapter '" + name + "'");
    EXPECT_CONTAINS(r.output, file.string());
    const auto check = python("gguf_adapter_check.py", shell_quoted(peft_adapter(checkpoint, tag)) + " " + shell_quoted(checkpoint) +
                                                           " " + shell_quoted(file) + " --type " + type +
                                                           " --arch llama --name " + name +
                                                           (converter.empty() ? "" : " --converter " + shell_quoted(converter)));
    EXPECT_EQ(check.exit_code, 0) << check.output;
    std::cout << check.output;
  }

  static fs::path* root_;
  static fs::path* checkpoint_;
  static std::string* training_output_;
  fs::path dir_;
};

fs::path* IoGgufAdapterExportTest::root_ = nullptr;
fs::path* IoGgufAdapterExportTest::checkpoint_ = nullptr;
std::string* IoGgufAdapterExportTest::training_output_ = nullptr;

TEST_F(IoGgufAdapterExportTest, TrainedAdapterFollowsTheConverterEveryType) {
  // 2 layers x 7 projections x (lora_a, lora_b); the name of "<run>/step-3".
  for (const std::string type : {"f32", "f16", "bf16", "q8_0"}) {
    export_and_check(*checkpoint_, "trained", type, "run-step-3", 28);
  }
}

TEST_F(IoGgufAdapterExportTest, FixtureAdapterWithBiasesAndOneKvHead) {
  for (const std::string type : {"f32", "q8_0"}) {
    export_and_check(kModels / "llama_lora_bpe", "fixture", type, "llama_lora_bpe", 8);
  }
  // A folder as --output gets adapter.gguf; --gguf-name names it.
  const auto r = ferry_export(kModels / "llama_lora_bpe", dir_ / "folder",
                              "--format gguf --lora adapter --gguf-name 'My Adapter'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "folder" / "adapter.gguf")) << r.output;
  EXPECT_CONTAINS(r.output, "LoRA adapter 'My Adapter' of 4 projections (rank 4, alpha 8: scale 2)");
}

// llama.cpp's own convert_lora_to_gguf.py (not shipped in a wheel: scripts/deps.sh takes it from
// the llama-cpp-python sdist; FERRY_LLAMA_CPP_CONVERTER names another copy) writes the same metadata
// and tensors, bit for bit.
TEST_F(IoGgufAdapterExportTest, ConvertLoraToGgufWritesTheSameFile) {
  const std::string converter = llama_cpp_converter();
  if (converter.empty()) {
    GTEST_SKIP() << "[needs llama_cpp] no convert_lora_to_gguf.py: neither in the deps venv's share/llama.cpp "
                    "(scripts/deps.sh puts it there) nor named by FERRY_LLAMA_CPP_CONVERTER";
  }
  for (const std::string type : {"f32", "f16", "bf16", "q8_0"}) {
    export_and_check(*checkpoint_, "trained", type, "run-step-3", 28, converter);
  }
  export_and_check(kModels / "llama_lora_bpe", "fixture", "f16", "llama_lora_bpe", 8, converter);
}

// qwen2 (NEOX rope: no row permutation), bf16 weights, tied embeddings, a byte-level BPE tokenizer:
// a LoRA run of its own, checked as above (and by llama.cpp's converter when it is named).
TEST_F(IoGgufAdapterExportTest, Qwen2AdapterIsNotPermuted) {
  const fs::path run = dir_ / "qwen2_run";
  const std::string config = ferry_test::write_text(
      dir_, "qwen2.yaml",
      "stage: sft\nmodel: {path: " + (kModels / "qwen2_bpe").string() +
          "}\ntokenizer: {chat_template: chatml}\n"
          "data: {train_file: data/sft_train.jsonl, max_samples: 16, max_length: 256}\n"
          "train: {micro_batch_size: 4, max_steps: 2, save_every: 2, learning_rate: 1.0e-2, warmup_steps: 0}\n"
          "lora: {rank: 4, alpha: 8.0, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
          "down_proj]}\n"
          "output: {dir: " + run.string() + "}\n");
  auto r = run_ferry("train-sft --config " + shell_quoted(config) + ferry_test::kQuietCpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path checkpoint = run / "step-2";
  const fs::path peft = peft_adapter(checkpoint, "qwen2");
  const std::string converter = llama_cpp_converter();
  for (const std::string type : {"f32", "q8_0"}) {
    SCOPED_TRACE(type);
    const fs::path file = dir_ / ("qwen2_" + type + ".gguf");
    r = ferry_export(checkpoint, file, "--format gguf --lora adapter --gguf-type " + type);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_CONTAINS(r.output, "as a GGUF qwen2 LoRA adapter 'qwen2_run-step-2' of 14 projections (rank 4, alpha 8");
    const auto check = python("gguf_adapter_check.py",
                              shell_quoted(peft) + " " + shell_quoted(checkpoint) + " " + shell_quoted(file) +
                                  " --type " + type + " --arch qwen2 --name qwen2_run-step-2" +
                                  (converter.empty() ? std::string() : " --converter " + shell_quoted(converter)));
    EXPECT_EQ(check.exit_code, 0) << check.output;
    std::cout << check.output;
  }
  r = ferry_export(checkpoint, dir_ / "qwen2_base.gguf", "--format gguf --gguf-type f32 --lora none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ferry_export(checkpoint, dir_ / "qwen2_merged.gguf", "--format gguf --gguf-type f32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto check = python("gguf_adapter_apply_check.py", shell_quoted(dir_ / "qwen2_base.gguf") + " " +
                                                               shell_quoted(dir_ / "qwen2_f32.gguf") + " " +
                                                               shell_quoted(dir_ / "qwen2_merged.gguf") +
                                                               " --tolerance 1e-6");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  std::cout << check.output;
}

// Base + adapter, as llama.cpp computes it, is the model Ferry merges (fp32). The base is the
// checkpoint's own (--lora none) or the run's model.path exported: the same tensors.
TEST_F(IoGgufAdapterExportTest, AdapterOnTheBaseIsTheMergedModel) {
  const fs::path base = dir_ / "base.gguf", spm_base = dir_ / "model_path.gguf", adapter = dir_ / "adapter.gguf",
                 merged = dir_ / "merged.gguf";
  auto r = ferry_export(*checkpoint_, base, "--format gguf --gguf-type f32 --lora none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "without its LoRA adapters (the base weights)");
  r = ferry_export(kModels / "llama_spm", spm_base, "--format gguf --gguf-type f32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ferry_export(*checkpoint_, adapter, "--format gguf --gguf-type f32 --lora adapter");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "of 14 projections (rank 4, alpha 12: scale 3)");
  r = ferry_export(*checkpoint_, merged, "--format gguf --gguf-type f32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "with LoRA merged");
  for (const fs::path& b : {base, spm_base}) {
    const auto check = python("gguf_adapter_apply_check.py", shell_quoted(b) + " " + shell_quoted(adapter) + " " + shell_quoted(merged) +
                                                                 " --tolerance 1e-6");
    EXPECT_EQ(check.exit_code, 0) << check.output;
    std::cout << check.output;
  }

  // The fixture checkpoint: q/v adapters, biases, one KV head.
  const fs::path fixture = kModels / "llama_lora_bpe";
  r = ferry_export(fixture, dir_ / "f_base.gguf", "--format gguf --gguf-type f32 --lora none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ferry_export(fixture, dir_ / "f_adapter.gguf", "--format gguf --gguf-type f32 --lora adapter");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ferry_export(fixture, dir_ / "f_merged.gguf", "--format gguf --gguf-type f32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto check = python("gguf_adapter_apply_check.py", shell_quoted(dir_ / "f_base.gguf") + " " +
                                                               shell_quoted(dir_ / "f_adapter.gguf") + " " +
                                                               shell_quoted(dir_ / "f_merged.gguf") + " --tolerance 1e-6");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  std::cout << check.output;
}

TEST_F(IoGgufAdapterExportTest, RunsLlamaCppCannotTakeAreInputErrors) {
  const auto export_error = [&](const fs::path& checkpoint, const std::string& flags = "--format gguf --lora adapter") {
    const fs::path out = dir_ / "x.gguf";
    const auto r = ferry_export(checkpoint, out, flags);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_FALSE(fs::exists(out)) << r.output;
    return r.output;
  };
  // No LoRA at all.
  std::string message = export_error(kModels / "llama_spm");
  EXPECT_CONTAINS(message, "has no LoRA weights (lora_A / lora_B) to write as an adapter");
  EXPECT_CONTAINS(message, "--lora merged");

  // A copy of the fixture checkpoint whose weights `edit` changes.
  const auto edited = [&](const std::string& name, const auto& edit) {
    const fs::path copy = dir_ / name;
    fs::create_directories(copy);
    for (const auto& entry : fs::directory_iterator(kModels / "llama_lora_bpe")) {
      if (entry.path().filename() != "model.safetensors") fs::copy(entry.path(), copy / entry.path().filename());
    }
    ferry::io::TensorMap tensors = ferry::io::load_safetensors(kModels / "llama_lora_bpe" / "model.safetensors");
    edit(tensors);
    ferry::io::save_safetensors(copy / "model.safetensors", tensors);
    return copy;
  };
  const auto rename = [](ferry::io::TensorMap& tensors, const std::string& from, const std::string& to) {
    tensors[to] = tensors.at(from);
    tensors.erase(from);
  };
  // LoRA on the embeddings, and on a module llama.cpp has no tensor for.
  const fs::path embedding = edited("embedding", [&](ferry::io::TensorMap& t) {
    rename(t, "model.layers.0.self_attn.q_proj.lora_A.weight", "model.embed_tokens.lora_A.weight");
    rename(t, "model.layers.0.self_attn.q_proj.lora_B.weight", "model.embed_tokens.lora_B.weight");
  });
  message = export_error(embedding);
  EXPECT_CONTAINS(message, "LoRA weight 'model.embed_tokens.lora_A.weight' adapts 'model.embed_tokens.weight'");
  EXPECT_CONTAINS(message, "llama.cpp cannot map");
  EXPECT_CONTAINS(message, "--lora merged");
  const fs::path unknown = edited("unknown", [&](ferry::io::TensorMap& t) {
    rename(t, "model.layers.1.self_attn.v_proj.lora_A.weight", "model.layers.1.self_attn.rotary.lora_A.weight");
    rename(t, "model.layers.1.self_attn.v_proj.lora_B.weight", "model.layers.1.self_attn.rotary.lora_B.weight");
  });
  message = export_error(unknown);
  EXPECT_CONTAINS(message, "adapts 'model.layers.1.self_attn.rotary.weight', which llama.cpp cannot map");

  // A reward model's score head.
  const fs::path score = edited("score", [](ferry::io::TensorMap& t) { t["score.weight"] = at::zeros({1, 64}); });
  message = export_error(score);
  EXPECT_CONTAINS(message, "has a score head");
  EXPECT_CONTAINS(message, "--format hf --lora adapter");

  // A lora_A without its lora_B, and a rank that disagrees with adapter_config.json.
  const fs::path half = edited("half", [](ferry::io::TensorMap& t) { t.erase("model.layers.0.self_attn.v_proj.lora_B.weight"); });
  EXPECT_CONTAINS(export_error(half), "has no partner 'model.layers.0.self_attn.v_proj.lora_B.weight'");
  const fs::path rank = edited("rank", [](ferry::io::TensorMap& t) {
    t["model.layers.0.self_attn.v_proj.lora_A.weight"] = at::zeros({2, 64});
    t["model.layers.0.self_attn.v_proj.lora_B.weight"] = at::zeros({32, 2});
  });
  EXPECT_CONTAINS(export_error(rank), "need A [4, 64], B [32, 4]");

  // Flags that do not go together.
  message = export_error(kModels / "llama_lora_bpe", "--format gguf --lora adapter --gguf-pre llama-bpe");
  EXPECT_CONTAINS(message, "--gguf-pre has no effect with --lora adapter");
  message = export_error(kModels / "llama_lora_bpe", "--lora none");
  EXPECT_CONTAINS(message, "--lora none goes with --format gguf");
}

// llama.cpp itself (llama-cpp-python in the deps venv): the base with `lora_path` gives the merged
// export's logits and greedy tokens (f32 adapter, and an f16 adapter within its rounding).
TEST_F(IoGgufAdapterExportTest, LlamaCppAppliesTheAdapter) {
  const auto probe = run_command(std::string("'") + FERRY_PYTHON + "' -c 'import llama_cpp'");
  if (probe.exit_code != 0) {
    GTEST_SKIP() << "[needs llama_cpp] llama-cpp-python is not in the deps venv (scripts/deps.sh installs it)";
  }
  const fs::path base = dir_ / "base.gguf", merged = dir_ / "merged.gguf";
  auto r = ferry_export(*checkpoint_, base, "--format gguf --gguf-type f32 --lora none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ferry_export(*checkpoint_, merged, "--format gguf --gguf-type f32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& [type, tolerance] : {std::pair<std::string, std::string>{"f32", "1e-4"}, {"f16", "1e-2"}}) {
    SCOPED_TRACE(type);
    const fs::path adapter = dir_ / ("adapter_" + type + ".gguf");
    r = ferry_export(*checkpoint_, adapter, "--format gguf --lora adapter --gguf-type " + type);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto check = python("gguf_adapter_llama_cpp_check.py", shell_quoted(base) + " " + shell_quoted(adapter) + " " +
                                                                     shell_quoted(merged) + " --tolerance " + tolerance);
    EXPECT_EQ(check.exit_code, 0) << check.output;
    std::cout << check.output;
  }
}

}  // namespace
