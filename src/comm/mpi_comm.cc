#include "comm/mpi_comm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "comm/collective_watchdog.h"
#include "util/error.h"

namespace headroom {

namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw InternalError(std::string(what) + " failed: " + std::string(text, length));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiComm final : public Communicator {
 public:
  MpiComm() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      check(MPI_Init(nullptr, nullptr), "MPI_Init");
      std::atexit(finalize_at_exit);
    }
    // Errors come back as codes (turned into exceptions) instead of MPI's
    // default of aborting without a word.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  // A communicator MPI_Comm_split made (subgroup), freed with this one.
  MpiComm(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    watchdog_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_WORLD && !finalized) MPI_Comm_free(&comm_);
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override {
    HR_CHECK(check_subgroup(first, stride, count, rank_, size_),
             "rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                 " is not in the subgroup it names");
    MPI_Comm sub = MPI_COMM_NULL;
    // The groups partition the ranks and each is named by its first rank.
    check(MPI_Comm_split(comm_, first, rank_, &sub), "MPI_Comm_split");
    std::string name =
        "ranks " + std::to_string(first) + ".." + std::to_string(first + (count - 1) * stride);
    if (stride > 1) name += " step " + std::to_string(stride);
    return std::unique_ptr<Communicator>(new MpiComm(sub, name + " of " + name_));
  }

  void set_collective_timeout(int64_t seconds,
                              std::function<std::string(const std::string&)> describe) override {
    watchdog_.reset();
    if (seconds <= 0 || size_ <= 1) return;
    describe_ = std::move(describe);
    watchdog_ = std::make_unique<CollectiveWatchdog>(
        std::chrono::seconds(seconds), [this, seconds](const std::string& what) {
          const std::string waited = what + " did not complete within " + std::to_string(seconds) +
                                     " s (run.collective_timeout)";
          std::string line = waited;
          try {
            if (describe_) line = describe_(waited);
          } catch (...) {
            // The report is best effort; ending the job is what matters.
          }
          std::fprintf(stderr, "headroom train: rank %d of %d: %s; aborting the job\n", rank_,
                       size_, line.c_str());
          std::fflush(stderr);
          MPI_Abort(MPI_COMM_WORLD, 1);
          std::_Exit(1);
        });
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  bool is_distributed() const override { return size_ > 1; }
  bool moves_tensors_of(BackendKind kind) const override { return kind == BackendKind::kCpu; }

  void all_reduce_sum(Backend& backend, Tensor& tensor, std::string_view tag) override {
    HR_CHECK(backend.kind() == BackendKind::kCpu, "MpiComm reduces host (cpu) tensors");
    tag_ = tag;
    if (tensor.dtype() == DType::kF32) {
      reduce_floats(static_cast<float*>(tensor.raw()), tensor.numel());
      return;
    }
    HR_CHECK(is_half(tensor.dtype()), "all_reduce_sum takes fp32, bf16 or fp16");
    reduce_through_fp32_buffer(backend, tensor, tag, [&](Tensor& wide) {
      reduce_floats(static_cast<float*>(wide.raw()), wide.numel());
    });
  }

  void reduce_scatter_sum_in_place(Backend& backend, Tensor& flat, std::span<const int64_t> counts,
                                   std::string_view tag) override {
    HR_CHECK(backend.kind() == BackendKind::kCpu, "MpiComm reduces host (cpu) tensors");
    tag_ = tag;
    if (flat.dtype() == DType::kF32) {
      reduce_scatter_floats(static_cast<float*>(flat.raw()), flat.numel(), counts);
      return;
    }
    HR_CHECK(is_half(flat.dtype()), "reduce_scatter_sum_in_place takes fp32, bf16 or fp16");
    const auto [begin, end] = piece_of(counts, rank_);
    reduce_scatter_through_fp32_buffer(backend, flat, begin, end, tag, [&](Tensor& wide) {
      reduce_scatter_floats(static_cast<float*>(wide.raw()), wide.numel(), counts);
    });
  }

  void broadcast(Tensor& tensor, int root) override {
    HR_CHECK(root >= 0 && root < size_, "the broadcast's root is a rank");
    auto* bytes = static_cast<char*>(tensor.raw());
    constexpr int64_t kPiece = int64_t{1} << 30;
    ArmedCollective armed = arm("MPI_Bcast", "");
    for (int64_t done = 0; done < static_cast<int64_t>(tensor.nbytes()); done += kPiece)
      check(MPI_Bcast(
                bytes + done,
                static_cast<int>(std::min(kPiece, static_cast<int64_t>(tensor.nbytes()) - done)),
                MPI_BYTE, root, comm_),
            "MPI_Bcast");
  }

  void all_reduce_sum(std::span<double> values) override {
    ArmedCollective armed = arm("MPI_Allreduce", "host sums");
    check(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                        MPI_SUM, comm_),
          "MPI_Allreduce");
  }

  void all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) override {
    HR_CHECK(static_cast<int>(counts.size()) == size_, "one count per rank");
    HR_CHECK(flat.dtype() == DType::kF32 || is_half(flat.dtype()),
             "all_gather_in_place takes fp32, bf16 or fp16");
    // bf16 and fp16 travel as their 16 bits: gathering adds nothing up.
    MPI_Datatype type = flat.dtype() == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T;
    std::vector<int> count(counts.size()), displacement(counts.size());
    int64_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      HR_CHECK(offset + counts[r] <= std::numeric_limits<int>::max(),
               "an all-gathered group fits MPI's int counts");
      count[r] = static_cast<int>(counts[r]);
      displacement[r] = static_cast<int>(offset);
      offset += counts[r];
    }
    HR_CHECK(offset <= flat.numel(), "the pieces fit the buffer");
    ArmedCollective armed = arm("MPI_Allgatherv", "");
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, flat.raw(), count.data(),
                         displacement.data(), type, comm_),
          "MPI_Allgatherv");
  }

  void barrier() override {
    ArmedCollective armed = arm("MPI_Barrier", "");
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  // The watchdog armed for `collective` over the world ("" tag: none).
  ArmedCollective arm(const char* collective, std::string_view tag) {
    if (!watchdog_) return ArmedCollective(nullptr, "");
    std::string what =
        std::string(collective) + " over " + name_ + " (" + std::to_string(size_) + " ranks)";
    if (!tag.empty()) what += " of " + std::string(tag);
    return ArmedCollective(watchdog_.get(), std::move(what));
  }

  void reduce_floats(float* data, int64_t count) {
    // MPI counts are int: large groups go in pieces.
    constexpr int64_t kPiece = int64_t{1} << 30;
    ArmedCollective armed = arm("MPI_Allreduce", tag_);
    for (int64_t done = 0; done < count; done += kPiece)
      check(
          MPI_Allreduce(MPI_IN_PLACE, data + done, static_cast<int>(std::min(kPiece, count - done)),
                        MPI_FLOAT, MPI_SUM, comm_),
          "MPI_Allreduce");
  }

  // MPI_Reduce_scatter in place leaves this rank's summed piece at the
  // start of the buffer; it is moved to where the piece belongs.
  void reduce_scatter_floats(float* data, int64_t count, std::span<const int64_t> counts) {
    HR_CHECK(static_cast<int>(counts.size()) == size_, "one count per rank");
    std::vector<int> pieces(counts.size());
    int64_t total = 0, offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      HR_CHECK(counts[r] <= std::numeric_limits<int>::max(),
               "a reduce-scattered piece fits MPI's int counts");
      pieces[r] = static_cast<int>(counts[r]);
      if (static_cast<int>(r) < rank_) offset += counts[r];
      total += counts[r];
    }
    HR_CHECK(total <= count, "the pieces fit the buffer");
    ArmedCollective armed = arm("MPI_Reduce_scatter", tag_);
    check(MPI_Reduce_scatter(MPI_IN_PLACE, data, pieces.data(), MPI_FLOAT, MPI_SUM, comm_),
          "MPI_Reduce_scatter");
    if (offset > 0 && pieces[static_cast<size_t>(rank_)] > 0)
      std::memmove(data + offset, data,
                   static_cast<size_t>(pieces[static_cast<size_t>(rank_)]) * sizeof(float));
  }

  MPI_Comm comm_ = MPI_COMM_WORLD;
  std::string name_ = "MPI_COMM_WORLD";  // in the watchdog's report
  int rank_ = 0;
  int size_ = 1;
  std::string_view tag_;  // the tensor reduction in flight, for the watchdog's report
  std::function<std::string(const std::string&)> describe_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // run.collective_timeout; null: off
};

}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

int srun_tasks_without_mpi() {
  const int tasks = env_int("SLURM_STEP_NUM_TASKS", 0);
  return tasks > 1 && !launched_by_mpi() ? tasks : 0;
}

std::unique_ptr<Communicator> make_mpi_comm() {
  return std::make_unique<MpiComm>();
}

}  // namespace headroom
