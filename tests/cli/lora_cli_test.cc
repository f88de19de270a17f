// LoRA from the command line: fine-tuning a loaded base starts at exactly the
// base model's loss, checkpoints hold PEFT's adapter files and resume bit for
// bit, `export --merge` writes a Hugging Face model, and wrong inputs are
// refused before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "model/safetensors.h"
#include "test_util/small_run.h"
#include "trace/reader.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

using testing::Result;
using testing::slurp;

const std::string kSmall = testing::small_run_overrides(60);
constexpr const char* kLora =
    " --set lora.enabled=true --set lora.rank=4 --set lora.alpha=8 --set lora.dropout=0.1"
    " --set lora.targets=[\\\"q_proj\\\",\\\"v_proj\\\",\\\"down_proj\\\"]";

class LoraCli : public testing::ScratchFolder {
 protected:
  Result headroom(const std::string& command, const std::string& args) {
    return run_headroom(command + kSmall + " " + args, "OMP_NUM_THREADS=2 ");
  }
  std::vector<StepRecord> steps(const std::string& file) {
    return TraceReader::open((dir_ / "results" / file).string()).steps();
  }
  // A base model to fine-tune: the initial weights of a plain run.
  std::string base() {
    Result r = headroom("train",
                        "--set run.steps=1 --set checkpoint.save_initial=true "
                        "--set run.name=base");
    EXPECT_EQ(r.code, 0) << r.err;
    return (dir_ / "results/base/checkpoints/step-0/model.safetensors").string();
  }
};

// run.seed is the seed of the dropout masks: the same seed trains the same
// steps, another seed other ones (from step 1, once B is no longer zero);
// lora.seed (A's init) is kept fixed.
TEST_F(LoraCli, RunSeedDrawsTheDropoutMasks) {
  const std::string lora = std::string(kLora) + " --set lora.dropout=0.5 --set run.steps=3";
  for (const char* name_and_seed :
       {" --set run.name=a --set run.seed=1", " --set run.name=b --set run.seed=1",
        " --set run.name=c --set run.seed=2"}) {
    Result r = headroom("train", lora + name_and_seed);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const std::vector<StepRecord> a = steps("a/trace.rank0.h5"), b = steps("b/trace.rank0.h5"),
                                c = steps("c/trace.rank0.h5");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(c.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].loss, b[i].loss) << "step " << i;
  EXPECT_NE(a[2].loss, c[2].loss);
}

TEST_F(LoraCli, FineTuningALoadedBaseStartsAtItsLossAndResumesBitForBit) {
  const std::string weights = " --set model.weights=" + base();
  const std::string lora = weights + kLora + " --set run.steps=4 --set checkpoint.save_every=2";
  ASSERT_EQ(headroom("train", weights + " --set run.steps=1 --set run.name=plain").code, 0);
  Result r = headroom("train", lora + " --set run.name=lora");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<StepRecord> plain = steps("plain/trace.rank0.h5");
  const std::vector<StepRecord> tuned = steps("lora/trace.rank0.h5");
  ASSERT_EQ(tuned.size(), 4u);
  EXPECT_EQ(tuned[0].loss, plain[0].loss) << "B starts at zero: step 0 is the base model's";
  EXPECT_NE(tuned[1].loss, tuned[0].loss);

  // The checkpoint: PEFT's files, no copy of the frozen base.
  const fs::path step2 = dir_ / "results/lora/checkpoints/step-2";
  EXPECT_FALSE(fs::exists(step2 / "model.safetensors"));
  const SafetensorsIndex adapters =
      SafetensorsIndex::open((step2 / "adapter_model.safetensors").string());
  EXPECT_EQ(adapters.entries().size(), 4u * 3u * 2u) << "A and B of 3 targets in 4 layers";
  EXPECT_NE(adapters.find("base_model.model.model.layers.3.mlp.down_proj.lora_B.weight"), nullptr);
  const nlohmann::json config = nlohmann::json::parse(slurp(step2 / "adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8.0);
  EXPECT_EQ(config["lora_dropout"], 0.1);
  EXPECT_EQ(config["target_modules"], nlohmann::json({"q_proj", "v_proj", "down_proj"}));
  EXPECT_EQ(config["base_model_name_or_path"],
            fs::absolute(dir_ / "results/base/checkpoints/step-0/model.safetensors").string());

  // Resumed from step 2: the same steps 3 and 4, dropout masks included.
  Result resumed = headroom(
      "train", lora + " --set run.name=lora --set checkpoint.resume_from=" + step2.string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const std::vector<StepRecord> again = steps("lora/trace.rank0.from-step-2.h5");
  ASSERT_EQ(again.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(again[i].loss, tuned[i + 2].loss) << "step " << i + 3;

  // Adapters of another shape are refused before anything is written.
  Result wrong = headroom("train", lora +
                                       " --set lora.rank=8 --set run.name=wrong "
                                       "--set checkpoint.resume_from=" +
                                       step2.string());
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.err.find("adapter_config.json: r is 4, this run's [lora] needs 8"),
            std::string::npos)
      << wrong.err;
  EXPECT_FALSE(fs::exists(dir_ / "results/wrong"));
}

TEST_F(LoraCli, ExportMergeWritesAHuggingFaceModelThatTrainsAsABase) {
  const std::string lora = " --set model.weights=" + base() + kLora +
                           " --set run.steps=2 --set checkpoint.save_every=2 --set run.name=lora";
  ASSERT_EQ(headroom("train", lora).code, 0);
  const std::string adapter = (dir_ / "results/lora/checkpoints/step-2").string();
  Result merged = run_headroom("export" + std::string(kSmall) + lora + " --adapter " + adapter +
                               " --merge --out merged");
  ASSERT_EQ(merged.code, 0) << merged.err;
  EXPECT_NE(merged.out.find("merged 4 adapter group(s)"), std::string::npos) << merged.out;
  const SafetensorsIndex index = SafetensorsIndex::open((dir_ / "merged").string());
  EXPECT_NE(index.find("model.layers.0.self_attn.q_proj.weight"), nullptr);
  for (const SafetensorsEntry& e : index.entries())
    EXPECT_EQ(e.name.find("lora"), std::string::npos) << e.name;
  EXPECT_TRUE(fs::exists(dir_ / "merged/config.json"));
  Result plain = headroom("train", "--set model.weights=merged --set run.steps=1 --set run.name=m");
  EXPECT_EQ(plain.code, 0) << plain.err;

  // Without --merge, or without [lora], nothing is written.
  Result no_merge = run_headroom("export" + std::string(kSmall) + lora + " --adapter " + adapter +
                                 " --out other");
  EXPECT_EQ(no_merge.code, 2);
  EXPECT_NE(no_merge.err.find("--merge: required"), std::string::npos) << no_merge.err;
  Result no_lora = run_headroom("export --adapter " + adapter + " --merge --out other");
  EXPECT_EQ(no_lora.code, 2);
  EXPECT_NE(no_lora.err.find("lora.enabled = false"), std::string::npos) << no_lora.err;
  EXPECT_FALSE(fs::exists(dir_ / "other"));
}

}  // namespace
}  // namespace headroom
