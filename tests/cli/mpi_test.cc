// Data-parallel training under a real `mpirun`: N ranks give the losses of
// one rank accumulating the same micro-batches, each rank writes its own
// trace, and a rank that fails ends the whole job instead of leaving the
// others waiting in a collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli_harness.h"
#include "data/token_dataset_writer.h"
#include "model/safetensors.h"
#include "test_util/small_run.h"
#include "trace/reader.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

const std::string kSmall = testing::small_run_overrides(60);

using testing::Result;
using testing::slurp;

// The largest difference between two safetensors files' tensors (the same
// names, shapes and dtypes, F32 or BF16), each relative to its tensor's
// largest value in `want`.
double largest_relative_difference(const fs::path& want_file, const fs::path& got_file) {
  const SafetensorsIndex want = SafetensorsIndex::open(want_file.string());
  const SafetensorsIndex got = SafetensorsIndex::open(got_file.string());
  EXPECT_EQ(got.entries().size(), want.entries().size());
  auto values = [](const SafetensorsIndex& index, const SafetensorsEntry& e) {
    std::vector<char> raw(e.nbytes);
    index.read_raw(e, raw.data());
    std::vector<float> out;
    if (e.dtype == SafetensorsDType::kF32) {
      out.resize(e.nbytes / 4);
      std::memcpy(out.data(), raw.data(), e.nbytes);
    } else {  // bf16: the high half of an fp32
      for (size_t i = 0; i + 1 < raw.size(); i += 2) {
        uint32_t bits = 0;
        std::memcpy(reinterpret_cast<char*>(&bits) + 2, raw.data() + i, 2);
        float f;
        std::memcpy(&f, &bits, 4);
        out.push_back(f);
      }
    }
    return out;
  };
  double largest = 0;
  for (const SafetensorsEntry& entry : want.entries()) {
    const SafetensorsEntry* mine = got.find(entry.name);
    if (mine == nullptr || mine->shape != entry.shape || mine->dtype != entry.dtype) {
      ADD_FAILURE() << got_file << ": " << entry.name << " missing or of another shape or dtype";
      return 1;
    }
    const std::vector<float> a = values(want, entry), b = values(got, *mine);
    double scale = 0, worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(a[i])));
      worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    }
    largest = std::max(largest, scale > 0 ? worst / scale : worst);
  }
  return largest;
}

class Mpi : public testing::ScratchFolder {
 protected:
  // `mpirun -np <ranks> headroom train <args>` in the scratch folder (ranks
  // = 0: plain `headroom train`, no launcher). A 120 s timeout turns a hang
  // into a failure instead of a stuck suite.
  Result train(int ranks, const std::string& args) { return headroom(ranks, "train", args); }
  Result headroom(int ranks, const std::string& command_name, const std::string& args) {
    // One OpenMP thread per rank: N ranks share this machine's cores. Open
    // MPI's own allocations outlive MPI_Finalize, so LeakSanitizer (in the
    // sanitizer build) is off for these processes; the rest of the suite
    // checks headroom's own leaks.
    const std::string launcher =
        ranks > 0 ? "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun "
                    "--oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x "
                    "ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 -np " +
                        std::to_string(ranks) + " "
                  : "OMP_NUM_THREADS=1 ";
    return run_headroom(command_name + kSmall + " " + args, launcher);
  }
  friend Result mpi_train(Mpi& mpi, int ranks, const std::string& args);
  friend Result mpi_headroom(Mpi& mpi, int ranks, const std::string& command_name,
                             const std::string& args);
  std::vector<StepRecord> steps(const std::string& run, int rank) {
    return TraceReader::open(
               (dir_ / "results" / run / ("trace.rank" + std::to_string(rank) + ".h5")).string())
        .steps();
  }
};

Result mpi_train(Mpi& mpi, int ranks, const std::string& args) {
  return mpi.train(ranks, args);
}
Result mpi_headroom(Mpi& mpi, int ranks, const std::string& command_name, const std::string& args) {
  return mpi.headroom(ranks, command_name, args);
}

TEST_F(Mpi, RanksTogetherLoseWhatOneRankAccumulatingTheirMicroBatchesLoses) {
  // The corpus is written once, by the single-rank run.
  ASSERT_EQ(train(0, "--set run.steps=4 --set batch.grad_accum=4 --set run.name=one").code, 0);
  const std::vector<StepRecord> one = steps("one", 0);
  ASSERT_EQ(one.size(), 4u);
  // (ranks, the ZeRO settings)
  std::vector<std::pair<int, std::string>> runs = {
      {2, "zero.stage=0"},
      {4, "zero.stage=1"},
      {2, "zero.stage=2"},
      {4, "zero.stage=3 --set zero.prefetch=1"},
  };
#ifndef HEADROOM_SANITIZE
  // Sanitized processes start and run ~10x slower: the others there.
  runs.insert(runs.end(), {{4, "zero.stage=0"},
                           {2, "zero.stage=1 --set zero.offload_optimizer=true"},
                           {4, "zero.stage=2"},
                           {2, "zero.stage=3"},
                           {4, "zero.stage=3 --set zero.offload_optimizer=true"}});
#endif
  int index = 0;
  for (const auto& [ranks, zero] : runs) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + zero);
    const std::string name = "run" + std::to_string(index++);
    Result r =
        train(ranks, "--set run.steps=4 --set batch.grad_accum=" + std::to_string(4 / ranks) +
                         " --set " + zero + " --set run.name=" + name);
    ASSERT_EQ(r.code, 0) << r.err;
    // Rank 0 alone prints the progress.
    size_t lines = 0;
    for (size_t at = r.out.find("step 1/4"); at != std::string::npos;
         at = r.out.find("step 1/4", at + 1))
      ++lines;
    EXPECT_EQ(lines, 1u) << r.out;
    int64_t tokens = 0;
    for (int rank = 0; rank < ranks; ++rank) {
      const TraceReader trace = TraceReader::open(
          (dir_ / "results" / name / ("trace.rank" + std::to_string(rank) + ".h5")).string());
      EXPECT_EQ(trace.header().rank, rank);
      EXPECT_EQ(trace.header().world_size, ranks);
      const std::vector<StepRecord> mine = trace.steps();
      ASSERT_EQ(mine.size(), one.size());
      for (size_t s = 0; s < mine.size(); ++s) {
        // fp32 sums in another order (per rank, then across ranks): a few
        // ulps, far inside 1e-5.
        EXPECT_NEAR(mine[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s;
        EXPECT_NEAR(mine[s].grad_norm, one[s].grad_norm, 1e-5 * one[s].grad_norm) << "step " << s;
        tokens += mine[s].tokens;
      }
    }
    int64_t one_tokens = 0;
    for (const StepRecord& s : one)
      one_tokens += s.tokens;
    EXPECT_EQ(tokens, one_tokens) << "the ranks trained on exactly the same tokens";
  }
}

