// The sweep's keys from [sweep] and --grid/--zip: the tasks they expand to,
// and each error at its position.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "sweep/collect.h"
#include "sweep/resolve.h"
#include "sweep/sbatch.h"
#include "sweep/sweep_spec.h"
#include "util/error.h"

namespace headroom {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// "zero.stage=2 lora.rank=8" for each task.
std::vector<std::string> described(const std::vector<SweepTask>& tasks) {
  std::vector<std::string> out;
  for (const SweepTask& t : tasks)
    out.push_back(t.describe());
  return out;
}

TEST(SweepSpec, GridIsTheProductFirstKeySlowest) {
  const SweepSpec spec = parse_sweep_table(
      "[run]\nsteps = 2\n\n[sweep]\n\"zero.stage\" = [2, 3]\n\"lora.rank\" = [8, 16, 64]\n",
      "exp.toml");
  ASSERT_EQ(spec.grid.size(), 2u);
  EXPECT_EQ(spec.num_tasks(), 6u);
  EXPECT_EQ(described(expand_sweep(spec)),
            (std::vector<std::string>{"zero.stage=2 lora.rank=8", "zero.stage=2 lora.rank=16",
                                      "zero.stage=2 lora.rank=64", "zero.stage=3 lora.rank=8",
                                      "zero.stage=3 lora.rank=16", "zero.stage=3 lora.rank=64"}));
}

TEST(SweepSpec, KeysKeepFileOrderNotAlphabetical) {
  // toml++ sorts a table's keys; the axes follow the file.
  const SweepSpec spec =
      parse_sweep_table("[sweep]\n\"zero.stage\" = [1]\n\"batch.grad_accum\" = [1]\n", "x.toml");
  ASSERT_EQ(spec.grid.size(), 2u);
  EXPECT_EQ(spec.grid[0].name, "zero.stage");
  EXPECT_EQ(spec.grid[1].name, "batch.grad_accum");
}

TEST(SweepSpec, DottedKeysReadAsQuotedOnes) {
  const SweepSpec spec =
      parse_sweep_table("[sweep]\nzero.stage = [0, 1]\nattention.mask = [\"causal\"]\n", "x.toml");
  ASSERT_EQ(spec.grid.size(), 2u);
  EXPECT_EQ(spec.grid[0].name, "zero.stage");
  EXPECT_EQ(spec.grid[1].name, "attention.mask");
  EXPECT_EQ(spec.grid[1].values[0].text, "\"causal\"");
}

TEST(SweepSpec, ZipVariesTogetherTimesTheGrid) {
  const SweepSpec spec = parse_sweep_table(
      "[sweep]\n\"zero.stage\" = [0, 1]\n[sweep.zip]\n\"optimizer.lr\" = [1e-3, 3e-4, 1e-4]\n"
      "\"schedule.warmup_steps\" = [1, 2, 3]\n",
      "x.toml");
  EXPECT_EQ(spec.num_tasks(), 6u);
  const std::vector<SweepTask> tasks = expand_sweep(spec);
  EXPECT_EQ(tasks[0].describe(), "zero.stage=0 optimizer.lr=0.001 schedule.warmup_steps=1");
  EXPECT_EQ(tasks[2].describe(), "zero.stage=0 optimizer.lr=0.0001 schedule.warmup_steps=3");
  EXPECT_EQ(tasks[4].describe(), "zero.stage=1 optimizer.lr=0.0003 schedule.warmup_steps=2");
  EXPECT_EQ(tasks[4].overrides(), (std::vector<std::string>{"zero.stage=1", "optimizer.lr=0.0003",
                                                            "schedule.warmup_steps=2"}));
}

TEST(SweepSpec, UnknownKeyIsNamedAtItsPosition) {
  EXPECT_EQ(error_of([] {
              parse_sweep_table("[run]\nsteps = 2\n[sweep]\n\"zero.stag\" = [1, 2]\n", "exp.toml");
            }),
            "exp.toml:4:1: sweep: zero.stag: unknown key (did you mean \"zero.stage\"?)");
  EXPECT_EQ(error_of([] { parse_sweep_table("[sweep.zip]\n\"run.lr\" = [1.0]\n", "e.toml"); }),
            "e.toml:2:1: sweep.zip: run.lr: unknown key (did you mean \"optimizer.lr\"?)");
}

TEST(SweepSpec, BadValueIsNamedAtItsPosition) {
  const std::string error =
      error_of([] { parse_sweep_table("[sweep]\n\"zero.stage\" = [2, 7]\n", "exp.toml"); });
  EXPECT_EQ(error.rfind("exp.toml:2:20: sweep: zero.stage = 7: expected an integer in 0..3", 0), 0u)
      << error;
  EXPECT_NE(error_of([] {
              parse_sweep_table("[sweep]\n\"zero.stage\" = 2\n", "e.toml");
            }).find("e.toml:2:16: sweep: zero.stage: expected a non-empty list"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_sweep_table("[sweep]\n\"run.name\" = [\"a\", \"b\"]\n", "e.toml");
            }).find("e.toml:2:1: sweep: run.name: set by the sweep"),
            std::string::npos);
}

