// NcclComm in a world of one (Open MPI's singleton init needs no mpirun):
// every collective must leave device tensors exactly as they were, and a
// bf16 reduction must make the allocations reduce_through_fp32_buffer makes,
// so a plan (meta + simulated comm) and a run on NCCL agree. Several ranks
// need several GPUs and a launcher; those checks are not here. Skipped
// without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "comm/nccl_comm.h"
#include "memory/allocator.h"
#include "memory/event.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace headroom {
namespace {

using EventRecord = std::tuple<MemoryAction, uint64_t, Category, std::string>;

// Block allocations and frees in order (segments depend on the cache's past,
// not on the communicator, so they are left out).
class BlockEvents final : public MemoryObserver {
 public:
  explicit BlockEvents(Allocator& allocator) : allocator_(allocator) {
    allocator_.add_observer(this);
  }
  ~BlockEvents() override { allocator_.remove_observer(this); }
  void on_memory_event(const MemoryEvent& e) override {
    if (e.action == MemoryAction::kAlloc || e.action == MemoryAction::kFree)
      events_.emplace_back(e.action, e.bytes, e.category, allocator_.tags().at(e.tag_id));
  }
  const std::vector<EventRecord>& events() const { return events_; }
  int comm_allocs() const {
    int n = 0;
    for (const auto& [action, bytes, category, tag] : events_)
      n += action == MemoryAction::kAlloc && category == Category::kComm;
    return n;
  }

