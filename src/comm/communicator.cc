#include "comm/communicator.h"

#include <cstdlib>
#include <string>

#include "util/error.h"

namespace headroom {

namespace {

class SingleRank final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  bool is_distributed() const override { return false; }
  bool moves_tensors_of(BackendKind /*kind*/) const override { return true; }
  void all_reduce_sum(Backend&, Tensor&, std::string_view) override {}
  void all_reduce_sum(std::span<double>) override {}
  void all_gather_in_place(Tensor&, std::span<const int64_t>) override {}
  void reduce_scatter_sum_in_place(Backend&, Tensor&, std::span<const int64_t>,
                                   std::string_view) override {}
  void broadcast(Tensor&, int) override {}
  void barrier() override {}
  std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override {
    HR_CHECK(first == 0 && count == 1 && stride >= 1, "a world of one has one group of one");
    return std::make_unique<SingleRank>();
  }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

class Simulated final : public Communicator {
 public:
  Simulated(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  bool is_distributed() const override { return false; }
  bool moves_tensors_of(BackendKind /*kind*/) const override { return true; }
  void all_reduce_sum(Backend& backend, Tensor& tensor, std::string_view tag) override {
    if (tensor.dtype() == DType::kF32) return;  // MPI reduces fp32 in place: nothing allocated
    reduce_through_fp32_buffer(backend, tensor, tag, [](Tensor&) {});
  }
  void all_reduce_sum(std::span<double>) override {}
  void all_gather_in_place(Tensor&, std::span<const int64_t>) override {}
  void reduce_scatter_sum_in_place(Backend& backend, Tensor& flat, std::span<const int64_t> counts,
                                   std::string_view tag) override {
    if (flat.dtype() == DType::kF32) return;
    const auto [begin, end] = piece_of(counts, rank_);
    reduce_scatter_through_fp32_buffer(backend, flat, begin, end, tag, [](Tensor&) {});
  }
  void broadcast(Tensor&, int) override {}
  void barrier() override {}
  std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override {
    HR_CHECK(check_subgroup(first, stride, count, rank_, world_size_), "a simulated subgroup");
    return std::make_unique<Simulated>((rank_ - first) / stride, count);
  }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }

 private:
  int rank_;
  int world_size_;
};

}  // namespace

bool check_subgroup(int first, int stride, int count, int rank, int world_size) {
  return first >= 0 && stride >= 1 && count >= 1 && first + (count - 1) * stride < world_size &&
         rank >= first && (rank - first) % stride == 0 && (rank - first) / stride < count;
}

std::unique_ptr<Communicator> Communicator::subgroup(int /*first*/, int /*stride*/, int /*count*/) {
  throw UsageError(
      "parallel.tensor > 1 on this communicator: it cannot make tensor-parallel groups (MPI's "
      "and NCCL's can: launch with mpirun or srun)");
}

void reduce_through_fp32_buffer(Backend& backend, Tensor& tensor, std::string_view tag,
                                const std::function<void(Tensor&)>& reduce) {
  HR_CHECK(is_half(tensor.dtype()), "only bf16 and fp16 are widened for a reduction");
  const std::string name = std::string(tag) + ".comm";
  Tensor wide = backend.cast(tensor, DType::kF32, Category::kComm, name);
  reduce(wide);
  Tensor narrow = backend.cast(wide, tensor.dtype(), Category::kComm, name);
  backend.copy(narrow, tensor);
}

void reduce_scatter_through_fp32_buffer(Backend& backend, Tensor& flat, int64_t begin, int64_t end,
                                        std::string_view tag,
                                        const std::function<void(Tensor&)>& reduce) {
  HR_CHECK(is_half(flat.dtype()), "only bf16 and fp16 are widened for a reduction");
  HR_CHECK(0 <= begin && begin <= end && end <= flat.numel(), "the piece lies in the buffer");
  const std::string name = std::string(tag) + ".comm";
  Tensor wide = backend.cast(flat, DType::kF32, Category::kComm, name);
  reduce(wide);
  if (begin == end) return;
  Tensor narrow = backend.cast(wide.rows(begin, end), flat.dtype(), Category::kComm, name);
  Tensor mine = flat.rows(begin, end);
  backend.copy(narrow, mine);
}

std::pair<int64_t, int64_t> piece_of(std::span<const int64_t> counts, int rank) {
  HR_CHECK(rank >= 0 && static_cast<size_t>(rank) < counts.size(), "one count per rank");
  int64_t begin = 0;
  for (int r = 0; r < rank; ++r)
    begin += counts[static_cast<size_t>(r)];
  return {begin, begin + counts[static_cast<size_t>(rank)]};
}

std::unique_ptr<Communicator> make_single_rank_comm() {
  return std::make_unique<SingleRank>();
}

std::unique_ptr<Communicator> make_simulated_comm(int rank, int world_size) {
  HR_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "a simulated rank is a rank");
  return std::make_unique<Simulated>(rank, world_size);
}

}  // namespace headroom