// LoRA under every ZeRO stage: the frozen base is replicated (stages 0-2) or
// sharded and gathered per block (stage 3); only the adapters' gradients are
// reduced and only their states sharded.
TEST_F(Mpi, LoraRanksTogetherLoseWhatOneRankLoses) {
  const std::string lora =
      " --set run.steps=3 --set lora.enabled=true --set lora.rank=4"
      " --set lora.targets=[\\\"q_proj\\\",\\\"v_proj\\\",\\\"down_proj\\\"]"
      " --set optimizer.lr=1e-3";
  ASSERT_EQ(
      train(0, lora + " --set batch.grad_accum=4 --set run.name=one --set checkpoint.save_every=3")
          .code,
      0);
  const std::vector<StepRecord> one = steps("one", 0);
  ASSERT_EQ(one.size(), 3u);
  // Tensor parallelism: the adapters split like their projections (B by
  // rows under q/v, A by columns under down), and the PEFT file the group
  // saves, gathered, is one rank's.
  {
    Result r = train(2, lora +
                            " --set batch.grad_accum=4 --set parallel.tensor=2 --set "
                            "checkpoint.save_every=3 --set run.name=lora_tp");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<StepRecord> mine = steps("lora_tp", 0);
    ASSERT_EQ(mine.size(), one.size());
    for (size_t s = 0; s < mine.size(); ++s)
      EXPECT_NEAR(mine[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s;
    const fs::path file = "checkpoints/step-3/adapter_model.safetensors";
    // Adam turns the last bits of small gradients (an A's are 0 while its
    // B is, then tiny) into whole updates: down_proj's differ by 1.8e-4 of
    // their largest value after 3 steps, under 1% of one step of lr.
    EXPECT_LE(
        largest_relative_difference(dir_ / "results/one" / file, dir_ / "results/lora_tp" / file),
        1e-3);
  }
  std::vector<std::pair<int, std::string>> runs = {{2, "zero.stage=3 --set zero.prefetch=1"},
                                                   {2, "zero.stage=1"}};
#ifndef HEADROOM_SANITIZE
  runs.insert(runs.end(), {{4, "zero.stage=2"}, {2, "zero.stage=0"}});
#endif
  int index = 0;
  for (const auto& [ranks, zero] : runs) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + zero);
    const std::string name = "lora" + std::to_string(index++);
    Result r = train(ranks, lora + " --set batch.grad_accum=" + std::to_string(4 / ranks) +
                                " --set " + zero + " --set run.name=" + name);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<StepRecord> mine = steps(name, 0);
    ASSERT_EQ(mine.size(), one.size());
    for (size_t s = 0; s < mine.size(); ++s) {
      EXPECT_NEAR(mine[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s;
      EXPECT_NEAR(mine[s].grad_norm, one[s].grad_norm, 1e-5 * one[s].grad_norm) << "step " << s;
    }
  }
}

// LoRA dropout draws its masks from the micro-batch of the data it drops
// on (batch.h's epoch and bin), not from the rank that trains it: ranks
// together drop what one rank accumulating their micro-batches drops, and a
// tensor-parallel group drops the same elements of the activation every
// rank of it holds whole.
TEST_F(Mpi, LoraDropoutMasksAreTheSameOnAnyWorldSize) {
  const std::string lora =
      " --set run.steps=3 --set lora.enabled=true --set lora.rank=4 --set lora.dropout=0.2"
      " --set lora.targets=[\\\"q_proj\\\",\\\"v_proj\\\"] --set optimizer.lr=1e-3";
  ASSERT_EQ(train(0, lora + " --set batch.grad_accum=4 --set run.name=one").code, 0);
  ASSERT_EQ(
      train(0, lora + " --set batch.grad_accum=4 --set lora.dropout=0 --set run.name=none").code,
      0);
  const std::vector<StepRecord> one = steps("one", 0), none = steps("none", 0);
  ASSERT_EQ(one.size(), 3u);
  // B starts at zero: the masks show from step 1 on, by more than the
  // tolerance below.
  EXPECT_GT(std::abs(one[2].loss - none[2].loss), 1e-5 * std::abs(none[2].loss))
      << "the dropout changes the training";
  for (const auto& [name, set] : std::vector<std::pair<std::string, std::string>>{
           {"dp", " --set batch.grad_accum=2 --set zero.stage=2"},
           {"tp", " --set batch.grad_accum=4 --set parallel.tensor=2"}}) {
    SCOPED_TRACE(name);
    Result r = train(2, lora + set + " --set run.name=" + name);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<StepRecord> mine = steps(name, 0);
    ASSERT_EQ(mine.size(), one.size());
    for (size_t s = 0; s < mine.size(); ++s)
      EXPECT_NEAR(mine[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s;
  }
}

// batch.global_micro_batches fixes a step's micro-batches over all ranks:
// one rank and two train the same steps, and a checkpoint of two continues
// on one as the two would have (a requeue onto fewer nodes). With the
// per-rank batch.grad_accum such a resume trains another global batch, and
// says so.
TEST_F(Mpi, AGlobalBatchTrainsTheSameStepsOnAnyWorldSize) {
  const std::string global =
      " --set run.steps=4 --set batch.global_micro_batches=4 --set zero.stage=3"
      " --set checkpoint.save_every=2 --set checkpoint.format=\\\"sharded\\\"";
  ASSERT_EQ(train(0, global + " --set run.name=one").code, 0);
  Result two_ranks = train(2, global + " --set run.name=two");
  ASSERT_EQ(two_ranks.code, 0) << two_ranks.err;
  const std::vector<StepRecord> one = steps("one", 0), two = steps("two", 0);
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(two.size(), 4u);
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(two[s].micro_batches, 2) << "each of two ranks accumulates half";
    EXPECT_EQ(one[s].micro_batches, 4);
    EXPECT_NEAR(two[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s;
    EXPECT_NEAR(two[s].grad_norm, one[s].grad_norm, 1e-5 * one[s].grad_norm) << "step " << s;
  }
  const fs::path step2 = dir_ / "results/two/checkpoints/step-2";
  EXPECT_NE(slurp(step2 / "trainer_state.json").find("\"micro_batches_per_step\": 4"),
            std::string::npos);
  Result requeued = train(
      0, global + " --set run.name=two_on_one --set checkpoint.resume_from=" + step2.string());
  ASSERT_EQ(requeued.code, 0) << requeued.err;
  EXPECT_EQ(requeued.err.find("micro-batches a step"), std::string::npos) << requeued.err;
  const std::vector<StepRecord> again =
      TraceReader::open((dir_ / "results/two_on_one/trace.rank0.from-step-2.h5").string()).steps();
  ASSERT_EQ(again.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(again[i].loss, two[i + 2].loss, 1e-5 * std::abs(two[i + 2].loss)) << i + 2;

  // Three ranks cannot share four micro-batches evenly.
  Result three = train(3, global + " --set run.name=three");
  EXPECT_EQ(three.code, 2);
  EXPECT_NE(three.err.find("batch.global_micro_batches = 4 is not a multiple of the job's 3 "
                           "data-parallel ranks"),
            std::string::npos)
      << three.err;

  // Per rank: the resume on one rank trains half the micro-batches a step.
  const std::string per_rank =
      " --set run.steps=3 --set batch.grad_accum=2 --set checkpoint.save_every=2";
  ASSERT_EQ(train(2, per_rank + " --set run.name=per_rank").code, 0);
  Result halved = train(0, per_rank + " --set run.name=halved --set checkpoint.resume_from=" +
                               (dir_ / "results/per_rank/checkpoints/step-2").string());
  ASSERT_EQ(halved.code, 0) << halved.err;
  EXPECT_NE(halved.err.find("it was written by a run training 4 micro-batches a step; this one "
                            "trains 2 (batch.grad_accum = 2 on each of 1 data-parallel ranks)"),
            std::string::npos)
      << halved.err;
}

// QLoRA under ZeRO-2: every rank quantizes the same base and keeps it whole;
// the adapters' gradients are reduce-scattered as under LoRA.
TEST_F(Mpi, QloraRanksTogetherLoseWhatOneRankLoses) {
  const std::string qlora =
      " --set run.steps=3 --set lora.enabled=true --set lora.rank=4"
      " --set lora.targets=[\\\"q_proj\\\",\\\"down_proj\\\"] --set optimizer.lr=1e-3"
      " --set model.quantization=nf4 --set model.double_quant=true";
  ASSERT_EQ(train(0, qlora + " --set batch.grad_accum=4 --set run.name=qone").code, 0);
  const std::vector<StepRecord> one = steps("qone", 0);
  ASSERT_EQ(one.size(), 3u);
  Result r = train(2, qlora + " --set batch.grad_accum=2 --set zero.stage=2 --set run.name=qtwo");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<StepRecord> two = steps("qtwo", 0);
  ASSERT_EQ(two.size(), one.size());
  for (size_t s = 0; s < two.size(); ++s) {
    EXPECT_NEAR(two[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s;
    EXPECT_NEAR(two[s].grad_norm, one[s].grad_norm, 1e-5 * one[s].grad_norm) << "step " << s;
  }
}

// Model-state bytes one rank holds at the end of init (live: allocated and
// not freed; stage 3 gathers each group whole for a moment to initialize
// it), by category.
struct ModelState {
  uint64_t param = 0, grad = 0, optim = 0;
};
ModelState model_state(const TraceReader& trace) {
  ModelState state;
  for (const MemoryEvent& e : trace.events()) {
    // Step -1: before the first step (the run's end frees everything, in
    // the phase it started in).
    if (e.phase != Phase::kInit || e.step != -1) continue;
    if (e.action != MemoryAction::kAlloc && e.action != MemoryAction::kFree) continue;
    uint64_t* total = e.category == Category::kParam   ? &state.param
                      : e.category == Category::kGrad  ? &state.grad
                      : e.category == Category::kOptim ? &state.optim
                                                       : nullptr;
    if (!total) continue;
    if (e.action == MemoryAction::kAlloc)
      *total += e.bytes;
    else
      *total -= e.bytes;
  }
  return state;
}

// optimizer.master_dtype and optimizer.kind under ZeRO-1 on 2 ranks: the
// master and the moments are sharded like the default's, 8 bytes per
// element with no master, 10 with a bf16 one; the 8-bit states of both
// ranks together are one rank's, up to the partial blocks a shard boundary
// adds (an fp32 absmax for m and for v, 8 bytes, per cut parameter) and the
// padding.
TEST_F(Mpi, MasterAndEightBitStatesShardLikeTheRest) {
  const std::string set =
      " --set model.dtype=bf16 --set memory.allocator=exact --set run.steps=1 --overwrite";
  auto optim_of = [&](const std::string& name, int rank) {
    return model_state(TraceReader::open(
                           (dir_ / "results" / name / ("plan.rank" + std::to_string(rank) + ".h5"))
                               .string()))
        .optim;
  };
  auto param_of = [&](const std::string& name) {
    return model_state(TraceReader::open((dir_ / "results" / name / "plan.rank0.h5").string()))
        .param;
  };
  for (const auto& [master, bytes] : {std::pair<std::string, uint64_t>{"none", 8},
                                      std::pair<std::string, uint64_t>{"bf16", 10}}) {
    SCOPED_TRACE(master);
    const std::string name = "m" + master;
    ASSERT_EQ(headroom(0, "plan",
                       set + " --set optimizer.master_dtype=\\\"" + master +
                           "\\\" --set zero.stage=1 --world-size 2 --set run.name=" + name)
                  .code,
              0);
    const uint64_t psi = param_of(name) / 2;
    const uint64_t total = optim_of(name, 0) + optim_of(name, 1);
    EXPECT_GE(total, bytes * psi);
    EXPECT_LT(total - bytes * psi, bytes * 6 * 2) << "only the padding of 6 groups";
    EXPECT_NEAR(static_cast<double>(optim_of(name, 0)), static_cast<double>(bytes * psi) / 2,
                static_cast<double>(bytes * 6 * 2));
  }
  const std::string eight = set + " --set optimizer.kind=\\\"adamw_8bit\\\"";
  ASSERT_EQ(headroom(0, "plan", eight + " --set run.name=e1").code, 0);
  ASSERT_EQ(
      headroom(0, "plan", eight + " --set zero.stage=1 --world-size 2 --set run.name=e2").code, 0);
  const uint64_t whole = optim_of("e1", 0), sharded = optim_of("e2", 0) + optim_of("e2", 1);
  EXPECT_GE(sharded, whole);
  // tiny: 6 groups of at most 11 parameters, one of them cut per group;
  // plus each group's padding (fewer than 2 elements at up to 12 bytes).
  EXPECT_LE(sharded - whole, 6 * (8 + 2 * 12)) << "whole " << whole << ", sharded " << sharded;
}

// ZeRO's arithmetic for mixed-precision Adam (bf16 weights and gradients,
// fp32 master, m and v), per rank: 2Ψ + 2Ψ + 12Ψ at stage 0, 2Ψ + 2Ψ +
// 12Ψ/N at 1, 2Ψ + 2Ψ/N + 12Ψ/N at 2, 2Ψ/N + 2Ψ/N + 12Ψ/N at 3. Each 1/N
// is exact up to the padding of each group to a multiple of N (fewer than N
// elements per group, on the last ranks), and the ranks' shards together
// hold every element once.
TEST_F(Mpi, ModelStateBytesPerRankFollowZerosArithmetic) {
  const std::string set =
      " --set model.dtype=bf16 --set memory.allocator=exact --set run.steps=1 --overwrite";
  ASSERT_EQ(headroom(0, "plan", set + " --set run.name=base").code, 0);
  const ModelState base =
      model_state(TraceReader::open((dir_ / "results/base/plan.rank0.h5").string()));
  const uint64_t psi = base.param / 2;
  ASSERT_GT(psi, 1000000u) << "the tiny preset has millions of parameters";
  const uint64_t groups = 6;  // an upper bound for the tiny preset (embed, 4 blocks, head)
  EXPECT_EQ(base.grad, 2 * psi);
  EXPECT_EQ(base.optim, 12 * psi) << "16Ψ in all at stage 0";
  // `bytes` per element: whole, or this rank's 1/N (within the padding).
  auto expect_share = [&](uint64_t got, uint64_t bytes, bool sharded, uint64_t ranks,
                          const char* what) {
    if (!sharded) {
      EXPECT_EQ(got, bytes * psi) << what;
      return;
    }
    EXPECT_GE(got + bytes * groups * ranks, bytes * psi / ranks) << what;
    EXPECT_LE(got, bytes * psi / ranks + bytes * groups * ranks) << what;
  };
  for (uint64_t ranks : {1, 2, 4}) {
    for (int stage : {0, 1, 2, 3}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, stage " + std::to_string(stage));
      const std::string name = "n" + std::to_string(ranks) + "s" + std::to_string(stage);
      Result r = headroom(0, "plan",
                          set + " --set zero.stage=" + std::to_string(stage) + " --world-size " +
                              std::to_string(ranks) + " --set run.name=" + name);
      ASSERT_EQ(r.code, 0) << r.err;
      ModelState total;
      for (uint64_t rank = 0; rank < ranks; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        const ModelState state = model_state(TraceReader::open(
            (dir_ / "results" / name / ("plan.rank" + std::to_string(rank) + ".h5")).string()));
        expect_share(state.param, 2, stage >= 3, ranks, "param");
        expect_share(state.grad, 2, stage >= 2, ranks, "grad");
        expect_share(state.optim, 12, stage >= 1, ranks, "optim");
        total.param += state.param;
        total.grad += state.grad;
        total.optim += state.optim;
      }
      // Every element lives on exactly one rank; the rest is padding.
      if (stage >= 3) {
        EXPECT_LT(total.param - 2 * psi, 2 * groups * ranks);
      }
      if (stage >= 2) {
        EXPECT_LT(total.grad - 2 * psi, 2 * groups * ranks);
      }
      if (stage >= 1) {
        EXPECT_LT(total.optim - 12 * psi, 12 * groups * ranks);
      }
      if (ranks == 1) {
        EXPECT_EQ(total.param + total.grad + total.optim, 16 * psi) << "no padding on one rank";
      }
    }
  }
  // LoRA at stage 3: the frozen base is sharded like any group; gradients
  // and states exist for the adapters alone, sharded too.
  const std::string lora = set + " --set lora.enabled=true --set lora.rank=8";
  ASSERT_EQ(headroom(0, "plan", lora + " --set run.name=lora1").code, 0);
  const ModelState whole =
      model_state(TraceReader::open((dir_ / "results/lora1/plan.rank0.h5").string()));
  EXPECT_LT(whole.grad, base.grad / 10) << "adapters only";
  EXPECT_EQ(whole.optim, 6 * whole.grad) << "12 bytes of state per 2-byte adapter gradient";
  ASSERT_EQ(
      headroom(0, "plan", lora + " --set zero.stage=3 --world-size 2 --set run.name=lora3").code,
      0);
  const uint64_t lora_groups = 10;  // embed, 4 blocks, head; 4 adapter groups
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("LoRA, stage 3, rank " + std::to_string(rank));
    const ModelState state = model_state(TraceReader::open(
        (dir_ / "results/lora3" / ("plan.rank" + std::to_string(rank) + ".h5")).string()));
    for (auto [got, all, bytes] :
         {std::tuple{state.param, whole.param, 2}, std::tuple{state.grad, whole.grad, 2},
          std::tuple{state.optim, whole.optim, 12}}) {
      EXPECT_GE(got + bytes * lora_groups * 2, all / 2);
      EXPECT_LE(got, all / 2 + bytes * lora_groups * 2);
    }
  }

  // Offloaded, the 12Ψ/N leave the device for host memory.
  Result offload = headroom(0, "plan",
                            set +
                                " --set zero.stage=2 --set zero.offload_optimizer=true"
                                " --world-size 2 --set run.name=offload");
  ASSERT_EQ(offload.code, 0) << offload.err;
  for (int rank = 0; rank < 2; ++rank) {
    const ModelState state = model_state(TraceReader::open(
        (dir_ / "results/offload" / ("plan.rank" + std::to_string(rank) + ".h5")).string()));
    EXPECT_EQ(state.optim, 0u) << "rank " << rank;
    expect_share(state.grad, 2, true, 2, "grad");
  }
  EXPECT_NE(offload.out.find("host memory (zero.offload_optimizer)"), std::string::npos)
      << offload.out;
}

// Stage 3: the weights are gathered group by group to be saved, and each
// rank keeps its shard of them when they are loaded back; the optimizer's
// states come from (and go back to) host memory.
TEST_F(Mpi, AShardedRunResumesFromItsOptimizerShards) {
  const std::string set =
      " --set run.steps=4 --set checkpoint.save_every=2 --set zero.stage=3"
      " --set zero.offload_optimizer=true --set run.name=z";
  ASSERT_EQ(train(2, set).code, 0);
  const fs::path step2 = dir_ / "results/z/checkpoints/step-2";
  EXPECT_TRUE(fs::exists(step2 / "optimizer.rank0.safetensors"));
  EXPECT_TRUE(fs::exists(step2 / "optimizer.rank1.safetensors"));
  Result resumed = train(2, set + " --set checkpoint.resume_from=" + step2.string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = "trace.rank" + std::to_string(rank);
    const std::vector<StepRecord> a =
        TraceReader::open((dir_ / "results/z" / (file + ".h5")).string()).steps();
    const std::vector<StepRecord> b =
        TraceReader::open((dir_ / "results/z" / (file + ".from-step-2.h5")).string()).steps();
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 2u);
    for (size_t i = 0; i < 2; ++i)
      EXPECT_EQ(b[i].loss, a[i + 2].loss) << "rank " << rank << " step " << b[i].step;
  }
  // A run of another world size reshards them (sharded_checkpoint_test.cc
  // compares such a run's losses with one that had its world size from the
  // start).
  Result one = train(0, set + " --set run.name=z1 --set checkpoint.resume_from=" + step2.string());
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(
      TraceReader::open((dir_ / "results/z1/trace.rank0.from-step-2.h5").string()).steps().size(),
      2u);
}

// Promise 1 across ranks: `plan --world-size N` simulates each rank in one
// process and makes exactly the allocations that rank makes under mpirun,
// the bf16 gradients' fp32 comm buffers included.
class MpiPlan : public Mpi, public ::testing::WithParamInterface<const char*> {};

// `plan --world-size ranks` against `mpirun -np ranks`, rank by rank,
// event for event, under the settings `set`; `header` is what the plan's
// table starts with, and every rank's events hold `tag` (when not empty);
// `reduced`: the ranks reduce gradients (several data-parallel ranks).
void expect_each_plan_is_its_ranks_run(Mpi& mpi, const std::filesystem::path& dir, int ranks,
                                       const std::string& set, const std::string& header,
                                       const std::string& tag = "", bool reduced = true) {
  ASSERT_EQ(mpi_train(mpi, ranks, set).code, 0);
  Result plan = mpi_headroom(mpi, 0, "plan", set + " --world-size " + std::to_string(ranks));
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find(header), std::string::npos) << plan.out;
  for (int rank = 0; rank < ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string name = "rank" + std::to_string(rank) + ".h5";
    const TraceReader real = TraceReader::open((dir / "results/dp" / ("trace." + name)).string());
    const TraceReader planned = TraceReader::open((dir / "results/dp" / ("plan." + name)).string());
    EXPECT_EQ(planned.header().rank, rank);
    EXPECT_EQ(planned.header().world_size, ranks);
    const std::vector<MemoryEvent> a = real.events(), b = planned.events();
    const std::vector<std::string> ta = real.tags(), tb = planned.tags();
    ASSERT_EQ(a.size(), b.size());
    bool comm = false;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].action, b[i].action) << "event " << i;
      ASSERT_EQ(a[i].bytes, b[i].bytes) << "event " << i;
      ASSERT_EQ(ta[a[i].tag_id], tb[b[i].tag_id]) << "event " << i;
      ASSERT_EQ(a[i].category, b[i].category) << "event " << i;
      ASSERT_EQ(a[i].phase, b[i].phase) << "event " << i;
      comm = comm || (a[i].category == Category::kComm && a[i].phase == Phase::kReduce);
    }
    EXPECT_EQ(comm, reduced) << "bf16 gradients are reduced through fp32 comm buffers";
    EXPECT_GT(a.size(), 100u);
    if (!tag.empty()) {
      EXPECT_NE(std::find(ta.begin(), ta.end(), tag), ta.end()) << tag;
    }
    const std::vector<StepRecord> sa = real.steps(), sb = planned.steps();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].peak_reserved, sb[i].peak_reserved);
      EXPECT_EQ(sa[i].longest_sample, sb[i].longest_sample) << "the same batches";
    }
    const std::string row = std::to_string(rank) + "  ";
    EXPECT_NE(plan.out.find(row), std::string::npos) << plan.out;
  }
}

