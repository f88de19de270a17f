// `headroom sweep`: a tiny experiment swept on the real binary; one task
// made not to fit (memory.device_capacity) is planned, shown and left out.
#include <nlohmann/json.hpp>

#include "cli_harness.h"
#include "config/config.h"

namespace headroom {
namespace {

using headroom::testing::Result;
using headroom::testing::slurp;

class SweepCli : public headroom::testing::ScratchFolder {};

constexpr const char* kExperiment = R"([run]
name = "tiny"
steps = 2

[data]
path = "data/markov.h5"
synthesize_if_missing = true
synthetic_documents = 40

[batch]
max_tokens_per_micro_batch = 256

[loss]
chunk_size = 128

[schedule]
warmup_steps = 1

[memory]
device_capacity = "2GiB"

[sweep]
"zero.stage" = [0, 1]

[sweep.zip]
"optimizer.lr" = [1e-3, 3e-4, 1e-4]
"memory.device_capacity" = ["2GiB", "1MiB", "2GiB"]
)";

TEST_F(SweepCli, PlansEveryTaskAndLeavesOutTheOnesThatDoNotFit) {
  write("exp.toml", kExperiment);
  const Result r = run_headroom("sweep exp.toml --out sw --parallel 2 --signal-lead 60");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // 2 x 3 tasks; the 1 MiB ones (001, 004) do not fit.
  EXPECT_NE(r.out.find("6 tasks of exp.toml, 1 rank each"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("task zero.stage optimizer.lr memory.device_capacity planned peak"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  001  0          0.0003       1MiB                   0 B"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("NO: OUT OF MEMORY in initialization (init, 512.0 KiB for embed.params) "
                       "(left out)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  005  1          0.0001       2GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--array=0,2,3,5%2 (4 tasks, 2 left out: they do not fit)"),
            std::string::npos)
      << r.out;

  // Task files: resolved configs that load as plain experiments.
  for (int i = 0; i < 6; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "sw/tasks/%03d.toml", i);
    ASSERT_TRUE(std::filesystem::exists(dir_ / name)) << name;
  }
  const ExperimentConfig task4 = load_config_file((dir_ / "sw/tasks/004.toml").string());
  EXPECT_EQ(task4.run.name, "tiny-004");
  EXPECT_EQ(task4.run.out_dir, (dir_ / "sw/runs").string());
  EXPECT_EQ(task4.zero.stage, 1);
  EXPECT_EQ(task4.optimizer.lr, 3e-4);
  EXPECT_EQ(task4.memory.device_capacity, uint64_t{1} << 20);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sw/tasks/006.toml"));
  // Each task's plan is in its own run folder.
  EXPECT_TRUE(std::filesystem::exists(dir_ / "sw/runs/tiny-003/plan.rank0.h5"));

  const nlohmann::json m = nlohmann::json::parse(slurp(dir_ / "sw/manifest.json"));
  EXPECT_EQ(m["keys"], (nlohmann::json{"zero.stage", "optimizer.lr", "memory.device_capacity"}));
  EXPECT_EQ(m["array"], "0,2,3,5%2");
  EXPECT_EQ(m["job_id"], "");
  ASSERT_EQ(m["tasks"].size(), 6u);
  for (int i = 0; i < 6; ++i) {
    const nlohmann::json& t = m["tasks"][static_cast<size_t>(i)];
    const bool fits = i != 1 && i != 4;
    EXPECT_EQ(t["in_array"], fits) << i;
    EXPECT_EQ(t["plan"]["fits"], fits) << i;
    EXPECT_EQ(t["run_name"], "tiny-00" + std::to_string(i));
    const nlohmann::json& rank0 = t["plan"]["ranks"][0];
    if (fits) {
      EXPECT_GT(rank0["peak_reserved_bytes"].get<uint64_t>(), uint64_t{1} << 20) << i;
      EXPECT_EQ(t["plan"]["capacity_bytes"], uint64_t{2} << 30);
    } else {
      EXPECT_EQ(rank0["oom_tag"], "embed.params") << i;
    }
  }
  EXPECT_EQ(m["tasks"][4]["values"][1]["value"], "0.0003");

  const std::string script = slurp(dir_ / "sw/sweep.sbatch");
  EXPECT_NE(script.find("#SBATCH --array=0,2,3,5%2\n"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --signal=USR2@60\n"), std::string::npos);
  EXPECT_NE(script.find("#SBATCH --requeue\n"), std::string::npos);

  // Nothing ran yet: collect says so, and shows the plans.
  const Result c = run_headroom("sweep collect sw");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("not in array"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("not run"), std::string::npos) << c.out;

  // A task trained by hand is collected from its run folder.
  ASSERT_EQ(run_headroom("train sw/tasks/000.toml").code, 0);
  write("sw/status/000.exit", "2026-01-01T00:00:00Z job=1_0 restart=0 rc=0\n");
  const Result csv = run_headroom("sweep collect sw --csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("task,zero.stage,optimizer.lr,memory.device_capacity,outcome,steps,", 0),
            0u)
      << csv.out;
  EXPECT_NE(csv.out.find("\n000,0,0.001,2GiB,ok,2,"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find("\n001,0,0.0003,1MiB,not in array,0,"), std::string::npos) << csv.out;

  // The same folder again needs --overwrite.
  const Result again = run_headroom("sweep exp.toml --out sw");
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("holds a sweep already"), std::string::npos) << again.err;
}

TEST_F(SweepCli, BadKeysAndValuesAreUsageErrors) {
  write("exp.toml", std::string(kExperiment) + "\"zero.stag\" = [1]\n");
  Result r = run_headroom("sweep exp.toml --out sw");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exp.toml:28:1: sweep.zip: zero.stag: unknown key (did you mean "
                       "\"zero.stage\"?)"),
            std::string::npos)
      << r.err;
  write("exp.toml", kExperiment);
  r = run_headroom("sweep exp.toml --out sw --grid batch.grad_accum=1,0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--grid batch.grad_accum=1,0: batch.grad_accum = 0: expected"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sw")) << "nothing is written for a bad sweep";
  // train and plan refuse a file with a [sweep] table.
  r = run_headroom("plan exp.toml");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exp.toml:22:1: [sweep]: this file describes a sweep"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace headroom