TEST(SweepSpec, ZipListsMustBeEquallyLong) {
  const std::string error = error_of([] {
    parse_sweep_table("[sweep.zip]\n\"optimizer.lr\" = [1e-3, 3e-4]\n\"zero.stage\" = [0]\n",
                      "e.toml");
  });
  EXPECT_NE(error.find("e.toml:3:1: sweep.zip: zero.stage has 1 values, but optimizer.lr"),
            std::string::npos)
      << error;
}

TEST(SweepSpec, SlurmShapeIsChecked) {
  const SweepSpec spec = parse_sweep_table(
      "[sweep.slurm]\nnodes = 2\ntasks_per_node = 4\ntime = \"01:00:00\"\noptions = "
      "[\"--qos=high\"]\n",
      "e.toml");
  EXPECT_EQ(spec.slurm.ranks(), 8);
  EXPECT_EQ(spec.slurm.time, "01:00:00");
  EXPECT_EQ(spec.slurm.options, std::vector<std::string>{"--qos=high"});
  EXPECT_NE(error_of([] {
              parse_sweep_table("[sweep.slurm]\nnode = 2\n", "e.toml");
            }).find("e.toml:2:1: sweep.slurm: node: unknown key (did you mean \"nodes\"?)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_sweep_table("[sweep.slurm]\nnodes = 0\n", "e.toml");
            }).find("e.toml:2:9: sweep.slurm: nodes: expected an integer in 1..65536"),
            std::string::npos);
}

TEST(SweepArguments, GridAndZipFromTheCommandLine) {
  SweepSpec spec = parse_sweep_table("[sweep]\n\"zero.stage\" = [0, 1, 2]\n", "e.toml");
  add_sweep_arguments(spec,
                      {"zero.stage=2,3", "lora.targets=[\"q_proj\", \"v_proj\"],[\"o_proj\"]"},
                      {"optimizer.lr=1e-3, 3e-4", "schedule.warmup_steps=1,2"});
  ASSERT_EQ(spec.grid.size(), 2u);
  // The command line's list replaces the file's.
  EXPECT_EQ(spec.grid[0].values.size(), 2u);
  EXPECT_EQ(spec.grid[0].values[1].text, "3");
  ASSERT_EQ(spec.grid[1].values.size(), 2u);
  EXPECT_EQ(spec.grid[1].values[0].text, "[\"q_proj\", \"v_proj\"]");
  EXPECT_EQ(spec.num_tasks(), 8u);
  EXPECT_EQ(spec.zip[0].values[1].text, "0.0003");
  // A bare word is a string, as --set reads it.
  add_sweep_arguments(spec, {"attention.mask=causal,document"}, {});
  EXPECT_EQ(spec.grid[2].values[1].text, "\"document\"");
}

TEST(SweepArguments, ErrorsNameTheArgument) {
  SweepSpec spec;
  EXPECT_EQ(error_of([&] { add_sweep_arguments(spec, {"zero.stag=1,2"}, {}); }),
            "--grid zero.stag=1,2: zero.stag: unknown key (did you mean \"zero.stage\"?)");
  EXPECT_EQ(error_of([&] {
              add_sweep_arguments(spec, {"zero.stage=1,9"}, {});
            }).rfind("--grid zero.stage=1,9: zero.stage = 9: expected an integer in 0..3", 0),
            0u);
  EXPECT_NE(error_of([&] {
              add_sweep_arguments(spec, {"zero.stage"}, {});
            }).find("expected section.key=value,value"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { add_sweep_arguments(spec, {"zero.stage=1,,2"}, {}); }).find("an empty value"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              add_sweep_arguments(spec, {}, {"optimizer.lr=1e-3,3e-4", "zero.stage=0"});
            }).find("--zip zero.stage=0: zero.stage has 1 values, but optimizer.lr"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              add_sweep_arguments(spec, {"zero.stage=0"}, {"zero.stage=1"});
            }).find("vary a key in one place"),
            std::string::npos);
}

