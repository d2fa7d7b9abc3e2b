// `ferry train-distill` end to end on the demo shapes: a teacher (a short SFT run of the demo
// model) and a student a quarter of its size. The teacher paged under a device budget smaller than
// teacher and student together gives `none`'s losses with the engine's peak within the budget; a
// resumed run repeats the on-policy draws and samples (the same losses as one straight run); a
// teacher with another vocabulary and a missing teacher are refused (exit 2); `ferry plan` counts
// the teacher.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/integration/ferry_process.h"
#include "tests/run_output.h"

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

const fs::path& base_dir() {
  static const fs::path dir = ferry_test::process_temp_dir("ferry_distill_cli");
  return dir;
}

class DistillCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(base_dir());
    const Result r = run_ferry("train-sft --config configs/demo-sft.yaml --set output.dir=" + (base_dir() / "teacher").string() +
                               " --set data.max_samples=64 --set data.eval_file= --set train.micro_batch_size=8"
                               " --set train.max_steps=3 --set train.device=cpu --set logging.progress=never");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(base_dir()); }

  static fs::path teacher() { return base_dir() / "teacher" / "final"; }
  static std::string run(const std::string& name, const std::string& extra = "") {
    return "train-distill --config configs/demo-distill.yaml --set distill.teacher_model=" + teacher().string() +
           " --set output.dir=" + (base_dir() / name).string() +
           " --set data.max_samples=64 --set data.eval_file= --set train.micro_batch_size=1 --set train.max_steps=4"
           " --set train.warmup_steps=0 --set train.eval_every=0 --set generation.max_new_tokens=6"
           " --set train.device=cpu --set logging.progress=never" + extra;
  }
};

// The values of `key` logged in metrics.jsonl, in order.
std::vector<double> logged(const fs::path& metrics, const std::string& key) {
  return ferry_test::jsonl_values(metrics, key);
}

TEST_F(DistillCli, PagedTeacherUnderASmallerBudgetGivesNonesLosses) {
  const Result none = run_ferry(run("none"));
  ASSERT_EQ(none.exit_code, 0) << none.output;
  const std::vector<double> losses = logged(base_dir() / "none" / "metrics.jsonl", "loss");
  ASSERT_EQ(losses.size(), 4u);
  // The budget is below the two models' weights together.
  const uint64_t budget = 5ull << 20;
  const uint64_t teacher_bytes = fs::file_size(teacher() / "model.safetensors");
  const uint64_t student_bytes = fs::file_size(base_dir() / "none" / "final" / "model.safetensors");
  ASSERT_GT(teacher_bytes + student_bytes, budget);
  ASSERT_GT(teacher_bytes, 3 * student_bytes) << "the teacher is about 4x the student";
  const Result paged = run_ferry(run("paged", " --set offload.policy=params --set offload.gpu_memory=5MiB"));
  ASSERT_EQ(paged.exit_code, 0) << paged.output;
  EXPECT_EQ(paged.output.find("over offload.gpu_memory"), std::string::npos) << paged.output;
  const std::vector<double> paged_losses = logged(base_dir() / "paged" / "metrics.jsonl", "loss");
  ASSERT_EQ(paged_losses.size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(paged_losses[i], losses[i], 1e-6) << "step " << i + 1;
  const auto figures = ferry_test::result_figures(base_dir() / "paged");
  EXPECT_LE(figures.at("engine_device_peak_bytes").get<uint64_t>(), budget);
  EXPECT_GT(figures.at("engine_device_peak_bytes").get<uint64_t>(), 0u);
  // Both kinds of micro-batch ran: the student's own answers and the data's.
  const std::vector<double> on_policy = logged(base_dir() / "none" / "metrics.jsonl", "on_policy");
  ASSERT_EQ(on_policy.size(), 4u);
}

TEST_F(DistillCli, ResumeRepeatsTheDrawsAndTheSamples) {
  // A constant learning rate: a 2-step run's schedule would otherwise differ from a 4-step one's.
  const std::string constant = " --set train.lr_scheduler=constant";
  ASSERT_EQ(run_ferry(run("straight", constant)).exit_code, 0);
  const Result half = run_ferry(run("resumed", constant + " --set train.max_steps=2 --set train.save_every=2"));
  ASSERT_EQ(half.exit_code, 0) << half.output;
  const Result rest = run_ferry(run("resumed", constant + " --set train.resume=auto"));
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from"), std::string::npos) << rest.output;
  const std::vector<double> straight = logged(base_dir() / "straight" / "metrics.jsonl", "loss");
  const std::vector<double> resumed = logged(base_dir() / "resumed" / "metrics.jsonl", "loss");
  ASSERT_EQ(straight.size(), 4u);
  ASSERT_EQ(resumed.size(), 4u);
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_NEAR(resumed[i], straight[i], 1e-6) << "step " << i + 1;
  // The steps after the resume hold both kinds of micro-batch: the student's own answers and the data's.
  const std::vector<double> on_policy = logged(base_dir() / "straight" / "metrics.jsonl", "on_policy");
  ASSERT_EQ(on_policy.size(), 4u);
  EXPECT_NE(std::count(on_policy.begin() + 2, on_policy.end(), 1.0), 0) << "no on-policy step after the resume";
  EXPECT_NE(std::count(on_policy.begin(), on_policy.end(), 0.0), 0) << "no step on the data's answers";
}

TEST_F(DistillCli, RefusesATeacherWithAnotherTokenizerAndNoTeacher) {
  const fs::path other = base_dir() / "other_vocab";
  fs::create_directories(other);
  {
    std::ifstream in(teacher() / "config.json");
    std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = json.find("\"vocab_size\"");
    ASSERT_NE(at, std::string::npos);
    const auto end = json.find_first_of(",}", at);
    json.replace(at, end - at, "\"vocab_size\": 3000");
    std::ofstream(other / "config.json") << json;
  }
  const Result vocab = run_ferry(run("bad", " --set distill.teacher_model=" + other.string()));
  EXPECT_EQ(vocab.exit_code, 2) << vocab.output;
  EXPECT_NE(vocab.output.find("must share a tokenizer"), std::string::npos) << vocab.output;
  const Result none = run_ferry(run("bad", " --set distill.teacher_model="));
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("distill.teacher_model"), std::string::npos) << none.output;
}

TEST_F(DistillCli, PlanCountsTheTeacher) {
  const Result plan = run_ferry("plan --config configs/demo-distill.yaml --set distill.teacher_model=" +
                                teacher().string() + " --set offload.gpu_memory=1GiB");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("teacher: "), std::string::npos) << plan.output;
  EXPECT_NE(plan.output.find("the student is planned within the device budget less"), std::string::npos) << plan.output;
}

}  // namespace
