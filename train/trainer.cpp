// The training loop.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "core/error.h"
#include "train/backbone_runner.h"
#include "train/checkpoint_folders.h"
#include "train/diloco.h"
#include "train/loss_scaler.h"
#include "train/optimizer_step.h"
#include "train/lr_schedule.h"
#include "train/stop_signal.h"
#include "train/trainer_state.h"

namespace fs = std::filesystem;

namespace ferry {

const torch::Tensor& MicroBatch::at(const std::string& name) const {
  auto it = tensors.find(name);
  FERRY_CHECK(it != tensors.end(), "micro-batch has no tensor '", name, "'");
  return it->second;
}

Trainer::Trainer(const Config& config, offload::ParameterEngine& engine, BatchSource& data, TrainingObjective& objective,
                 TrainedModel model, std::ostream* console, MetricsLoggerOptions metrics_options)
    : config_(config),
      engine_(engine),
      data_(data),
      objective_(objective),
      model_(std::move(model)),
      console_(console != nullptr ? *console : std::cout),
      metrics_options_(std::move(metrics_options)),
      comm_(dist::process_communicator(config.distributed)),
      lifecycle_(config, engine, {CheckpointedModel{model_, ""}}, console_) {}

int64_t Trainer::micro_batches_per_step() const {
  return config_.train.grad_accumulation * (comm_ != nullptr ? comm_->size() : 1);
}

Trainer::~Trainer() = default;

bool Trainer::sharded_weights() const { return lifecycle_.sharded_weights(); }

int64_t Trainer::total_steps() const {
  const TrainConfig& t = config_.train;
  if (t.max_steps > 0) return t.max_steps;
  const int64_t per_step = micro_batches_per_step();
  const int64_t per_epoch = (data_.batches_per_epoch() + per_step - 1) / per_step;
  return std::max<int64_t>(1, per_epoch * t.epochs);
}

namespace {

// Adds `values` into `sums` by name (new names are appended in order).
void add_metric_values(MetricValues& sums, const MetricValues& values) {
  for (const MetricValue& v : values) {
    auto it = std::find_if(sums.begin(), sums.end(), [&](const MetricValue& s) { return s.name == v.name; });
    if (it == sums.end()) {
      sums.push_back(v);
    } else {
      it->value += v.value;
    }
  }
}

// `sum` and every extra value, each summed over the processes (one collective).
void sum_loss_over_processes(dist::Communicator& comm, double& sum, MetricValues& extra) {
  std::vector<double*> values{&sum};
  for (MetricValue& v : extra) values.push_back(&v.value);
  dist::sum_over_processes(values, &comm);
}

MetricValues divided(MetricValues values, double divisor) {
  for (MetricValue& v : values) v.value /= divisor;
  return values;
}

}  // namespace

std::optional<Evaluation> Trainer::evaluate() {
  const std::vector<MicroBatch> batches = data_.eval_batches();
  if (batches.empty()) return std::nullopt;
  torch::NoGradGuard no_grad;
  BackboneRunner runner(engine_, /*activation_checkpointing=*/false, config_.train.logits_chunk);
  // Data parallel: every process evaluates every WORLD_SIZE-th batch and the sums are added up
  // (when there are fewer batches than processes, each evaluates all of them).
  const int64_t world = comm_ != nullptr ? comm_->size() : 1;
  const int64_t rank = comm_ != nullptr ? comm_->rank() : 0;
  const bool sharded = world > 1 && static_cast<int64_t>(batches.size()) >= world;
  double sum = 0.0;
  MetricValues extra;
  int64_t weight = 0;
  int64_t evaluated = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    const MicroBatch& batch = batches[i];
    weight += batch.loss_weight;
    if (sharded && static_cast<int64_t>(i) % world != rank) continue;
    const LossSum loss = objective_.loss(batch, runner);
    sum += loss.sum.item<double>();
    add_metric_values(extra, loss.extra);
    ++evaluated;
  }
  // zero_stage 3 pages the weights in collectively: every process runs as many forwards, the
  // ones short of a batch repeating their last and discarding it.
  const int64_t per_process = sharded ? (static_cast<int64_t>(batches.size()) + world - 1) / world : 0;
  for (int64_t extra_pass = evaluated; sharded_weights() && extra_pass < per_process; ++extra_pass) {
    (void)objective_.loss(batches[static_cast<size_t>(rank)], runner);
  }
  if (sharded) sum_loss_over_processes(*comm_, sum, extra);
  const double units = static_cast<double>(std::max<int64_t>(weight, 1));
  return Evaluation{sum / units, divided(std::move(extra), units)};
}

void Trainer::evaluate_into(TrainResult& result, MetricsLogger& metrics, int64_t step) {
  const std::optional<Evaluation> evaluation = evaluate();
  if (!evaluation) return;
  result.eval_loss = evaluation->loss;
  result.eval_extra = evaluation->extra;
  MetricValues values{{"loss", evaluation->loss}};
  values.insert(values.end(), evaluation->extra.begin(), evaluation->extra.end());
  metrics.log_eval(step, values);
}