TEST_P(MpiPlan, PlanOfSeveralRanksMakesEachRanksAllocations) {
  expect_each_plan_is_its_ranks_run(
      *this, dir_, 2,
      " --set run.steps=2 --set model.dtype=bf16 --set run.name=dp " + std::string(GetParam()),
      "plan of 2 data-parallel ranks");
}

// Stage 0 all-reduces whole gradients; stage 3 gathers and frees every group
// around each use and reduce-scatters each group's gradients as its backward
// ends, fetching one group ahead.
INSTANTIATE_TEST_SUITE_P(Stages, MpiPlan,
                         ::testing::Values("--set zero.stage=0",
                                           "--set zero.stage=3 --set zero.prefetch=1"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           return param.index == 0 ? std::string("stage0") : std::string("stage3");
                         });

// parallel.tensor: a tensor-parallel group holds one model between its
// ranks and trains on the same micro-batches, so its losses and gradient
// norms are one rank's; beside data parallelism (ZeRO-3 over the groups)
// they are one rank's accumulating the data-parallel ranks' micro-batches.
TEST_F(Mpi, TensorParallelGroupsLoseWhatOneRankLoses) {
  ASSERT_EQ(train(0,
                  "--set run.steps=4 --set batch.grad_accum=2 --set run.name=one "
                  "--set checkpoint.save_initial=true")
                .code,
            0);
  const std::vector<StepRecord> one = steps("one", 0);
  ASSERT_EQ(one.size(), 4u);
  // (ranks, the settings beside parallel.tensor = 2)
  std::vector<std::pair<int, std::string>> runs = {
      {2, "batch.grad_accum=2"},
      // Each rank's residual stream on half the tokens.
      {2, "batch.grad_accum=2 --set parallel.sequence=true"},
      // Another seed, and the single rank's initial weights loaded: every
      // rank takes its rows or columns of the file.
      {2,
       "batch.grad_accum=2 --set model.seed=5 --set "
       "model.weights=results/one/checkpoints/step-0"},
  };
#ifndef HEADROOM_SANITIZE
  // Four sanitized processes on two cores take minutes: the default build
  // runs them.
  runs.push_back({4, "batch.grad_accum=1 --set zero.stage=3"});
#endif
  int index = 0;
  for (const auto& [ranks, settings] : runs) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + settings);
    const std::string name = "tp" + std::to_string(index++);
    Result r = train(ranks, "--set run.steps=4 --set parallel.tensor=2 --set " + settings +
                                " --set run.name=" + name);
    ASSERT_EQ(r.code, 0) << r.err;
    int64_t tokens = 0;
    for (int rank = 0; rank < ranks; ++rank) {
      const std::vector<StepRecord> mine = steps(name, rank);
      ASSERT_EQ(mine.size(), one.size());
      for (size_t s = 0; s < mine.size(); ++s) {
        EXPECT_NEAR(mine[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s;
        EXPECT_NEAR(mine[s].grad_norm, one[s].grad_norm, 1e-5 * one[s].grad_norm) << "step " << s;
        // The data is dealt over the data-parallel ranks: the first rank of
        // each group counts it.
        if (rank % 2 == 0) tokens += mine[s].tokens;
      }
    }
    int64_t one_tokens = 0;
    for (const StepRecord& s : one)
      one_tokens += s.tokens;
    EXPECT_EQ(tokens, one_tokens);
  }
}