 private:
  Allocator& allocator_;
  std::vector<EventRecord> events_;
};

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      GTEST_SKIP() << "no CUDA device visible";
    }
    allocator_ = std::make_unique<Allocator>(make_cuda_source(), AllocatorOptions{});
    // There is no cuda Backend yet: the communicator takes a Backend only for
    // its allocator, and a meta backend over the cuda allocator holds it.
    backend_ = make_meta_backend(*allocator_);
    comm_ = make_nccl_comm(0);
  }

  Tensor floats(const std::vector<float>& values, const std::string& tag) {
    Tensor t = Tensor::empty(*allocator_, BackendKind::kCuda, {static_cast<int64_t>(values.size())},
                             DType::kF32, Category::kGrad, tag);
    EXPECT_EQ(cudaMemcpy(t.raw(), values.data(), t.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    return t;
  }
  Tensor bf16s(const std::vector<uint16_t>& bits, const std::string& tag) {
    Tensor t = Tensor::empty(*allocator_, BackendKind::kCuda, {static_cast<int64_t>(bits.size())},
                             DType::kBF16, Category::kGrad, tag);
    EXPECT_EQ(cudaMemcpy(t.raw(), bits.data(), t.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    return t;
  }
  template <typename T>
  std::vector<T> to_host(const Tensor& t) {
    std::vector<T> out(t.nbytes() / sizeof(T));
    EXPECT_EQ(cudaMemcpy(out.data(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> comm_;
};

constexpr int64_t kN = 100003;  // not a multiple of any block or chunk size

std::vector<float> some_floats() {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i)
    v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i)) * 3.0f;
  return v;
}

std::vector<uint16_t> some_bf16s() {
  std::vector<uint16_t> v(kN);
  for (int64_t i = 0; i < kN; ++i)
    v[static_cast<size_t>(i)] = to_bf16(std::cos(static_cast<float>(i) * 0.5f)).bits;
  return v;
}

TEST_F(Nccl, AWorldOfOne) {
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->world_size(), 1);
  EXPECT_FALSE(comm_->is_distributed());
  comm_->barrier();
}

// parallel.tensor's groups: ncclCommSplit (and MPI_Comm_split) of the job;
// here the only group of a world of one, whose collectives still run.
TEST_F(Nccl, ASubgroupIsACommunicatorOfItsOwn) {
  std::unique_ptr<Communicator> group = comm_->subgroup(0, 1, 1);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->world_size(), 1);
  const std::vector<float> f = some_floats();
  Tensor t = floats(f, "grad.f32");
  group->all_reduce_sum(*backend_, t, "grad.f32");
  EXPECT_EQ(to_host<float>(t), f);
  double sums[2] = {1.5, 2.5};
  group->all_reduce_sum(sums);
  EXPECT_EQ(sums[1], 2.5);
  group->barrier();
}

TEST_F(Nccl, AllReduceOfOneRankChangesNothing) {
  const std::vector<float> f = some_floats();
  Tensor tf = floats(f, "grad.f32");
  comm_->all_reduce_sum(*backend_, tf, "grad.f32");
  EXPECT_EQ(to_host<float>(tf), f);

  const std::vector<uint16_t> h = some_bf16s();
  Tensor th = bf16s(h, "grad.bf16");
  comm_->all_reduce_sum(*backend_, th, "grad.bf16");
  EXPECT_EQ(to_host<uint16_t>(th), h) << "bf16 -> fp32 -> bf16 is exact";
}

TEST_F(Nccl, Fp32ReductionsAllocateNothing) {
  Tensor t = floats(some_floats(), "grad");
  BlockEvents events(*allocator_);
  comm_->all_reduce_sum(*backend_, t, "grad");
  comm_->reduce_scatter_sum_in_place(*backend_, t, std::vector<int64_t>{kN}, "grad");
  EXPECT_TRUE(events.events().empty());
}

TEST_F(Nccl, Bf16ReductionAllocatesWhatReduceThroughFp32BufferDoes) {
  Tensor t = bf16s(some_bf16s(), "grad");
  BlockEvents events(*allocator_);
  comm_->all_reduce_sum(*backend_, t, "grad");
  EXPECT_EQ(events.comm_allocs(), 2);
  const std::vector<EventRecord> expected = {
      {MemoryAction::kAlloc, Allocator::round_size(kN * 4), Category::kComm, "grad.comm"},
      {MemoryAction::kAlloc, Allocator::round_size(kN * 2), Category::kComm, "grad.comm"},
      {MemoryAction::kFree, Allocator::round_size(kN * 2), Category::kComm, "grad.comm"},
      {MemoryAction::kFree, Allocator::round_size(kN * 4), Category::kComm, "grad.comm"},
  };
  EXPECT_EQ(events.events(), expected);

  // The plan's side: a simulated rank on meta, through the shared helper.
  Allocator meta_allocator(make_virtual_source(), AllocatorOptions{});
  std::unique_ptr<Backend> meta = make_meta_backend(meta_allocator);
  Tensor planned = meta->empty({kN}, DType::kBF16, Category::kGrad, "grad");
  BlockEvents plan(meta_allocator);
  make_simulated_comm(0, 2)->all_reduce_sum(*meta, planned, "grad");
  EXPECT_EQ(events.events(), plan.events()) << "plan and run allocate alike";
}

TEST_F(Nccl, GatherAndReduceScatterOfOnePieceAreIdentities) {
  const std::vector<int64_t> counts = {kN};
  const std::vector<float> f = some_floats();
  Tensor tf = floats(f, "shard.f32");
  comm_->all_gather_in_place(tf, counts);
  EXPECT_EQ(to_host<float>(tf), f);
  comm_->reduce_scatter_sum_in_place(*backend_, tf, counts, "shard.f32");
  EXPECT_EQ(to_host<float>(tf), f);

  const std::vector<uint16_t> h = some_bf16s();
  Tensor th = bf16s(h, "shard.bf16");
  comm_->all_gather_in_place(th, counts);
  EXPECT_EQ(to_host<uint16_t>(th), h);
  BlockEvents events(*allocator_);
  comm_->reduce_scatter_sum_in_place(*backend_, th, counts, "shard.bf16");
  EXPECT_EQ(to_host<uint16_t>(th), h);
  EXPECT_EQ(events.comm_allocs(), 2);
}

TEST_F(Nccl, BroadcastFromRootZeroIsAnIdentity) {
  const std::vector<float> f = some_floats();
  Tensor t = floats(f, "params");
  comm_->broadcast(t, 0);
  EXPECT_EQ(to_host<float>(t), f);
}

TEST_F(Nccl, HostSumsOfOneRankChangeNothing) {
  std::vector<double> values = {1.5, -2.25, 1e300, 0.0};
  const std::vector<double> before = values;
  comm_->all_reduce_sum(values);
  EXPECT_EQ(values, before);
}

TEST_F(Nccl, OnALentStreamCollectivesAreOrderedOnTheDevice) {
  // The backend's stream lent, as Run does: NCCL runs on the comm stream
  // between events, and the host waits only for the lent stream at the end.
  cudaStream_t lent = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&lent, cudaStreamNonBlocking), cudaSuccess);
  comm_->use_device_stream(lent);
  const std::vector<int64_t> counts = {kN};
  const std::vector<float> f = some_floats();
  Tensor t =
      Tensor::empty(*allocator_, BackendKind::kCuda, {kN}, DType::kF32, Category::kParam, "params");
  ASSERT_EQ(cudaMemcpyAsync(t.raw(), f.data(), t.nbytes(), cudaMemcpyHostToDevice, lent),
            cudaSuccess);
  const PendingGather pending = comm_->start_all_gather_in_place(t, counts);
  EXPECT_NE(pending.id, 0u) << "a lent stream defers the wait";
  comm_->wait_for(pending);
  const std::vector<uint16_t> h = some_bf16s();
  Tensor th =
      Tensor::empty(*allocator_, BackendKind::kCuda, {kN}, DType::kBF16, Category::kGrad, "grad");
  ASSERT_EQ(cudaMemcpyAsync(th.raw(), h.data(), th.nbytes(), cudaMemcpyHostToDevice, lent),
            cudaSuccess);
  BlockEvents events(*allocator_);
  comm_->all_reduce_sum(*backend_, th, "grad");
  EXPECT_EQ(events.comm_allocs(), 2) << "the same comm buffers as on the own stream";
  std::vector<float> back(f.size());
  std::vector<uint16_t> back_h(h.size());
  ASSERT_EQ(cudaMemcpyAsync(back.data(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, lent),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(back_h.data(), th.raw(), th.nbytes(), cudaMemcpyDeviceToHost, lent),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(lent), cudaSuccess);
  EXPECT_EQ(back, f);
  EXPECT_EQ(back_h, h);
  comm_->use_device_stream(nullptr);
  EXPECT_EQ(cudaStreamDestroy(lent), cudaSuccess);
}

TEST_F(Nccl, HostTensorsAreRefused) {
  Allocator host(make_host_source(), AllocatorOptions{});
  Tensor t = Tensor::empty(host, BackendKind::kCpu, {4}, DType::kF32, Category::kGrad, "host");
  EXPECT_THROW(comm_->broadcast(t, 0), InternalError);
}

}  // namespace
}  // namespace headroom
