// ZeRO-3's prefetch against the Communicator contract of
// start_all_gather_in_place / wait_for: a group fetched ahead is waited for
// before its own use and before it is freed or rewritten, each pending
// gather exactly once, and a Zero destroyed with gathers still pending waits
// for them. NcclComm keeps the order on the device with CUDA events (run by
// scripts/device-check.sh); here the order of the calls is what is checked,
// on a simulated rank of two over the cpu backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "memory/allocator.h"
#include "parallel/zero.h"

namespace headroom {
namespace {

// The simulated communicator's collectives, with each started gather left
// pending until wait_for, and every start and wait written to `log`
// ("start 1", "wait 1", "gather" for a gather awaited at once).
class DeferringComm final : public Communicator {
 public:
  explicit DeferringComm(std::vector<std::string>& log)
      : inner_(make_simulated_comm(0, 2)), log_(&log) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  bool is_distributed() const override { return false; }
  bool moves_tensors_of(BackendKind kind) const override { return inner_->moves_tensors_of(kind); }
  void all_reduce_sum(Backend& b, Tensor& t, std::string_view tag) override {
    inner_->all_reduce_sum(b, t, tag);
  }
  void all_reduce_sum(std::span<double> values) override { inner_->all_reduce_sum(values); }
  void all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) override {
    log_->push_back("gather");
    inner_->all_gather_in_place(flat, counts);
  }
  PendingGather start_all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) override {
    inner_->all_gather_in_place(flat, counts);
    const PendingGather pending{next_++};
    log_->push_back("start " + std::to_string(pending.id));
    open_.push_back(pending.id);
    return pending;
  }
  void wait_for(PendingGather pending) override {
    if (pending.id == 0) return;
    auto found = std::find(open_.begin(), open_.end(), pending.id);
    ASSERT_NE(found, open_.end()) << "gather " << pending.id << " waited for twice";
    open_.erase(found);
    log_->push_back("wait " + std::to_string(pending.id));
  }
  void reduce_scatter_sum_in_place(Backend& b, Tensor& flat, std::span<const int64_t> counts,
                                   std::string_view tag) override {
    inner_->reduce_scatter_sum_in_place(b, flat, counts, tag);
  }
  void broadcast(Tensor& tensor, int root) override { inner_->broadcast(tensor, root); }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override { std::_Exit(exit_code); }
  size_t open() const { return open_.size(); }

 private:
  std::unique_ptr<Communicator> inner_;
  std::vector<std::string>* log_;
  std::vector<uint64_t> open_;
  uint64_t next_ = 1;
};

struct PrefetchFixture {
  std::vector<std::string> log;
  Allocator allocator{make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0}};
  std::unique_ptr<Backend> backend = make_cpu_backend(allocator);
  DeferringComm comm{log};
  std::vector<GroupLayout> layouts;
  std::vector<FlatGroup> params, grads;
  std::unique_ptr<Zero> zero;

  explicit PrefetchFixture(int prefetch) {
    for (int g = 0; g < 4; ++g)
      layouts.push_back(GroupLayout::make("block." + std::to_string(g),
                                          {ParamSpec{"w" + std::to_string(g), Shape{6, 5}}}));
    params.resize(layouts.size());
    grads.resize(layouts.size());
    zero = std::make_unique<Zero>(*backend, comm, DType::kF32, ZeroOptions{3, prefetch});
    zero->bind(layouts, params, grads);
  }
};

TEST(ZeroPrefetch, AGroupFetchedAheadIsWaitedForAtItsOwnAcquire) {
  PrefetchFixture f(2);
  const std::vector<size_t> ahead0{1, 2, 3}, ahead1{2, 3}, ahead2{3}, none{};
  f.zero->acquire_params(0, ahead0);
  EXPECT_EQ(f.log, (std::vector<std::string>{"gather", "start 1", "start 2"}));
  f.zero->release_params(0);
  f.zero->acquire_params(1, ahead1);
  f.zero->release_params(1);
  f.zero->acquire_params(2, ahead2);
  f.zero->release_params(2);
  f.zero->acquire_params(3, none);
  f.zero->release_params(3);
  EXPECT_EQ(f.log, (std::vector<std::string>{"gather", "start 1", "start 2", "wait 1", "start 3",
                                             "wait 2", "wait 3"}));
  EXPECT_EQ(f.comm.open(), 0u);
  EXPECT_EQ(f.zero->groups_in_flight(), 0u);
}

TEST(ZeroPrefetch, WithoutPrefetchEveryGatherIsAwaitedAtOnce) {
  PrefetchFixture f(0);
  const std::vector<size_t> ahead{1, 2, 3};
  f.zero->acquire_params(0, ahead);
  f.zero->release_params(0);
  f.zero->acquire_params(1, ahead);
  f.zero->release_params(1);
  EXPECT_EQ(f.log, (std::vector<std::string>{"gather", "gather"}));
}

TEST(ZeroPrefetch, APrefetchedGroupIsWaitedForBeforeItIsRewritten) {
  PrefetchFixture f(1);
  const std::vector<size_t> ahead{1};
  f.zero->acquire_params(0, ahead);
  f.zero->release_params(0);
  // The optimizer writes group 1 while its prefetched copy may still be landing.
  f.zero->begin_params_write(1);
  EXPECT_EQ(f.log, (std::vector<std::string>{"gather", "start 1", "wait 1"}));
  f.zero->end_params_write(1);
  EXPECT_EQ(f.comm.open(), 0u);
}

TEST(ZeroPrefetch, DestroyingZeroWaitsForWhatIsStillPending) {
  PrefetchFixture f(2);
  const std::vector<size_t> ahead{1, 2};
  f.zero->acquire_params(0, ahead);
  f.zero->release_params(0);
  EXPECT_EQ(f.comm.open(), 2u);
  f.zero.reset();
  EXPECT_EQ(f.comm.open(), 0u);
  EXPECT_EQ(f.log.back(), "wait 2");
}

}  // namespace
}  // namespace headroom
