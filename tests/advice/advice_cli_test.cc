// The check of the advice: each seed experiment, pushed into the OOM
// its seed had, gets the knob that seed's authors finally used ranked among
// the first changes that fit; and the printed --set, applied, really fits.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_harness.h"
#include "test_util/source_tree.h"
#include "trace/oom_advice.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;
using testing::Result;

// The --set words of the rows of the "fits" table, in rank order.
std::vector<std::string> fitting_rows(const std::string& err) {
  std::vector<std::string> rows;
  std::istringstream in(err);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("  fits ")) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("  --set")) break;
    rows.push_back(line.substr(2));
  }
  return rows;
}

// The value after "cheapest that fits: ".
std::string cheapest(const std::string& err) {
  const std::string marker = "cheapest that fits: ";
  const size_t at = err.find(marker);
  if (at == std::string::npos) return "";
  return err.substr(at + marker.size(), err.find('\n', at) - at - marker.size());
}

bool in_first(const std::vector<std::string>& rows, size_t n, const std::string& set) {
  for (size_t i = 0; i < rows.size() && i < n; ++i)
    if (rows[i].find(set) != std::string::npos) return true;
  return false;
}

class SeedAdvice : public testing::ScratchFolder {
 protected:
  // Plans the seed experiment with `args`; expects an OOM with advice.
  Result plan_oom(const std::string& experiment, const std::string& args) {
    const Result r = run_headroom("plan '" + testing::source_dir() + "/experiments/postmortems/" +
                                  experiment + "' " + args);
    EXPECT_EQ(r.code, 3) << r.out << r.err;
    EXPECT_NE(r.err.find("what would fit:"), std::string::npos) << r.err;
    return r;
  }
  // Plans it again with the advice's first line applied: it must fit.
  void expect_cheapest_fits(const std::string& experiment, const std::string& args,
                            const Result& oom) {
    const std::string sets = cheapest(oom.err);
    ASSERT_FALSE(sets.empty()) << oom.err;
    const Result again =
        run_headroom("plan '" + testing::source_dir() + "/experiments/postmortems/" + experiment +
                     "' " + args + " " + sets + " --overwrite");
    EXPECT_EQ(again.code, 0) << sets << "\n" << again.err;
    EXPECT_NE(again.out.find("  fits "), std::string::npos) << again.out;
  }
};

