// Ferry's QLoRA against transformers + bitsandbytes + peft on the CPU (qlora_ref.py), fp32 compute:
//   - loading the base with lora.quantize_base nf4 + double_quant gives bitsandbytes' 4-bit state
//     of every projection bit for bit (packed codes, 8-bit absmax, nested absmax, code books and
//     the quant_state JSON), as transformers' BitsAndBytesConfig(load_in_4bit, nf4, double quant)
//     holds it;
//   - one forward/backward of the LoRA model on that base (peft's adapter values) gives peft's loss
//     and adapter gradients, with and without activation checkpointing; no base weight gets a
//     gradient. fp32: 1e-5 absolute (loss and every gradient element). bf16 (the base cast to bf16
//     and quantised, bf16 compute and bf16 adapters on both sides): the 4-bit state is again bnb's bit
//     for bit; loss within 0.5% and each gradient within 5% of its tensor's largest element (bf16's
//     own rounding between two implementations; measured figures are printed).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "offload/engine.h"
#include "src/io/lora_adapter.h"
#include "src/io/safetensors.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/quantized_base.h"
#include "stages/sft.h"
#include "tests/support/max_difference.h"
#include "train/backbone_runner.h"
#include "tests/support/sft_batch.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fixture() {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "qlora";
  if (!fs::exists(folder / "expected.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
  }
  return folder;
}

// The two quant-state JSON texts, for a message.
std::string as_text(const torch::Tensor& ferry, const torch::Tensor& bnb) {
  if (ferry.scalar_type() != torch::kByte || ferry.dim() != 1) return "";
  auto text = [](const torch::Tensor& t) {
    const torch::Tensor c = t.contiguous();
    return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
  };
  return "\n  Ferry: " + text(ferry) + "\n  bnb:   " + text(bnb);
}

struct Case {
  at::ScalarType dtype;
  bool checkpointing;
};

// The fixture folder of a dtype (bf16 in a sub-folder), and the model both share.
fs::path folder_of(at::ScalarType dtype) { return dtype == at::kFloat ? fixture() : fixture() / "bf16"; }

class QloraLoadParity : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(QloraLoadParity, LoadingQuantisesAsBitsandbytes) {
  torch::set_num_threads(1);
  const at::ScalarType dtype = GetParam();
  const io::TensorMap bnb = io::load_safetensors(folder_of(dtype) / "nf4.safetensors");
  CausalLM model = causal_lm_from_pretrained_nf4(fixture() / "model", dtype, /*double_quant=*/true);
  const io::TensorMap ferry = state_of(*model);
  int compared = 0;
  for (const auto& [name, want] : bnb) {
    auto it = ferry.find(name);
    ASSERT_NE(it, ferry.end()) << "Ferry's state lacks " << name;
    EXPECT_EQ(it->second.sizes(), want.sizes()) << name;
    EXPECT_EQ(it->second.scalar_type(), want.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(it->second.contiguous().view(torch::kByte), want.contiguous().view(torch::kByte)))
        << name << " differs from bitsandbytes'" << as_text(it->second, want);
    ++compared;
  }
  EXPECT_EQ(compared, 2 * 7 * 6);  // 2 layers x 7 projections x (weight, absmax, quant_map, nested x2, quant_state)
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QloraLoadParity, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return info.param == at::kFloat ? "fp32" : "bf16"; });

class QloraParity : public ::testing::TestWithParam<Case> {};

TEST_P(QloraParity, LossAndAdapterGradientsMatchPeftOnBitsandbytes) {
  torch::set_num_threads(1);
  const auto [dtype, checkpointing] = GetParam();
  const bool fp32 = dtype == at::kFloat;
  const auto folder = folder_of(dtype);
  const io::TensorMap expected = io::load_safetensors(folder / "expected.safetensors");
  const MicroBatch batch = test_support::sft_batch_from(io::load_safetensors(folder / "batch.safetensors"));
  CausalLM model = causal_lm_from_pretrained_nf4(fixture() / "model", dtype, /*double_quant=*/true);
  Config config;
  config.lora.rank = 4;
  config.lora.alpha = 8;
  config.lora.dropout = 0.0;
  config.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  config.lora.quantize_base = BaseQuantization::nf4;
  prepare_lora(*model, config);
  const io::PeftAdapter adapter = io::read_peft_adapter(folder / "init_adapter");
  load_lora_state(*model, adapter.tensors, "init_adapter");
  model->train();

  auto engine = offload::make_parameter_engine(offload::EngineOptions{});
  engine->add_model("policy", offload::group_parameters(*model, false), true);
  BackboneRunner runner(*engine, checkpointing);
  SftObjective objective("policy", *model);
  engine->zero_grad();
  const LossSum loss = objective.loss(batch, runner);
  const torch::Tensor mean = loss.sum / static_cast<double>(batch.loss_weight);
  mean.backward();
  const double want_loss = expected.at("loss").item<double>();
  const double loss_error = std::abs(mean.item<double>() - want_loss);
  EXPECT_LE(loss_error, fp32 ? 1e-5 : 5e-3 * want_loss);

  int adapters = 0;
  double worst = 0, largest = 0;
  for (const auto& item : model->named_parameters()) {
    if (!io::is_lora_tensor(item.key())) {
      EXPECT_FALSE(item.value().grad().defined()) << "frozen base weight got a gradient: " << item.key();
      continue;
    }
    const torch::Tensor& want = expected.at("grad." + item.key());
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    const double scale = want.abs().max().item<double>();
    largest = std::max(largest, scale);
    const double error = (item.value().grad().to(at::kFloat) - want).abs().max().item<double>();
    worst = test_support::max_keeping_nan(worst, fp32 ? error : error / scale);  // printed: a NaN shows
    EXPECT_LE(error, fp32 ? 1e-5 : 5e-2 * scale) << "gradient of " << item.key();
    ++adapters;
  }
  EXPECT_EQ(adapters, 2 * 7 * 2);
  std::cout << "QLoRA vs peft+bitsandbytes, " << (fp32 ? "fp32" : "bf16") << ": loss " << mean.item<double>()
            << " (difference " << loss_error << "), largest adapter gradient difference " << worst
            << (fp32 ? " absolute" : " relative to its tensor's largest element") << " (largest gradient " << largest
            << ")\n";
}

INSTANTIATE_TEST_SUITE_P(DtypesAndCheckpointing, QloraParity,
                         ::testing::Values(Case{at::kFloat, false}, Case{at::kFloat, true}, Case{at::kBFloat16, false},
                                           Case{at::kBFloat16, true}),
                         [](const auto& info) {
                           return std::string(info.param.dtype == at::kFloat ? "fp32" : "bf16") +
                                  (info.param.checkpointing ? "_checkpointed" : "_plain");
                         });

}  // namespace
}  // namespace ferry
