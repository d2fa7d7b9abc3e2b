// Enumerations that appear in configs, with their spellings. One table per enum is the single
// source for parsing, printing and the "expected one of" part of error messages.
#pragma once

#include <array>
#include <string_view>
#include <utility>

namespace ferry {

enum class Precision { fp32, bf16, fp16 };
enum class Device { auto_, cpu, cuda };
enum class LrSchedule { cosine, linear, constant };
enum class OffloadPolicy { none, optimizer, params, auto_ };
enum class Stage { any, sft, rm, dpo, ppo, grpo, kto, distill };
enum class ProgressMode { auto_, always, never };
enum class LoraExport { merged, adapter };
enum class BaseQuantization { none, nf4, int8, gguf };
enum class DpoLoss {
  sigmoid, robust, hinge, ipo, simpo, orpo, exo_pair, nca_pair, bco_pair, sppo_hard, aot, aot_unpaired,
  apo_zero, apo_down, discopop, sft, sigmoid_norm
};
enum class KtoLoss { kto, apo_zero_unpaired };
enum class FDivergence { reverse_kl, forward_kl, js_divergence, alpha_divergence };
enum class DpoReference { auto_, precompute, model, lora_off };
enum class KlEstimator { k1, k2, k3 };
enum class AdvantageEstimator { gae, rloo, reinforce_baseline };
enum class GrpoLoss { grpo, dapo, dr_grpo, bnpo, cispo, sapo, luspo, vespo };
enum class RewardScaling { group, batch, none };
enum class ImportanceSampling { token, sequence };
enum class RewardKind { verifier, model, command, environment };
enum class ToolCallFormat { auto_, none, hermes, llama3, mistral };
enum class AnswerMatch { exact, numeric, contains };
enum class OptimizerState { fp32, int8 };
enum class MasterWeights { fp32, bf16_kahan, bf16_stochastic };
enum class StateTier { host, nvme };
enum class DistributedMode { sync, diloco };
enum class PseudoGradient { fp32, bf16, int8 };
enum class DataFormat { auto_, alpaca, sharegpt };

// EnumNames<E>::table lists (value, spelling) pairs; specialised below for every config enum.
template <class E>
struct EnumNames;

#define FERRY_ENUM_NAMES(E, ...)                                                \
  template <>                                                                   \
  struct EnumNames<E> {                                                         \
    static constexpr auto table = std::to_array<std::pair<E, std::string_view>>({__VA_ARGS__}); \
  }

FERRY_ENUM_NAMES(Precision, {Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}, {Precision::fp16, "fp16"});
FERRY_ENUM_NAMES(Device, {Device::auto_, "auto"}, {Device::cpu, "cpu"}, {Device::cuda, "cuda"});
FERRY_ENUM_NAMES(LrSchedule, {LrSchedule::cosine, "cosine"}, {LrSchedule::linear, "linear"},
                 {LrSchedule::constant, "constant"});
FERRY_ENUM_NAMES(OffloadPolicy, {OffloadPolicy::none, "none"}, {OffloadPolicy::optimizer, "optimizer"},
                 {OffloadPolicy::params, "params"}, {OffloadPolicy::auto_, "auto"});
FERRY_ENUM_NAMES(Stage, {Stage::any, "any"}, {Stage::sft, "sft"}, {Stage::rm, "rm"}, {Stage::dpo, "dpo"},
                 {Stage::ppo, "ppo"}, {Stage::grpo, "grpo"}, {Stage::kto, "kto"},
                 {Stage::distill, "distill"});
FERRY_ENUM_NAMES(ProgressMode, {ProgressMode::auto_, "auto"}, {ProgressMode::always, "always"},
                 {ProgressMode::never, "never"});
FERRY_ENUM_NAMES(LoraExport, {LoraExport::merged, "merged"}, {LoraExport::adapter, "adapter"});
FERRY_ENUM_NAMES(BaseQuantization, {BaseQuantization::none, "none"}, {BaseQuantization::nf4, "nf4"},
                 {BaseQuantization::int8, "int8"}, {BaseQuantization::gguf, "gguf"});
FERRY_ENUM_NAMES(DpoLoss, {DpoLoss::sigmoid, "sigmoid"}, {DpoLoss::robust, "robust"}, {DpoLoss::hinge, "hinge"},
                 {DpoLoss::ipo, "ipo"}, {DpoLoss::simpo, "simpo"}, {DpoLoss::orpo, "orpo"},
                 {DpoLoss::exo_pair, "exo_pair"}, {DpoLoss::nca_pair, "nca_pair"}, {DpoLoss::bco_pair, "bco_pair"},
                 {DpoLoss::sppo_hard, "sppo_hard"}, {DpoLoss::aot, "aot"}, {DpoLoss::aot_unpaired, "aot_unpaired"},
                 {DpoLoss::apo_zero, "apo_zero"}, {DpoLoss::apo_down, "apo_down"}, {DpoLoss::discopop, "discopop"},
                 {DpoLoss::sft, "sft"}, {DpoLoss::sigmoid_norm, "sigmoid_norm"});
FERRY_ENUM_NAMES(KtoLoss, {KtoLoss::kto, "kto"}, {KtoLoss::apo_zero_unpaired, "apo_zero_unpaired"});
FERRY_ENUM_NAMES(FDivergence, {FDivergence::reverse_kl, "reverse_kl"}, {FDivergence::forward_kl, "forward_kl"},
                 {FDivergence::js_divergence, "js_divergence"}, {FDivergence::alpha_divergence, "alpha_divergence"});
FERRY_ENUM_NAMES(DpoReference, {DpoReference::auto_, "auto"}, {DpoReference::precompute, "precompute"},
                 {DpoReference::model, "model"}, {DpoReference::lora_off, "lora_off"});
FERRY_ENUM_NAMES(KlEstimator, {KlEstimator::k1, "k1"}, {KlEstimator::k2, "k2"}, {KlEstimator::k3, "k3"});

FERRY_ENUM_NAMES(AdvantageEstimator, {AdvantageEstimator::gae, "gae"}, {AdvantageEstimator::rloo, "rloo"},
                 {AdvantageEstimator::reinforce_baseline, "reinforce_baseline"});
FERRY_ENUM_NAMES(GrpoLoss, {GrpoLoss::grpo, "grpo"}, {GrpoLoss::dapo, "dapo"}, {GrpoLoss::dr_grpo, "dr_grpo"},
                 {GrpoLoss::bnpo, "bnpo"}, {GrpoLoss::cispo, "cispo"}, {GrpoLoss::sapo, "sapo"},
                 {GrpoLoss::luspo, "luspo"}, {GrpoLoss::vespo, "vespo"});
FERRY_ENUM_NAMES(RewardScaling, {RewardScaling::group, "group"}, {RewardScaling::batch, "batch"},
                 {RewardScaling::none, "none"});
FERRY_ENUM_NAMES(ImportanceSampling, {ImportanceSampling::token, "token"}, {ImportanceSampling::sequence, "sequence"});
FERRY_ENUM_NAMES(RewardKind, {RewardKind::verifier, "verifier"}, {RewardKind::model, "model"},
                 {RewardKind::command, "command"}, {RewardKind::environment, "environment"});
FERRY_ENUM_NAMES(ToolCallFormat, {ToolCallFormat::auto_, "auto"}, {ToolCallFormat::none, "none"},
                 {ToolCallFormat::hermes, "hermes"}, {ToolCallFormat::llama3, "llama3"},
                 {ToolCallFormat::mistral, "mistral"});
FERRY_ENUM_NAMES(AnswerMatch, {AnswerMatch::exact, "exact"}, {AnswerMatch::numeric, "numeric"},
                 {AnswerMatch::contains, "contains"});

FERRY_ENUM_NAMES(OptimizerState, {OptimizerState::fp32, "fp32"}, {OptimizerState::int8, "int8"});
FERRY_ENUM_NAMES(MasterWeights, {MasterWeights::fp32, "fp32"}, {MasterWeights::bf16_kahan, "bf16_kahan"},
                 {MasterWeights::bf16_stochastic, "bf16_stochastic"});
FERRY_ENUM_NAMES(StateTier, {StateTier::host, "host"}, {StateTier::nvme, "nvme"});
FERRY_ENUM_NAMES(DistributedMode, {DistributedMode::sync, "sync"}, {DistributedMode::diloco, "diloco"});
FERRY_ENUM_NAMES(PseudoGradient, {PseudoGradient::fp32, "fp32"}, {PseudoGradient::bf16, "bf16"},
                 {PseudoGradient::int8, "int8"});
FERRY_ENUM_NAMES(DataFormat, {DataFormat::auto_, "auto"}, {DataFormat::alpaca, "alpaca"},
                 {DataFormat::sharegpt, "sharegpt"});
#undef FERRY_ENUM_NAMES

template <class E>
constexpr std::string_view enum_name(E value) {
  for (const auto& [v, name] : EnumNames<E>::table) {
    if (v == value) return name;
  }
  return "?";
}

template <class E>
constexpr bool enum_parse(std::string_view text, E& out) {
  for (const auto& [v, name] : EnumNames<E>::table) {
    if (name == text) {
      out = v;
      return true;
    }
  }
  return false;
}

}  // namespace ferry
