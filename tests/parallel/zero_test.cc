// Zero in one process: on one rank every stage trains exactly as the model's
// own whole groups do (the numbers), and on a simulated rank of several the
// groups live only as long as ZeRO says (the memory). The numbers across
// real ranks are tested under mpirun in tests/cli/mpi_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "parallel/zero.h"
#include "train/train_test_util.h"
#include "train/trainer.h"

namespace headroom {
namespace {

ModelConfig small_model(bool tied) {
  return testing::small_model(3, tied);
}

std::vector<Batch> micro_batches(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Batch> batches(2);
  for (int64_t len : {7, 12, 3, 9}) {
    std::vector<int32_t> doc(static_cast<size_t>(len));
    for (auto& t : doc)
      t = static_cast<int32_t>(rng() % 19);
    append_document(batches[len % 2], doc.data(), len);
  }
  return batches;
}

// A model and its optimizer on one cpu rank, with its groups either its own
// (zero == nullptr) or held by a Zero of the given stage.
struct TrainingRun {
  Allocator allocator;
  std::unique_ptr<Backend> backend;
  // offloaded states
  Allocator host_allocator{make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0}};
  std::unique_ptr<Backend> host = make_cpu_backend(host_allocator);
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Zero> zero;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<Trainer> trainer;

  TrainingRun(bool tied, int stage, int prefetch, bool meta = false, int rank = 0,
              int world_size = 1, bool offload = false)
      : allocator(meta ? make_virtual_source() : make_host_source(),
                  AllocatorOptions{AllocatorPolicy::kExact, 0}),
        backend(meta ? make_meta_backend(allocator) : make_cpu_backend(allocator)) {
    TransformerOptions options;
    options.attention_block_size = 4;
    options.checkpoint_interval = 2;  // block 0 and 2 recompute: their params are read again
    TrainerOptions t;
    t.schedule = LrSchedule{
        .lr = 1e-2, .min_lr = 0, .warmup_steps = 0, .total_steps = 10, .decay = Decay::kConstant};
    if (stage < 0) {
      model = std::make_unique<Transformer>(*backend, small_model(tied), options);
      model->init_random(3);
      optimizer =
          std::make_unique<AdamW>(*backend, model->layouts(), model->params(), AdamWConfig{});
      trainer = std::make_unique<Trainer>(*backend, *model, *optimizer, t);
      return;
    }
    comm = world_size > 1 ? make_simulated_comm(rank, world_size) : make_single_rank_comm();
    zero = std::make_unique<Zero>(*backend, *comm, DType::kF32, ZeroOptions{stage, prefetch});
    model = std::make_unique<Transformer>(*backend, small_model(tied), options, zero.get());
    model->init_random(3);
    std::vector<GroupShard> shards;
    std::vector<Tensor> params;
    for (size_t g = 0; g < zero->num_groups(); ++g) {
      shards.push_back(zero->shard(g));
      params.push_back(zero->param_shard(g));
    }
    optimizer = std::make_unique<AdamW>(*backend, model->layouts(), std::move(shards),
                                        std::move(params), AdamWConfig{}, zero->shards_optimizer(),
                                        offload ? host.get() : nullptr);
    trainer = std::make_unique<Trainer>(*backend, *model, *optimizer, t, *zero);
  }

  // Group g's parameters, whole, on the host.
  std::vector<float> params(size_t g) {
    model->acquire_params(g);
    const Tensor& flat = model->params()[g].flat;
    std::vector<float> values(flat.data<float>(), flat.data<float>() + flat.numel());
    model->release_params(g);
    return values;
  }
};

class ZeroOnOneRank : public ::testing::TestWithParam<std::tuple<bool, int, int>> {};

// On one rank ZeRO moves nothing, so every stage must give the model's own
// numbers: gathering copies, reduce-scattering adds a group's micro-batch
// gradient to its (zeroed, then accumulating) shard.
TEST_P(ZeroOnOneRank, TrainsAsTheModelsOwnGroupsDo) {
  const auto [tied, stage, prefetch] = GetParam();
  TrainingRun own(tied, -1, 0), zero(tied, stage, prefetch);
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<Batch> batches = micro_batches(static_cast<uint64_t>(step));
    const StepRecord a = own.trainer->step(step, batches);
    const StepRecord b = zero.trainer->step(step, batches);
    EXPECT_NEAR(b.loss, a.loss, 1e-6 * a.loss) << "step " << step;
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-5 * a.grad_norm) << "step " << step;
    EXPECT_EQ(zero.zero->groups_in_flight(), 0u);
  }
  for (size_t g = 0; g < own.model->layouts().size(); ++g) {
    const std::vector<float> x = own.params(g), y = zero.params(g);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(y[i], x[i], 1e-6) << own.model->layouts()[g].name << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroOnOneRank,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(0, 2)));

