// The `auto` planner: exhaustive search over policy × kept chunks × checkpointed layers ×
// micro-batch, and the explanation when nothing fits.
#include "offload/planner.h"

#include <cstdio>
#include <algorithm>
#include <numeric>
#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"

namespace ferry::offload {
namespace {

// Micro-batch sizes to try and their accumulation, keeping micro_batch × accumulation fixed.
std::vector<std::pair<int64_t, int64_t>> micro_batch_options(const PlannerRequest& r) {
  const int64_t global = r.micro_batch_size * r.shape.grad_accumulation;
  std::vector<std::pair<int64_t, int64_t>> options;
  if (r.search_micro_batch) {
    for (int64_t p = 1; p < r.micro_batch_size; p *= 2) {
      if (global % p == 0) options.emplace_back(p, global / p);
    }
  }
  options.emplace_back(r.micro_batch_size, r.shape.grad_accumulation);
  return options;
}

// Chunk indices in the order the planner keeps them on the device: least forward compute per byte
// first (its copy is the hardest to hide), ties by position.
std::vector<size_t> keep_order(const MemoryModel& model) {
  const std::vector<double> flops = chunk_forward_flops_per_token(model);
  std::vector<size_t> order(flops.size());
  std::iota(order.begin(), order.end(), 0);
  const auto& chunks = model.layout().chunks();
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return flops[a] / static_cast<double>(std::max<uint64_t>(chunks[a].bytes, 1)) <
           flops[b] / static_cast<double>(std::max<uint64_t>(chunks[b].bytes, 1));
  });
  return order;
}

// Numbers of kept chunks to try: every count up to kMaxKeptSteps chunks, else an even grid of
// kMaxKeptSteps + 1 counts from 0 to all (small chunk sizes give hundreds of chunks).
constexpr size_t kMaxKeptSteps = 64;

std::vector<size_t> kept_counts(size_t max_kept) {
  std::vector<size_t> counts;
  const size_t steps = std::min(max_kept, kMaxKeptSteps);
  for (size_t i = 0; i <= steps; ++i) {
    const size_t k = steps == 0 ? 0 : (i * max_kept + steps / 2) / steps;
    if (counts.empty() || counts.back() != k) counts.push_back(k);
  }
  return counts;
}

// Activation offload settings to try with `checkpointed` layers checkpointed (offloading nothing is
// the same plan as not offloading, so it is tried once unless it is forced).
std::vector<bool> activation_offload_options(const PlannerRequest& r, int64_t checkpointed) {
  if (r.activation_offload) return {true};
  if (r.search_activation_offload && checkpointed > 0) return {false, true};
  return {false};
}