TEST_F(SeedAdvice, Seed004WithoutCheckpointingIsToldToCheckpoint) {
  const std::string args = "--set checkpoint.activations=none";
  const Result r = plan_oom("seed004_lora_24gb.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  ASSERT_FALSE(rows.empty()) << r.err;
  EXPECT_TRUE(in_first(rows, 2, "checkpoint.activations=")) << r.err;
  EXPECT_NE(cheapest(r.err).find("checkpoint.activations="), std::string::npos) << r.err;
  // The advice is in the trace, as JSON, the same ranking, with the why.
  const std::optional<std::string> stored =
      read_oom_advice((dir_ / "results/seed004-lora-24gb/plan.rank0.h5").string());
  ASSERT_TRUE(stored.has_value());
  const nlohmann::json advice = nlohmann::json::parse(*stored);
  ASSERT_FALSE(advice["fits"].empty());
  EXPECT_EQ(advice["fits"][0]["set"][0].get<std::string>().rfind("checkpoint.activations=", 0), 0u);
  EXPECT_TRUE(advice["fits"][0]["fits"].get<bool>());
  EXPECT_GT(advice["fits"][0]["recompute_flops"].get<double>(), 0);
  ASSERT_FALSE(advice["why"].empty());
  EXPECT_NE(advice["why"][0].get<std::string>().find("activation +"), std::string::npos)
      << advice["why"][0];
  // The postmortem's why names what grew, not the parameters that were always there.
  EXPECT_NE(r.err.find("saved activations: "), std::string::npos) << r.err;
  expect_cheapest_fits("seed004_lora_24gb.toml", args, r);
}

TEST_F(SeedAdvice, Seed001InSaveModeIsToldToRecompute) {
  const std::string args = "--set loss.mode=save";
  const Result r = plan_oom("seed001_chunked_loss.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  EXPECT_TRUE(in_first(rows, 2, "loss.mode=recompute")) << r.err;
  expect_cheapest_fits("seed001_chunked_loss.toml", args, r);
}

// Seed 001 as it ran at first, one rank per GPU (parallel.tensor = 1), on
// the share of an A800 that a colocated inference engine leaves: the kept
// [T, V] fp32 logits do not fit, and the advice ranks the recomputed loss
// first and the seed's own fix, tensor-parallel pairs (V/2 logits each),
// among what fits.
TEST_F(SeedAdvice, Seed001WithoutTensorParallelismIsToldToRecomputeOrSplitTheVocabulary) {
  const std::string args =
      "--world-size 4 --set parallel.tensor=1 --set "
      "memory.device_capacity=48GiB --set model.hf_config='" +
      testing::source_dir() + "/experiments/postmortems/seed001_qwen3_5_text_shape.json'";
  const Result r = plan_oom("seed001_tensor_parallel.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  ASSERT_FALSE(rows.empty()) << r.err;
  EXPECT_NE(rows.front().find("loss.mode=recompute"), std::string::npos) << r.err;
  EXPECT_TRUE(in_first(rows, 2, "parallel.tensor=2 --set batch.grad_accum=2")) << r.err;
  expect_cheapest_fits("seed001_tensor_parallel.toml", args, r);
  // And the split itself fits.
  const Result split = run_headroom(
      "plan '" + testing::source_dir() + "/experiments/postmortems/seed001_tensor_parallel.toml' " +
      args + " --set parallel.tensor=2 --set batch.grad_accum=2 --overwrite");
  EXPECT_EQ(split.code, 0) << split.err;
  // A rank keeps [32768, 248320 / 2] fp32 logits (and less than two 1024-row
  // chunks beside them at the peak).
  const size_t at = split.out.find("\n  logits ");
  ASSERT_NE(at, std::string::npos) << split.out;
  const size_t open = split.out.find('(', at);
  const double logits = std::stod(split.out.substr(open + 1));
  const double kept = 32768.0 * 124160 * 4, chunk = 1024.0 * 124160 * 4;
  EXPECT_GE(logits, kept) << split.out;
  EXPECT_LT(logits, kept + 2 * chunk) << split.out;
}

// A tensor-parallel plan's postmortem on every rank (rank 1's batch is the
// group's: it once read past the data-parallel ranks' batches), and the
// advice: sequence parallelism first, at no step cost.
TEST_F(SeedAdvice, Seed001OnTensorParallelRanksIsToldToSplitTheSequence) {
  const std::string args =
      "--world-size 2 --set parallel.tensor=2 --set memory.device_capacity=35GiB";
  const Result r = plan_oom("seed001_chunked_loss.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  ASSERT_FALSE(rows.empty()) << r.err;
  EXPECT_NE(rows.front().find("parallel.sequence=true"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2 ran out of memory"), std::string::npos) << r.err;
  expect_cheapest_fits("seed001_chunked_loss.toml", args, r);
}

TEST_F(SeedAdvice, Seed003FullFineTuningOn40GiBIsToldToOffloadOrUseLora) {
  const std::string args = "--set zero.offload_optimizer=false";
  const Result r = plan_oom("seed003_offload_7b.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  ASSERT_FALSE(rows.empty()) << r.err;
  EXPECT_TRUE(rows.front().find("zero.offload_optimizer=true") != std::string::npos ||
              rows.front().find("lora.enabled=true") != std::string::npos)
      << r.err;
  EXPECT_TRUE(in_first(rows, 3, "lora.enabled=true")) << r.err;
  expect_cheapest_fits("seed003_offload_7b.toml", args, r);
}

TEST_F(SeedAdvice, Seed000AtZeroTwoOnASmallerCardIsToldToShardTheBase) {
  const std::string args = "--world-size 2 --set memory.device_capacity=14GiB";
  const Result r = plan_oom("seed000_zero3_lora.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  EXPECT_TRUE(in_first(rows, 2, "zero.stage=3")) << r.err;
  expect_cheapest_fits("seed000_zero3_lora.toml", args, r);
}

// Seed 000 as it ran (ZeRO-2, batch 2, the 4-D DFlash mask through SDPA's
// math path): its authors' flex attention is the first change that fits,
// and their ZeRO-3 fits too.
TEST_F(SeedAdvice, Seed000AsItRanIsToldToUseFlashAttention) {
  const std::string args = "--world-size 2";
  const Result r = plan_oom("seed000_dense_mask.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  ASSERT_FALSE(rows.empty()) << r.err;
  EXPECT_NE(rows.front().find("attention.backend=block_sparse"), std::string::npos) << r.err;
  EXPECT_TRUE(in_first(rows, 4, "zero.stage=3")) << r.err;
  expect_cheapest_fits("seed000_dense_mask.toml", args, r);
}

// Seed 004 on a 12 GiB card: the bf16 base alone (15.3 GiB) does not fit,
// so no knob of the activations or the optimizer helps; the 4-bit base
// (QLoRA, where seeds 003 and 004 both end) is the one that fits.
TEST_F(SeedAdvice, Seed004OnTwelveGiBIsToldToQuantizeTheBase) {
  const std::string args = "--set memory.device_capacity=12GiB";
  const Result r = plan_oom("seed004_lora_24gb.toml", args);
  const std::vector<std::string> rows = fitting_rows(r.err);
  ASSERT_EQ(rows.size(), 1u) << r.err;
  EXPECT_NE(rows.front().find("model.quantization=nf4"), std::string::npos) << r.err;
  expect_cheapest_fits("seed004_lora_24gb.toml", args, r);
}

TEST_F(SeedAdvice, NoAdviceSkipsTheReplanningButKeepsTheWhy) {
  const Result r = run_headroom("plan '" + testing::source_dir() +
                                "/experiments/postmortems/seed004_lora_24gb.toml' "
                                "--set checkpoint.activations=none --no-advice");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.err.find("what would fit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("why it ran out:"), std::string::npos) << r.err;
  const std::optional<std::string> stored =
      read_oom_advice((dir_ / "results/seed004-lora-24gb/plan.rank0.h5").string());
  ASSERT_TRUE(stored.has_value()) << "the why is kept without the re-planning";
  const nlohmann::json advice = nlohmann::json::parse(*stored);
  EXPECT_FALSE(advice.contains("fits"));
  EXPECT_FALSE(advice["why"].empty());
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

class FitCli : public testing::ScratchFolder {};

// The seed's path, quoted for the shell.
std::string seed004() {
  return "'" + testing::source_dir() + "/experiments/postmortems/seed004_lora_24gb.toml'";
}

TEST_F(FitCli, FindsTheLargestTokenBudgetOfSeed004AndOneTokenMoreDoesNotFit) {
  const std::string packed = " --set batch.mode=packed --set batch.micro_batch_size=0";
  const Result r =
      run_headroom("fit " + seed004() + packed + " --vary batch.max_tokens_per_micro_batch");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string marker = "largest that fits: --set batch.max_tokens_per_micro_batch=";
  const size_t at = r.out.find(marker);
  ASSERT_NE(at, std::string::npos) << r.out;
  const long long largest = std::stoll(r.out.substr(at + marker.size()));
  const size_t paren = r.out.find('(', at);
  ASSERT_NE(paren, std::string::npos) << r.out;
  EXPECT_EQ(std::stoll(r.out.substr(paren + 1)), largest + 1) << r.out;
  // The plans agree: the largest fits, one token more runs out of memory.
  const Result fits = run_headroom(
      "plan " + seed004() + packed +
      " --no-advice --set batch.max_tokens_per_micro_batch=" + std::to_string(largest));
  EXPECT_EQ(fits.code, 0) << fits.err;
  const Result over =
      run_headroom("plan " + seed004() + packed +
                   " --no-advice --overwrite --set batch.max_tokens_per_micro_batch=" +
                   std::to_string(largest + 1));
  EXPECT_EQ(over.code, 3) << over.err;
  // Only the plan folders the two plans above made: fit writes none of its own.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "results"), fs::directory_iterator{}), 2)
      << "results/ holds the corpus folder and the plans' run folder";
}

TEST_F(FitCli, SearchPrintsAParetoFrontOfFittingCombinations) {
  const Result r = run_headroom("fit " + seed004() + " --search");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("combinations fit"), std::string::npos) << r.out;
  const size_t front = r.out.find("the Pareto front");
  ASSERT_NE(front, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--set checkpoint.activations=", front), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(none fits)"), std::string::npos) << r.out;
}

TEST_F(FitCli, RefusesAnUnknownKeyAndANothingToFitAgainst) {
  Result r = run_headroom("fit " + seed004() + " --vary model.dtype");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--vary model.dtype: expected one of batch.max_tokens_per_micro_batch"),
            std::string::npos)
      << r.err;
  r = run_headroom("fit " + seed004() + " --set memory.device_capacity=0 --vary lora.rank");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nothing to fit against"), std::string::npos) << r.err;
  r = run_headroom("fit " + seed004() + " --capacity 24XB --vary lora.rank");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--capacity 24XB: expected a byte count"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

class TrainOom : public testing::ScratchFolder {};

TEST_F(TrainOom, ExplainsAndAdvisesAfterThePostmortemIsWritten) {
  // The quickstart on the cpu against a capacity its activations overrun.
  const Result r = run_headroom(
      "train --set run.steps=2 --set schedule.warmup_steps=0 --set memory.device_capacity=160MiB");
  ASSERT_EQ(r.code, 3) << r.out << r.err;
  const size_t postmortem = r.err.find("postmortem written to");
  const size_t why = r.err.find("why it ran out:");
  const size_t advice = r.err.find("what would fit:");
  ASSERT_NE(postmortem, std::string::npos) << r.err;
  ASSERT_NE(why, std::string::npos) << r.err;
  ASSERT_NE(advice, std::string::npos) << r.err;
  EXPECT_LT(postmortem, why);
  EXPECT_LT(why, advice);
  const std::optional<std::string> stored =
      read_oom_advice((dir_ / "results/quickstart/trace.rank0.h5").string());
  ASSERT_TRUE(stored.has_value());
  const nlohmann::json json = nlohmann::json::parse(*stored);
  EXPECT_NE(json["rates"].get<std::string>().find("cpu target"), std::string::npos)
      << json["rates"];
  EXPECT_FALSE(json["why"].empty());
  EXPECT_NE(r.err.find("cheapest that fits: --set checkpoint.activations="), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace headroom