// How far the weights of a run resumed on another layout may be from the
// uninterrupted run's two updates later, relative to each tensor's largest
// value: summation-order bits through AdamW (a checkpoint read into the
// wrong part is off by whole updates, ~1e-3).
constexpr double kResumedWeights = 1e-4;

// A tensor-parallel checkpoint: the weights gathered whole into the Hugging
// Face file (a single-rank run loads it), an optimizer file per part and
// data-parallel shard; it resumes bit for bit on its own layout, and on
// another data-parallel size or another parallel.tensor (each part's
// optimizer states cut from the old parts) as the run itself goes on.
TEST_F(Mpi, ATensorParallelRunResumesFromItsCheckpoint) {
#ifdef HEADROOM_SANITIZE
  GTEST_SKIP() << "four sanitized ranks on two cores: the default build runs it";
#endif
  const std::string set =
      " --set run.steps=4 --set checkpoint.save_every=2 --set parallel.tensor=2 --set "
      "zero.stage=1 --set run.name=tp";
  ASSERT_EQ(train(4, set).code, 0);
  const fs::path step2 = dir_ / "results/tp/checkpoints/step-2";
  for (const char* file : {"optimizer.tp0.rank0.safetensors", "optimizer.tp0.rank1.safetensors",
                           "optimizer.tp1.rank0.safetensors", "optimizer.tp1.rank1.safetensors"})
    EXPECT_TRUE(fs::exists(step2 / file)) << file;
  EXPECT_NE(slurp(step2 / "trainer_state.json").find("\"tensor_parallel\": 2"), std::string::npos);
  const std::vector<StepRecord> full = steps("tp", 0);
  ASSERT_EQ(full.size(), 4u);
  Result resumed = train(4, set + " --set checkpoint.resume_from=" + step2.string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const std::vector<StepRecord> again =
      TraceReader::open((dir_ / "results/tp/trace.rank0.from-step-2.h5").string()).steps();
  ASSERT_EQ(again.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(again[i].loss, full[i + 2].loss) << "step " << i + 2;
  // One data-parallel rank accumulating both ranks' micro-batches.
  Result fewer = train(2, set +
                              " --set batch.grad_accum=2 --set run.name=tp_dp1 "
                              "--set checkpoint.resume_from=" +
                              step2.string());
  ASSERT_EQ(fewer.code, 0) << fewer.err;
  const std::vector<StepRecord> dp1 =
      TraceReader::open((dir_ / "results/tp_dp1/trace.rank0.from-step-2.h5").string()).steps();
  ASSERT_EQ(dp1.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(dp1[i].loss, full[i + 2].loss, 1e-5 * std::abs(full[i + 2].loss)) << i + 2;
  // Two data-parallel ranks without tensor parallelism: the same batches.
  Result untied = train(2, set +
                               " --set parallel.tensor=1 --set run.name=tp1 "
                               "--set checkpoint.resume_from=" +
                               step2.string());
  ASSERT_EQ(untied.code, 0) << untied.err;
  const std::vector<StepRecord> tp1 =
      TraceReader::open((dir_ / "results/tp1/trace.rank0.from-step-2.h5").string()).steps();
  ASSERT_EQ(tp1.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(tp1[i].loss, full[i + 2].loss, 1e-5 * std::abs(full[i + 2].loss)) << i + 2;
    EXPECT_NEAR(tp1[i].grad_norm, full[i + 2].grad_norm, 1e-5 * full[i + 2].grad_norm) << i + 2;
  }
  // The weights two updates on: what the optimizer states came back as.
  const fs::path weights = "checkpoints/step-4/model.safetensors";
  EXPECT_LE(
      largest_relative_difference(dir_ / "results/tp" / weights, dir_ / "results/tp1" / weights),
      kResumedWeights);
  // And the other way: a checkpoint of two data-parallel ranks resumed by
  // two tensor-parallel groups of two.
  const std::string dp =
      " --set run.steps=4 --set checkpoint.save_every=2 --set zero.stage=1 --set run.name=dp";
  ASSERT_EQ(train(2, dp).code, 0);
  const std::vector<StepRecord> dp_full = steps("dp", 0);
  Result split = train(4, dp +
                              " --set parallel.tensor=2 --set run.name=dp_tp2 "
                              "--set checkpoint.resume_from=" +
                              (dir_ / "results/dp/checkpoints/step-2").string());
  ASSERT_EQ(split.code, 0) << split.err;
  const std::vector<StepRecord> dp_tp2 =
      TraceReader::open((dir_ / "results/dp_tp2/trace.rank0.from-step-2.h5").string()).steps();
  ASSERT_EQ(dp_tp2.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(dp_tp2[i].loss, dp_full[i + 2].loss, 1e-5 * std::abs(dp_full[i + 2].loss)) << i + 2;
  EXPECT_LE(
      largest_relative_difference(dir_ / "results/dp" / weights, dir_ / "results/dp_tp2" / weights),
      kResumedWeights);
  // The weights file is the whole model's.
  Result single = train(0, "--set run.steps=1 --set run.name=from_tp --set model.weights=" +
                               (step2 / "model.safetensors").string());
  EXPECT_EQ(single.code, 0) << single.err;
}

// checkpoint.format = "sharded" under parallel.tensor: every rank writes
// its part's shard (shard.tp<t>.rank<R>), nothing gathered; it resumes bit
// for bit on its own layout and on another parallel.tensor as the run goes
// on, and export reassembles the Hugging Face file a consolidated
// checkpoint of the same run holds, byte for byte.
TEST_F(Mpi, AShardedTensorParallelCheckpointResumesOnAnyLayout) {
#ifdef HEADROOM_SANITIZE
  GTEST_SKIP() << "four sanitized ranks on two cores: the default build runs it";
#endif
  const std::string set =
      " --set run.steps=4 --set checkpoint.save_every=2 --set parallel.tensor=2 --set "
      "zero.stage=3 --set checkpoint.format='\"sharded\"' --set run.name=tps";
  ASSERT_EQ(train(4, set).code, 0);
  const fs::path step2 = dir_ / "results/tps/checkpoints/step-2";
  for (const char* file : {"shard.tp0.rank0.safetensors", "shard.tp0.rank1.safetensors",
                           "shard.tp1.rank0.safetensors", "shard.tp1.rank1.safetensors"})
    EXPECT_TRUE(fs::exists(step2 / file)) << file;
  const std::string index = slurp(step2 / "shard_index.json");
  EXPECT_NE(index.find("\"tensor_parallel\": 2"), std::string::npos);
  EXPECT_NE(index.find("\"split_dim\": 1"), std::string::npos);
  const std::vector<StepRecord> full = steps("tps", 0);
  ASSERT_EQ(full.size(), 4u);
  Result again = train(4, set + " --set checkpoint.resume_from=" + step2.string());
  ASSERT_EQ(again.code, 0) << again.err;
  const std::vector<StepRecord> same =
      TraceReader::open((dir_ / "results/tps/trace.rank0.from-step-2.h5").string()).steps();
  ASSERT_EQ(same.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(same[i].loss, full[i + 2].loss) << "step " << i + 2;
  Result untied = train(2, set +
                               " --set parallel.tensor=1 --set run.name=tps1 "
                               "--set checkpoint.resume_from=" +
                               step2.string());
  ASSERT_EQ(untied.code, 0) << untied.err;
  const std::vector<StepRecord> tp1 =
      TraceReader::open((dir_ / "results/tps1/trace.rank0.from-step-2.h5").string()).steps();
  ASSERT_EQ(tp1.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(tp1[i].loss, full[i + 2].loss, 1e-5 * std::abs(full[i + 2].loss)) << i + 2;
  for (const char* run : {"tps", "tps1"}) {
    Result r = run_headroom("export --checkpoint " +
                            (dir_ / "results" / run / "checkpoints/step-4").string() + " --out " +
                            (dir_ / (std::string(run) + "_hf")).string());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  EXPECT_LE(largest_relative_difference(dir_ / "tps_hf/model.safetensors",
                                        dir_ / "tps1_hf/model.safetensors"),
            kResumedWeights);
  // The same run saving consolidated checkpoints: its step-2 weights file.
  ASSERT_EQ(train(4,
                  " --set run.steps=4 --set checkpoint.save_every=2 --set parallel.tensor=2 "
                  "--set zero.stage=3 --set run.name=tpc")
                .code,
            0);
  Result exported = run_headroom("export --checkpoint " + step2.string() + " --out " +
                                 (dir_ / "exported").string());
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_EQ(slurp(dir_ / "exported/model.safetensors"),
            slurp(dir_ / "results/tpc/checkpoints/step-2/model.safetensors"));
}

TEST_F(Mpi, APlanOfTensorParallelRanksMakesEachRanksAllocations) {
#ifdef HEADROOM_SANITIZE
  GTEST_SKIP() << "four sanitized ranks on two cores: the default build runs it";
#endif
  // 2 groups of 2, ZeRO-3 over the groups, bf16: the blocks' all-reduces go
  // through fp32 comm buffers as the gradients' do.
  expect_each_plan_is_its_ranks_run(*this, dir_, 4,
                                    " --set run.steps=2 --set model.dtype=bf16 --set run.name=dp "
                                    "--set parallel.tensor=2 --set zero.stage=3",
                                    "plan of 4 ranks, 2 tensor-parallel groups of 2",
                                    "block.0.attn.o_proj.comm");
}

TEST_F(Mpi, APlanOfSequenceParallelRanksMakesEachRanksAllocations) {
  // The gathers and reduce-scatters of the residual stream in bf16: the
  // reduce-scatters through fp32 comm buffers.
  expect_each_plan_is_its_ranks_run(*this, dir_, 2,
                                    " --set run.steps=2 --set model.dtype=bf16 --set run.name=dp "
                                    "--set parallel.tensor=2 --set parallel.sequence=true",
                                    "plan of 2 ranks, 1 tensor-parallel groups of 2",
                                    "block.0.attn.o_proj.comm", false);
}

TEST_F(Mpi, ATensorParallelSizeThatDoesNotDivideTheRanksIsRefused) {
  Result r = train(2, "--set run.steps=1 --set parallel.tensor=4 --set run.name=bad");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("parallel.tensor = 4 does not divide the job's 2 ranks"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "results/bad/trace.rank0.h5"));
}

TEST_F(Mpi, ARankThatRunsOutOfMemoryEndsTheJobWithItsPostmortem) {
  // Forty 30-token documents and one of 1500: the step that draws the long
  // one gives it to one rank alone, and only that rank exceeds the capacity.
  TokenDatasetAttributes attributes;
  attributes.vocab_size = 512;
  attributes.tokenizer = "test";
  attributes.created_by = "mpi_test";
  {
    TokenDatasetWriter writer((dir_ / "long.h5").string(), attributes);
    std::vector<int32_t> tokens;
    for (int d = 0; d < 41; ++d) {
      tokens.assign(d == 17 ? 1500 : 30, 0);
      for (size_t t = 0; t < tokens.size(); ++t)
        tokens[t] = static_cast<int32_t>((d * 31 + t * 7) % 512);
      writer.append_document(tokens);
    }
    writer.finish();
  }
  Result r = train(2,
                   "--set data.path=long.h5 --set data.synthesize_if_missing=false "
                   "--set run.steps=8 --set memory.device_capacity=140MiB --set run.name=oom");
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_LT(r.seconds, 60) << "the other rank must not wait for the dead one";
  EXPECT_NE(r.err.find("ran out of memory"), std::string::npos) << r.err;
  int with_postmortem = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path path = dir_ / "results/oom" / ("trace.rank" + std::to_string(rank) + ".h5");
    ASSERT_TRUE(fs::exists(path)) << path;
    if (TraceReader::open(path.string()).has_oom()) ++with_postmortem;
  }
  EXPECT_EQ(with_postmortem, 1) << "exactly one rank ran out of memory";

  // The report of the run folder puts the ranks side by side.
  Result shown = run_headroom("report results/oom");
  ASSERT_EQ(shown.code, 0) << shown.err;
  const std::string& report = shown.out;
  EXPECT_NE(report.find("traces side by side"), std::string::npos) << report;
  EXPECT_NE(report.find("trace.rank1.h5"), std::string::npos) << report;
  EXPECT_NE(report.find("OUT OF MEMORY at step"), std::string::npos) << report;
}

// srun without an MPI plugin starts N tasks that would each train alone and
// write over one another's traces: refused, saying what to add.
TEST_F(Mpi, SrunWithoutAnMpiPluginIsRefused) {
  Result r = run_headroom("train --set run.steps=1", "SLURM_STEP_NUM_TASKS=2 ");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("srun started 2 tasks without an MPI plugin"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--mpi=pmix"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

TEST_F(Mpi, AnErrorOnAnyRankEndsTheJobWithTheRankNamed) {
  Result r = train(2,
                   "--set run.steps=2 --set data.path=missing.h5 "
                   "--set data.synthesize_if_missing=false");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("data.path = \"missing.h5\": no such file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 0 of 2"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 60);
}

}  // namespace
}  // namespace headroom