// Calls visit(plan) for every candidate of the request's search space, in a fixed order.
// With smallest_micro_batch_only, only the smallest micro-batch is tried: device bytes grow with
// the micro-batch (activations) and nothing else on the device depends on it.
template <class Visit>
int64_t for_each_candidate(const PlannerRequest& r, const ResolvedRates& rates, bool smallest_micro_batch_only,
                           Visit&& visit) {
  FERRY_CHECK(!r.policies.empty(), "the planner needs at least one policy");
  FERRY_CHECK(r.micro_batch_size > 0 && r.shape.grad_accumulation > 0, "micro-batch ", r.micro_batch_size,
              ", accumulation ", r.shape.grad_accumulation);
  const int64_t num_layers = r.shape.model.num_hidden_layers;
  int64_t count = 0;
  std::vector<std::pair<int64_t, int64_t>> micro_batches = micro_batch_options(r);
  if (smallest_micro_batch_only) micro_batches.resize(1);
  for (const auto& [micro_batch, accumulation] : micro_batches) {
    TrainingShape shape = r.shape;
    shape.grad_accumulation = accumulation;
    const MemoryModel model(shape, r.constants);
    const size_t num_chunks = model.layout().chunks().size();
    const std::vector<size_t> order = keep_order(model);
    const StepCostTable costs = build_step_cost_table(model);
    std::vector<int64_t> checkpoint_counts;
    if (r.search_checkpointing) {
      for (int64_t c = 0; c <= num_layers; ++c) checkpoint_counts.push_back(c);
    } else {
      checkpoint_counts.push_back(r.gradient_checkpointing ? num_layers : 0);
    }
    for (OffloadPolicy policy : r.policies) {
      FERRY_CHECK(policy != OffloadPolicy::auto_, "the planner searches concrete policies");
      const size_t max_kept = policy == OffloadPolicy::params && r.search_kept_chunks ? num_chunks : 0;
      const bool all_checkpointed = policy == OffloadPolicy::params && r.params_checkpoints_every_layer;
      for (int64_t checkpointed : checkpoint_counts) {
        if (all_checkpointed && checkpointed != checkpoint_counts.back()) continue;
        if (all_checkpointed) checkpointed = num_layers;
        for (const bool offload : activation_offload_options(r, checkpointed))
        for (size_t kept : kept_counts(max_kept)) {
          Plan p;
          p.choice.policy = policy;
          p.choice.activation_offload = offload;
          p.choice.micro_batch_size = micro_batch;
          p.choice.layer_checkpointed.assign(num_layers, false);
          for (int64_t i = 0; i < checkpointed; ++i) p.choice.layer_checkpointed[i] = true;
          if (policy == OffloadPolicy::params) {
            p.choice.chunk_on_device.assign(num_chunks, false);
            for (size_t i = 0; i < kept; ++i) p.choice.chunk_on_device[order[i]] = true;
          } else {
            p.choice.chunk_on_device.assign(num_chunks, true);
          }
          p.grad_accumulation = accumulation;
          p.memory = model.estimate(p.choice);
          p.time = estimate_step_time(costs, p.choice, accumulation, rates);
          p.tokens_per_step = static_cast<double>(micro_batch * accumulation * shape.seq_len);
          ++count;
          visit(p);
        }
      }
    }
  }
  return count;
}

bool smaller_footprint(const Plan& a, const Plan& b) {
  if (a.memory.device_total() != b.memory.device_total()) return a.memory.device_total() < b.memory.device_total();
  return a.time.total_s() < b.time.total_s();
}

bool faster(const Plan& a, const Plan& b) {
  if (a.time.total_s() != b.time.total_s()) return a.time.total_s() < b.time.total_s();
  return a.memory.device_total() < b.memory.device_total();
}

bool fits_device(const PlannerRequest& r, const Plan& p) { return p.memory.device_total() <= r.device_budget; }
bool fits_host(const PlannerRequest& r, const Plan& p) {
  return r.host_budget == 0 || p.memory.host_total() <= r.host_budget;
}
bool fits(const PlannerRequest& r, const Plan& p) { return fits_device(r, p) && fits_host(r, p); }