void Trainer::save_checkpoint(int64_t step, int64_t total, const LossScaler& scaler) {
  TrainerState state;
  state.step = step;
  state.total_steps = total;
  state.cursor = data_.cursor();
  state.loss_scaler = scaler.state();
  state.seed = config_.train.seed;
  // DiLoCo: every process's own inner optimizer state, rank R's in diloco-rank-R/ (ZeRO shards are
  // the lifecycle's default).
  RunLifecycle::FolderWriter more, own;
  if (diloco_) {
    more = [&](const fs::path& folder) { diloco_->save(folder); };
    own = [&](const fs::path& staging) {
      const fs::path dir = staging / ("diloco-rank-" + std::to_string(comm_->rank()));
      fs::create_directories(dir);
      engine_.save_state(dir);
    };
  }
  lifecycle_.save(state, more, std::move(own));
}

TrainResult Trainer::run() {
  const TrainConfig& t = config_.train;
  const fs::path output(config_.output.dir);
  const int64_t total = total_steps();
  const LrSchedulePlan plan{t.learning_rate, t.lr_scheduler, t.warmup_steps, total, t.min_lr_ratio};
  LossScaler scaler(t.precision == Precision::fp16, t.fp16_initial_scale);

  const bool diloco = comm_ != nullptr && comm_->size() > 1 && config_.distributed.mode == DistributedMode::diloco;
  int64_t step = 0;
  // DiLoCo: each process's own inner optimizer state, where the checkpoint has one for its rank.
  const std::optional<RunLifecycle::Resumed> resumed = lifecycle_.resume([&](const fs::path& folder) {
    const fs::path replica = diloco ? folder / ("diloco-rank-" + std::to_string(comm_->rank())) : fs::path();
    return diloco && fs::is_directory(replica) ? replica : folder;
  });
  const std::optional<fs::path> resume = resumed ? std::optional<fs::path>(resumed->folder) : std::nullopt;
  if (resumed) {
    const TrainerState& state = resumed->trainer;
    data_.restore(state.cursor);
    scaler.restore(state.loss_scaler);
    step = state.step;
    console_ << "resumed from " << resume->string() << " at step " << step << " of " << total << "\n";
    if (state.total_steps != total) {
      console_ << "note: the checkpoint's run had " << state.total_steps << " steps, this one has " << total
               << "; the learning-rate schedule follows this run's length\n";
    }
  }

  if (diloco) {
    diloco_ = std::make_unique<DiLoCo>(config_.distributed, *comm_, engine_, model_.name);
    diloco_->start();
    if (resume && fs::exists(*resume / DiLoCo::kStateFile)) {
      diloco_->load(*resume);
    } else if (resume) {
      console_ << "note: " << resume->string() << " was saved by a run without distributed.mode diloco: DiLoCo "
               << "starts here, from its weights, with no outer momentum\n";
    }
  }

  MetricsLoggerOptions metrics_options = metrics_options_;
  metrics_options.total_steps = total;
  if (step > 0) metrics_options.resume_step = step;
  const bool primary = comm_ == nullptr || comm_->rank() == 0;
  MetricsLogger metrics(logging_for_process(config_.logging, primary), output, metrics_options);
  const int64_t world = comm_ != nullptr ? comm_->size() : 1;
  const int64_t rank = comm_ != nullptr ? comm_->rank() : 0;
  StopSignal stop;
  BackboneRunner runner(engine_, t.gradient_checkpointing, t.logits_chunk);
  // On a CPU run the accountant's device peak then includes activations: everything a step holds.
  const std::unique_ptr<offload::ActivationMeter> meter = engine_.meter_activations();
  // offload.overlap_step (validated: no clipping, no fp16): the update starts during backward.
  const bool overlapped = config_.offload.overlap_step && engine_.overlaps_step() && comm_ == nullptr;
  if (config_.offload.overlap_step && !overlapped) {
    console_ << (comm_ != nullptr ? "note: offload.overlap_step has no effect in a data-parallel run (the update "
                                    "waits for the gradients of every process)\n"
                                  : "note: offload.overlap_step has no effect: the engine runs offload.policy none "
                                    "(the optimizer runs where the model does)\n");
  }

  TrainResult result;
  int64_t last_eval_step = -1;
  int64_t last_save_step = -1;
  while (step < total) {
    const auto started = std::chrono::steady_clock::now();
    engine_.zero_grad();
    const uint64_t sent_before = comm_ != nullptr ? comm_->payload_bytes() : 0;
    std::vector<MicroBatch> batches;  // this process's share of the step's micro-batches
    int64_t weight = 0, tokens = 0;    // over all of them
    int64_t own_weight = 0;            // over this process's share
    for (int64_t i = 0; i < micro_batches_per_step(); ++i) {
      MicroBatch batch = data_.next_train_batch();
      weight += batch.loss_weight;
      tokens += batch.tokens;
      if (i % world == rank) {
        own_weight += batch.loss_weight;
        batches.push_back(std::move(batch));
      }
    }
    // The loss of the step is the mean over all units of all its micro-batches (DiLoCo: of this
    // process's, which its own step follows).
    const double scale = scaler.scale();
    const double per_unit = 1.0 / static_cast<double>(std::max<int64_t>(diloco ? own_weight : weight, 1));
    const double lr = learning_rate_at(plan, step);
    double loss_sum = 0.0;
    MetricValues extra_sum;
    for (size_t i = 0; i < batches.size(); ++i) {
      const MicroBatch& batch = batches[i];
      if (i + 1 == batches.size() && comm_ == nullptr) {
        engine_.begin_last_backward(overlapped ? std::optional<double>(lr) : std::nullopt);
      }
      const LossSum loss = objective_.loss(batch, runner);
      // A Mixture of Experts adds its load-balancing loss, weighted by the micro-batch's share.
      const double share = static_cast<double>(batch.loss_weight) * per_unit;
      (runner.add_router_loss(loss.sum * per_unit, share) * scale).backward();
      loss_sum += loss.sum.item<double>();
      add_metric_values(extra_sum, loss.extra);
      add_metric_values(extra_sum, runner.router_metrics(static_cast<double>(batch.loss_weight)));
    }
    finish_step_gradients(engine_, comm_ != nullptr && !diloco);
    // The losses and the objective's extra values, summed over the processes too.
    if (comm_ != nullptr) sum_loss_over_processes(*comm_, loss_sum, extra_sum);
    OptimizerStep update;
    update.learning_rate = lr;
    update.max_grad_norm = t.max_grad_norm;
    update.scaler = &scaler;
    update.overlapped = overlapped;
    const OptimizerStepOutcome outcome = take_optimizer_step(engine_, update);
    const double grad_norm = outcome.grad_norm;
    if (!outcome.finite) {
      ++result.skipped_steps;
      if (overlapped) {
        console_ << "warning: step " << step + 1
                 << " has non-finite gradients; under offload.overlap_step the chunks updated during backward "
                    "before the first non-finite one keep their update, the rest were not updated\n";
      } else if (!scaler.enabled()) {
        console_ << "warning: step " << step + 1 << " has non-finite gradients; the update was skipped\n";
      }
    }
    ++step;
    if (diloco && (step % config_.distributed.inner_steps == 0 || step == total)) diloco_->synchronize();
    const double loss = loss_sum / static_cast<double>(std::max<int64_t>(weight, 1));
    result.last_loss = loss;
    result.last_extra = divided(std::move(extra_sum), static_cast<double>(std::max<int64_t>(weight, 1)));
    if (on_step) on_step(step, loss);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    MetricValues values{{"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm},
                        {"tokens_per_s", static_cast<double>(tokens) / std::max(seconds, 1e-9)}};
    if (scaler.enabled()) values.push_back({"loss_scale", scaler.scale()});
    if (comm_ != nullptr) values.push_back({"comm_bytes", static_cast<double>(comm_->payload_bytes() - sent_before)});
    values.insert(values.end(), result.last_extra.begin(), result.last_extra.end());
    metrics.log_train(step, values);

    if (t.eval_every > 0 && step % t.eval_every == 0) {
      evaluate_into(result, metrics, step);
      last_eval_step = step;
    }
    const bool stopping = stop.requested_by_any(comm_);  // a signal to any process stops them all
    if (stopping && diloco && step % config_.distributed.inner_steps != 0 && step != total) {
      console_ << "note: stopping between DiLoCo synchronisations: the processes take the outer step now, so "
                  "that the checkpoint holds weights they agree on\n";
      diloco_->synchronize();
    }
    if ((t.save_every > 0 && step % t.save_every == 0) || step == total || stopping) {
      save_checkpoint(step, total, scaler);
      last_save_step = step;
    }
    if (stopping) {
      const int signal_number = stop.reported_signal();
      console_ << "stopped by signal " << signal_number << " after step " << step << "; checkpoint "
               << checkpoint_folder(output, step).string() << " saved (resume with --set train.resume=auto)\n";
      result.stop_signal = signal_number;
      break;
    }
  }
  result.steps = step;
  if (!result.interrupted()) {
    if (last_eval_step != step) evaluate_into(result, metrics, step);
    if (last_save_step != step && step > 0) save_checkpoint(step, total, scaler);
    result.final_dir = lifecycle_.write_final(/*export_lora=*/false);
  }
  metrics.close();
  if (comm_ != nullptr) comm_->barrier();  // final/ is written before any process moves on
  return result;
}

}  // namespace ferry