// ZeRO-Offload: the same update, made on the host's copies; the device
// holds no optimizer byte and the host holds all 12 bytes per parameter
// (fp32 master copy, m, v).
TEST(ZeroOnOneRank, AnOffloadedOptimizerUpdatesAsOneOnTheDevice) {
  TrainingRun device(true, 2, 0), offloaded(true, 2, 0, false, 0, 1, /*offload=*/true);
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<Batch> batches = micro_batches(static_cast<uint64_t>(step));
    const StepRecord a = device.trainer->step(step, batches);
    const StepRecord b = offloaded.trainer->step(step, batches);
    EXPECT_EQ(b.loss, a.loss) << "step " << step;
    EXPECT_EQ(b.grad_norm, a.grad_norm) << "step " << step;
  }
  int64_t psi = 0;
  for (const GroupLayout& layout : device.model->layouts())
    psi += layout.numel;
  EXPECT_EQ(device.allocator.stats().live_by_category[static_cast<int>(Category::kOptim)],
            static_cast<uint64_t>(8 * psi));
  EXPECT_EQ(offloaded.allocator.stats().live_by_category[static_cast<int>(Category::kOptim)], 0u);
  EXPECT_EQ(offloaded.host_allocator.stats().live_by_category[static_cast<int>(Category::kOptim)],
            static_cast<uint64_t>(12 * psi));
  for (size_t g = 0; g < device.model->layouts().size(); ++g)
    EXPECT_EQ(device.params(g), offloaded.params(g)) << device.model->layouts()[g].name;
}

// Counts, through every allocator event, how many whole groups of each kind
// ("block.<l>.params", "block.<l>.grads") are alive at once, per phase.
class LiveGroups : public MemoryObserver {
 public:
  explicit LiveGroups(const Allocator& allocator) : allocator_(allocator) {}
  void on_memory_event(const MemoryEvent& e) override {
    if (e.action != MemoryAction::kAlloc && e.action != MemoryAction::kFree) return;
    static const std::regex whole(R"(block\.\d+\.(params|grads))");
    std::smatch m;
    const std::string& tag = allocator_.tags()[e.tag_id];
    if (!std::regex_match(tag, m, whole)) return;
    int& n = live_[m[1]];
    n += e.action == MemoryAction::kAlloc ? 1 : -1;
    if (e.phase != Phase::kInit) most_[m[1]] = std::max(most_[m[1]], n);
  }
  int most(const std::string& kind) { return most_[kind]; }
  int live(const std::string& kind) { return live_[kind]; }

 private:
  const Allocator& allocator_;
  std::map<std::string, int> live_, most_;
};

// Rank 1 of 4, simulated on meta: stage 3 holds a block's parameters whole
// only while it runs, plus `prefetch` blocks fetched ahead; stage 2 and 3
// hold a block's whole gradients only during its backward.
TEST(ZeroOnSeveralRanks, GroupsLiveOnlyAsLongAsTheirStageSays) {
  for (int stage : {2, 3}) {
    for (int prefetch : {0, 1, 2}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + ", prefetch " + std::to_string(prefetch));
      TrainingRun run(false, stage, prefetch, /*meta=*/true, /*rank=*/1, /*world_size=*/4);
      LiveGroups live(run.allocator);
      run.allocator.add_observer(&live);
      run.trainer->step(0, micro_batches(0));
      run.allocator.remove_observer(&live);
      EXPECT_EQ(live.most("grads"), 1) << "one block's whole gradients at a time";
      EXPECT_EQ(live.live("grads"), 0);
      if (stage == 3) {
        EXPECT_EQ(live.most("params"), 1 + prefetch) << "the block in use and those fetched ahead";
        EXPECT_EQ(live.live("params"), 0) << "every gathered block was released";
      } else {
        EXPECT_EQ(live.most("params"), 0) << "stage 2 keeps parameters whole from init";
      }
    }
  }
}

}  // namespace
}  // namespace headroom