std::vector<std::string> suggestions_for(const PlannerRequest& r, const Plan& smallest) {
  std::vector<std::string> lines;
  lines.push_back("a device budget of at least " + format_bytes_approx(smallest.memory.device_total()) +
                  " (--gpu-memory or offload.gpu_memory)");
  // Shorter sequences: the largest power-of-two fraction of max_length that fits.
  for (int64_t seq = r.shape.seq_len / 2; seq >= 16; seq /= 2) {
    PlannerRequest shorter = r;
    shorter.shape.seq_len = seq;
    const Plan s = smallest_footprint(shorter);
    if (fits(r, s)) {
      lines.push_back("data.max_length " + std::to_string(seq) + " (smallest footprint then " +
                      format_bytes_approx(s.memory.device_total()) + ")");
      break;
    }
  }
  if (r.shape.lora_rank == 0) {
    PlannerRequest lora = r;
    lora.shape.lora_rank = 8;
    const Plan s = smallest_footprint(lora);
    if (fits(r, s)) {
      lines.push_back("LoRA instead of full fine-tuning, e.g. lora.rank 8 (smallest footprint then " +
                      format_bytes_approx(s.memory.device_total()) + ")");
    }
  }
  if (r.shape.base == BaseFormat::compute_dtype) {
    PlannerRequest qlora = r;
    if (qlora.shape.lora_rank == 0) qlora.shape.lora_rank = 8;
    qlora.shape.base = BaseFormat::nf4_double_quant;
    const Plan s = smallest_footprint(qlora);
    if (fits(r, s)) {
      lines.push_back(std::string("QLoRA: the frozen base in 4 bits, lora.quantize_base nf4") +
                      (r.shape.lora_rank == 0 ? " with lora.rank 8" : "") + " (smallest footprint then " +
                      format_bytes_approx(s.memory.device_total()) + ")");
    }
  }
  if (r.shape.precision == Precision::fp32) {
    PlannerRequest half = r;
    half.shape.precision = Precision::bf16;
    const Plan s = smallest_footprint(half);
    if (fits(r, s)) {
      lines.push_back("train.precision bf16 (smallest footprint then " + format_bytes_approx(s.memory.device_total()) + ")");
    }
  }
  if (r.constants.chunk_size == 0 || r.constants.chunk_size > (32ull << 20)) {
    PlannerRequest small_chunks = r;
    small_chunks.constants.chunk_size = 32ull << 20;
    const Plan s = smallest_footprint(small_chunks);
    if (fits(r, s)) {
      lines.push_back("offload.chunk_size 32MiB: smaller chunks in flight (smallest footprint then " +
                      format_bytes_approx(s.memory.device_total()) + ")");
    }
  }
  if (lines.size() == 1 && r.shape.seq_len > 16) {
    // No single change is enough: try them together (LoRA, small chunks, shorter sequences).
    PlannerRequest together = r;
    if (together.shape.lora_rank == 0) together.shape.lora_rank = 8;
    together.constants.chunk_size = std::min<uint64_t>(r.constants.chunk_size == 0 ? ~0ull : r.constants.chunk_size,
                                                       32ull << 20);
    for (int64_t seq = r.shape.seq_len / 2; seq >= 16; seq /= 2) {
      together.shape.seq_len = seq;
      const Plan s = smallest_footprint(together);
      if (fits(r, s)) {
        lines.push_back("together: LoRA (lora.rank " + std::to_string(together.shape.lora_rank) +
                        "), offload.chunk_size 32MiB and data.max_length " + std::to_string(seq) +
                        " (smallest footprint then " + format_bytes_approx(s.memory.device_total()) + ")");
        break;
      }
    }
  }
  const bool fixed_policy = r.policies.size() == 1;
  if (fixed_policy || !r.search_micro_batch || !r.search_checkpointing) {
    PlannerRequest automatic = r;
    automatic.policies = {OffloadPolicy::none, OffloadPolicy::optimizer, OffloadPolicy::params};
    automatic.search_micro_batch = automatic.search_checkpointing = automatic.search_kept_chunks = true;
    const Plan s = smallest_footprint(automatic);
    if (fits(r, s)) {
      lines.push_back("offload.policy auto (lets the planner offload, checkpoint and shrink the micro-batch; "
                      "smallest footprint then " + format_bytes_approx(s.memory.device_total()) + ")");
    }
  }
  return lines;
}