TEST(SweepResolve, EveryTaskIsLoadedWithItsOwnName) {
  const std::string text = "[run]\nname = \"base\"\nsteps = 20\n[sweep]\n\"zero.stage\" = [0, 1]\n";
  const SweepSpec spec = parse_sweep_table(text, "e.toml");
  const std::vector<ResolvedTask> tasks =
      resolve_sweep_tasks(text, "e.toml", {"run.steps=30"}, expand_sweep(spec), "/s/runs", {});
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].config.run.name, "base-000");
  EXPECT_EQ(tasks[1].config.run.name, "base-001");
  EXPECT_EQ(tasks[1].config.run.out_dir, "/s/runs");
  EXPECT_EQ(tasks[1].config.zero.stage, 1);
  EXPECT_EQ(tasks[1].config.run.steps, 30);
  // The resolved config holds no [sweep]: it loads as a plain experiment.
  EXPECT_EQ(load_config_string(to_toml(tasks[1].config), "t.toml"), tasks[1].config);
}

TEST(SweepResolve, ARuleBetweenKeysNamesTheTask) {
  // Warm-up longer than the run: only the task that sets it fails.
  const std::string text = "[run]\nsteps = 10\n[sweep]\n\"schedule.warmup_steps\" = [1, 50]\n";
  const SweepSpec spec = parse_sweep_table(text, "e.toml");
  const std::string error =
      error_of([&] { resolve_sweep_tasks(text, "e.toml", {}, expand_sweep(spec), "/s/runs", {}); });
  EXPECT_EQ(error.rfind("task 001 (schedule.warmup_steps=50): ", 0), 0u) << error;
  EXPECT_EQ(error.find("task 000"), std::string::npos) << error;
}

TEST(SweepTable, TrainAndPlanRefuseItTheSweepSkipsIt) {
  const std::string text = "[run]\nsteps = 20\n\n[sweep]\n\"zero.stage\" = [0, 1]\n";
  const std::string error = error_of([&] { load_config_string(text, "e.toml"); });
  EXPECT_EQ(error.rfind("e.toml:4:1: [sweep]: this file describes a sweep, not one run", 0), 0u)
      << error;
  EXPECT_EQ(load_config_string(text, "e.toml", {}, SweepTable::kSkip).run.steps, 20);
  // A typo of the table is a typo, with the suggestion.
  EXPECT_NE(error_of([] {
              load_config_string("[swep]\n", "e.toml");
            }).find("unknown section (did you mean \"sweep\"?)"),
            std::string::npos);
}

TEST(Sbatch, ArrayListsRangesAndTheCap) {
  EXPECT_EQ(array_spec({0, 1, 2, 5, 7, 8, 9}, 3), "0-2,5,7-9%3");
  EXPECT_EQ(array_spec({0, 1}, 0), "0,1");
  EXPECT_EQ(array_spec({4}, 2), "4%2");
}

TEST(Sbatch, TemplateGetsTheJobShapeSignalAndRequeue) {
  SbatchParams p;
  p.dir = "/s/sweep";
  p.workdir = "/s";
  p.job_name = "headroom-sweep";
  p.headroom = "/bin/headroom";
  p.tasks = {0, 2, 3};
  p.parallel = 2;
  p.shape.nodes = 2;
  p.shape.tasks_per_node = 4;
  p.cuda = true;
  p.signal_lead = 90;
  p.max_requeues = 2;
  p.train_options = {"--set", "checkpoint.resume=auto"};
  const std::string script = render_sbatch(embedded_sbatch_template(), p);
  for (const char* line :
       {"#SBATCH --array=0,2,3%2\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=4\n",
        "#SBATCH --gpus-per-task=1\n", "#SBATCH --requeue\n", "#SBATCH --signal=USR2@90\n",
        "#SBATCH --chdir=/s\n", "max_requeues=2\n",
        "srun --mpi=pmix /bin/headroom train \"$sweep/tasks/$task.toml\" --set "
        "checkpoint.resume=auto",
        "scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\""})
    EXPECT_NE(script.find(line), std::string::npos) << line << "\n" << script;
  EXPECT_EQ(script.find("{{"), std::string::npos);
  p.dir = "/s/my sweep";
  EXPECT_NE(error_of([&] { render_sbatch(embedded_sbatch_template(), p); }).find("whitespace"),
            std::string::npos);
}

TEST(SlurmStates, SacctAndSqueueLines) {
  const std::map<int, SlurmTaskState> states = parse_slurm_states(
      "17_0|COMPLETED|0:0\n17_0.batch|COMPLETED|0:0\n17_1|FAILED|3:0\n"
      "17_[2-3%2]|PENDING|0:0\n18_0|RUNNING|0:0\n17_4|CANCELLED by 0|0:15\n",
      "17");
  ASSERT_EQ(states.size(), 5u);
  EXPECT_EQ(states.at(0).state, "COMPLETED");
  EXPECT_EQ(states.at(1).exit_code, 3);
  EXPECT_EQ(states.at(3).state, "PENDING");
  EXPECT_EQ(states.at(4).state, "CANCELLED");
  EXPECT_EQ(outcome_of_exit_code(3), "out of memory");
  EXPECT_EQ(outcome_of_exit_code(5), "preempted");
}

}  // namespace
}  // namespace headroom