std::string range_text(const std::vector<int64_t>& layers) {
  // "layers 0-3, 7" from a sorted list.
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(layers[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(layers[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

int64_t Plan::checkpointed_layers() const {
  return std::count(choice.layer_checkpointed.begin(), choice.layer_checkpointed.end(), true);
}

std::string Plan::describe_checkpointing() const {
  std::string text = "activation checkpointing on " + std::to_string(checkpointed_layers()) + " of " +
                     std::to_string(choice.layer_checkpointed.size()) + " layers";
  if (choice.activation_offload && checkpointed_layers() > 0) text += ", their inputs offloaded to host memory";
  return text;
}

int64_t Plan::kept_chunks() const {
  return std::count(choice.chunk_on_device.begin(), choice.chunk_on_device.end(), true);
}

Plan smallest_footprint(const PlannerRequest& request) {
  const ResolvedRates rates = resolve_rates(request.rates, request.shape.precision, request.shape.state_on_nvme || request.shape.weights_on_nvme);
  std::optional<Plan> smallest;
  for_each_candidate(request, rates, /*smallest_micro_batch_only=*/true, [&](const Plan& p) {
    if (!smallest || smaller_footprint(p, *smallest)) smallest = p;
  });
  return *smallest;
}

PlanResult plan(const PlannerRequest& request) {
  FERRY_CHECK(request.device_budget > 0, "the planner needs a device budget");
  PlanResult result;
  result.rates = resolve_rates(request.rates, request.shape.precision, request.shape.state_on_nvme || request.shape.weights_on_nvme);
  std::optional<Plan> smallest;
  result.candidates = for_each_candidate(request, result.rates, /*smallest_micro_batch_only=*/false, [&](const Plan& p) {
    if (!smallest || smaller_footprint(p, *smallest)) smallest = p;
    if (fits_device(request, p) &&
        (!result.smallest_host || p.memory.host_total() < result.smallest_host->memory.host_total())) {
      result.smallest_host = p;
    }
    if (fits(request, p) && (!result.best || faster(p, *result.best))) result.best = p;
  });
  result.smallest = *smallest;
  if (!result.best && !result.smallest_host) result.suggestions = suggestions_for(request, result.smallest);
  if (!result.best && result.smallest_host && request.shape.lora_rank == 0) {
    PlannerRequest lora = request;
    lora.shape.lora_rank = 8;
    const PlanResult with_lora = plan(lora);
    if (with_lora.best) {
      result.suggestions.push_back("LoRA instead of full fine-tuning, e.g. lora.rank 8 (host footprint then " +
                                   format_bytes_approx(with_lora.best->memory.host_total()) + ")");
    }
  }
  if (!result.best && result.smallest_host && request.shape.base == BaseFormat::compute_dtype) {
    PlannerRequest qlora = request;
    if (qlora.shape.lora_rank == 0) qlora.shape.lora_rank = 8;
    qlora.shape.base = BaseFormat::nf4_double_quant;
    const PlanResult with_qlora = plan(qlora);
    if (with_qlora.best) {
      result.suggestions.push_back(std::string("QLoRA: the frozen base in 4 bits, lora.quantize_base nf4") +
                                   (request.shape.lora_rank == 0 ? " with lora.rank 8" : "") +
                                   " (host footprint then " +
                                   format_bytes_approx(with_qlora.best->memory.host_total()) + ")");
    }
  }
  return result;
}

std::string describe_kept_chunks(const MemoryModel& model, const PlacementChoice& choice) {
  const auto& chunks = model.layout().chunks();
  const int64_t num_layers = model.shape().model.num_hidden_layers;
  auto describe = [&](bool on_device) {
    bool embedding = false, head = false;
    std::vector<int64_t> layers;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const bool kept = choice.policy != OffloadPolicy::params ||
                        (!choice.chunk_on_device.empty() && choice.chunk_on_device[c]);
      if (kept != on_device) continue;
      for (int64_t g = chunks[c].first_group; g <= chunks[c].last_group; ++g) {
        if (g == embedding_group()) embedding = true;
        else if (g == head_group(model.shape().model)) head = true;
        else if (layers.empty() || layers.back() != g - 1) layers.push_back(g - 1);
      }
    }
    std::string out;
    if (embedding) out += "embedding";
    if (!layers.empty()) {
      if (!out.empty()) out += ", ";
      if (static_cast<int64_t>(layers.size()) == num_layers) {
        out += "all layers";
      } else {
        out += "layers ";
        out += range_text(layers);
      }
    }
    if (head) {
      if (!out.empty()) out += ", ";
      out += "final norm + head";
    }
    return out.empty() ? std::string("nothing") : out;
  };
  return "on the device: " + describe(true) + "; paged from the host: " + describe(false);
}

int64_t largest_model_for_host(const MemoryModel& model, const Plan& plan, uint64_t host_budget) {
  const double per_parameter =
      static_cast<double>(plan.memory.host_total()) / static_cast<double>(std::max<int64_t>(model.base_parameters(), 1));
  return per_parameter > 0 ? static_cast<int64_t>(static_cast<double>(host_budget) / per_parameter) : 0;
}

std::string describe_state_formats(const PlannerRequest& request, const Plan& plan) {
  struct Variant {
    const char* name;
    MomentFormat moments;
    MasterFormat master;
  };
  std::ostringstream out;
  for (const Variant& v : {Variant{"fp32 master, fp32 moments      ", MomentFormat::fp32, MasterFormat::fp32},
                           Variant{"fp32 master, int8 moments      ", MomentFormat::int8, MasterFormat::fp32},
                           Variant{"bf16+Kahan master, int8 moments", MomentFormat::int8, MasterFormat::bf16_kahan},
                           Variant{"bf16 stochastic,   int8 moments", MomentFormat::int8, MasterFormat::bf16_stochastic}}) {
    TrainingShape shape = request.shape;
    shape.moments = v.moments;
    shape.master = v.master;
    shape.grad_accumulation = plan.grad_accumulation;
    const MemoryModel model(shape, request.constants);
    Plan variant = plan;
    variant.memory = model.estimate(plan.choice);
    const uint64_t host = variant.memory.host_total();
    char per_parameter[32];
    std::snprintf(per_parameter, sizeof(per_parameter), "%.1f",
                  static_cast<double>(host) / static_cast<double>(std::max<int64_t>(model.base_parameters(), 1)));
    out << "  " << v.name << "  host " << format_bytes_approx(host) << " (" << per_parameter << " B/param)";
    if (request.host_budget > 0) {
      char billions[32];
      std::snprintf(billions, sizeof(billions), "%.2f",
                    static_cast<double>(largest_model_for_host(model, variant, request.host_budget)) / 1e9);
      out << (host <= request.host_budget ? ": fits" : ": over") << " the host budget; largest model that fits: ~"
          << billions << " B parameters";
    }
    out << "\n";
  }
  return out.str();
}

std::string explain_no_fit(const PlannerRequest& request, const PlanResult& result) {
  std::ostringstream out;
  if (result.smallest_host) {  // the device budget can be met; the host's cannot
    const Plan& h = *result.smallest_host;
    const MemoryModel model(request.shape, request.constants);
    out << "no plan fits the host budget of " << format_bytes_approx(request.host_budget)
        << " (offload.host_memory): the smallest host footprint of a plan that fits the device is "
        << format_bytes_approx(h.memory.host_total()) << " (policy " << enum_name(h.choice.policy) << ")\n";
    for (MemoryCategory category : kAllMemoryCategories) {
      const uint64_t bytes = h.memory.bytes.at(MemoryTier::host, category);
      if (bytes == 0) continue;
      std::string name(memory_category_name(category));
      name.resize(12, ' ');
      out << "  " << name << format_bytes_approx(bytes) << "\n";
    }
    const int64_t largest = largest_model_for_host(model, h, request.host_budget);
    char billions[32];
    std::snprintf(billions, sizeof(billions), "%.2f", static_cast<double>(largest) / 1e9);
    out << "the largest model that would fit " << format_bytes_approx(request.host_budget) << " of host memory this way: "
        << "about " << billions << " B parameters (this one has " << std::to_string(model.base_parameters() / 1000000)
        << " M)\nwhat would make it fit:\n  - more host memory: offload.host_memory "
        << format_bytes_approx(h.memory.host_total()) << " or more (0: what /proc/meminfo says is available, less 10%)";
    for (const std::string& line : result.suggestions) out << "\n  - " << line;
    out << "\nhost bytes of that plan by optimizer-state format (int8 moments: offload.optimizer_state int8; "
           "bf16 + Kahan master weights: offload.master_weights bf16_kahan; no master copy: bf16_stochastic):\n"
        << describe_state_formats(request, h);
    return out.str();
  }
  const Plan& s = result.smallest;
  out << "no plan fits a device budget of " << format_bytes_approx(request.device_budget)
      << ": the smallest device footprint is " << format_bytes_approx(s.memory.device_total()) << " (policy "
      << enum_name(s.choice.policy) << ", micro-batch " << s.choice.micro_batch_size << " x " << s.grad_accumulation
      << " accumulation, " << s.describe_checkpointing() << ")\n";
  for (MemoryCategory category : kAllMemoryCategories) {
    const uint64_t bytes = s.memory.bytes.at(MemoryTier::device, category);
    if (bytes == 0) continue;
    std::string name(memory_category_name(category));
    name.resize(12, ' ');
    out << "  " << name << format_bytes_approx(bytes);
    if (category == MemoryCategory::buffers) out << " (CUDA context, workspaces, allocator slack)";
    if (category == MemoryCategory::activations) {
      out << " (" << request.shape.seq_len << " tokens x micro-batch " << s.choice.micro_batch_size << ")";
    }
    if (category == MemoryCategory::weights && s.choice.policy == OffloadPolicy::params) {
      out << " (chunks in flight: the one in use + " << request.constants.prefetch << " prefetched)";
    }
    out << "\n";
  }
  if (!result.suggestions.empty()) {
    out << "what would make it fit:";
    for (const std::string& line : result.suggestions) out << "\n  - " << line;
  }
  return out.str();
}

}  // namespace ferry::offload
