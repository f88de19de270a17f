#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/nccl_library.h"
#include "kernels.h"
#include "kernels_elementwise.h"  // cast_f16_to_f32 / cast_f32_to_f16
#include "util/error.h"
#include "util/local_rank.h"

namespace headroom {

namespace {

void check_mpi(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw InternalError(what + " failed: " + std::string(text, static_cast<size_t>(length)));
}

void check_cuda(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  throw InternalError(what + " failed: " + cudaGetErrorString(status));
}

void finalize_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Element offset of each rank's piece, and the total, for the in-place
// gather and reduce-scatter.
std::vector<int64_t> piece_offsets(const Tensor& flat, std::span<const int64_t> counts,
                                   int world_size, const char* collective) {
  HR_CHECK(static_cast<int>(counts.size()) == world_size,
           std::string(collective) + " of " + flat.tag() + ": " + std::to_string(counts.size()) +
               " counts for " + std::to_string(world_size) + " ranks");
  std::vector<int64_t> offsets(counts.size());
  int64_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    HR_CHECK(counts[r] >= 0, std::string(collective) + " of " + flat.tag() + ": rank " +
                                 std::to_string(r) + "'s count is negative");
    offsets[r] = offset;
    offset += counts[r];
  }
  HR_CHECK(offset <= flat.numel(), std::string(collective) + " of " + flat.tag() + " (" +
                                       flat.describe() + "): the pieces add up to " +
                                       std::to_string(offset) + " elements");
  return offsets;
}

class NcclComm final : public Communicator {
 public:
  explicit NcclComm(int device) : device_(device) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      check_mpi(MPI_Init(nullptr, nullptr), "MPI_Init");
      std::atexit(finalize_mpi_at_exit);
    }
    // Errors come back as codes (turned into exceptions) instead of MPI's
    // default of aborting without a word.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);

    check_cuda(cudaSetDevice(device_), where() + "cudaSetDevice(" + std::to_string(device_) + ")");
    // NCCL's own bootstrap needs every rank to hold the same unique id; MPI
    // is already the job's launcher, so it carries the id.
    ncclUniqueId id{};
    if (rank_ == 0) check_nccl(nccl_library().ncclGetUniqueId(&id), "ncclGetUniqueId");
    check_mpi(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD),
              where() + "MPI_Bcast(ncclUniqueId)");
    try {
      make_streams();
      check_nccl(nccl_library().ncclCommInitRank(&comm_, size_, id, rank_),
                 "ncclCommInitRank(device " + std::to_string(device_) + ")");
    } catch (...) {
      release();  // the destructor does not run for a half-made object
      throw;
    }
  }

  ~NcclComm() override { release(); }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  bool is_distributed() const override { return size_ > 1; }
  bool moves_tensors_of(BackendKind kind) const override { return kind == BackendKind::kCuda; }

  // The backend's stream replaces ours: its kernels are on a non-blocking
  // stream, which ours would not wait for. From then on NCCL runs on the
  // comm stream between two events (nccl_stream, end_collective), so no
  // collective on device tensors waits on the host.
  void use_device_stream(void* stream) override {
    HR_CHECK(pending_.empty(), "use_device_stream while a gather is pending");
    lent_ = stream != nullptr;
    stream_ = lent_ ? static_cast<cudaStream_t>(stream) : own_stream_;
  }

  // There is no cuda Backend class yet, so `backend` serves only as the
  // holder of the allocator the comm buffers come from; the casts are the
  // kernels of cuda/kernels.h, launched here.
  void all_reduce_sum(Backend& backend, Tensor& tensor, std::string_view tag) override {
    check_on_device(tensor, "all_reduce_sum");
    if (tensor.dtype() == DType::kF32) {
      all_reduce_floats(tensor);
      return;
    }
    HR_CHECK(is_half(tensor.dtype()), "all_reduce_sum takes fp32, bf16 or fp16, not " +
                                          tensor.describe() + " " + tensor.tag());
    reduce_through_device_fp32_buffer(backend.allocator(), tensor, tag,
                                      [&](Tensor& wide) { all_reduce_floats(wide); });
  }

  void all_reduce_sum(std::span<double> values) override {
    // Host values (losses, token counts, norms): MPI moves them without a
    // round trip through the device.
    HR_CHECK(values.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
             "host sums fit MPI's int counts");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                            MPI_DOUBLE, MPI_SUM, mpi_),
              where() + "MPI_Allreduce(" + std::to_string(values.size()) + " doubles)");
  }

  // NCCL's AllGather wants equal counts, but a group's last shard may be
  // shorter; one broadcast per rank, fused into a single launch by the group,
  // gathers pieces of any size in place.
  void all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) override {
    wait_for(start_all_gather_in_place(flat, counts));
  }

  PendingGather start_all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) override {
    check_on_device(flat, "all_gather_in_place");
    HR_CHECK(
        flat.dtype() == DType::kF32 || is_half(flat.dtype()),
        "all_gather_in_place takes fp32, bf16 or fp16, not " + flat.describe() + " " + flat.tag());
    const std::vector<int64_t> offsets = piece_offsets(flat, counts, size_, "all_gather_in_place");
    // bf16 and fp16 travel as themselves: gathering adds nothing up.
    const ncclDataType_t type = flat.dtype() == DType::kF32    ? ncclFloat
                                : flat.dtype() == DType::kBF16 ? ncclBfloat16
                                                               : ncclHalf;
    char* base = static_cast<char*>(flat.raw());
    const size_t element = size_of(flat.dtype());
    const std::string what = "all_gather_in_place(" + flat.tag() + ", " + flat.describe() + ")";
    cudaStream_t on = nccl_stream(what);
    run_group(what, [&](int r) {
      char* piece = base + static_cast<size_t>(offsets[static_cast<size_t>(r)]) * element;
      return nccl_library().ncclBroadcast(
          piece, piece, static_cast<size_t>(counts[static_cast<size_t>(r)]), type, r, comm_, on);
    });
    if (!lent_) {
      synchronize(what);
      return {};
    }
    const PendingGather pending{next_pending_++};
    pending_.emplace(pending.id, record_done(what));
    return pending;
  }

  void wait_for(PendingGather pending) override {
    if (pending.id == 0) return;
    auto found = pending_.find(pending.id);
    HR_CHECK(found != pending_.end(),
             "wait_for: gather " + std::to_string(pending.id) + " is not pending");
    wait_on_stream(found->second, "all_gather_in_place");
    pending_.erase(found);
  }

  // The mirror of all_gather_in_place: one in-place reduce per rank, rooted
  // at the rank that keeps the piece.
  void reduce_scatter_sum_in_place(Backend& backend, Tensor& flat, std::span<const int64_t> counts,
                                   std::string_view tag) override {
    check_on_device(flat, "reduce_scatter_sum_in_place");
    if (flat.dtype() == DType::kF32) {
      reduce_scatter_floats(flat, counts);
      return;
    }
    HR_CHECK(is_half(flat.dtype()), "reduce_scatter_sum_in_place takes fp32, bf16 or fp16, not " +
                                        flat.describe() + " " + flat.tag());
    // As in all_reduce_sum, only the allocator is taken from `backend`.
    // Only this rank's piece is narrowed back, as reduce_scatter_through_fp32_buffer does.
    const auto [begin, end] = piece_of(counts, rank_);
    reduce_through_device_fp32_buffer(
        backend.allocator(), flat, tag, [&](Tensor& wide) { reduce_scatter_floats(wide, counts); },
        begin, end);
  }

  void broadcast(Tensor& tensor, int root) override {
    check_on_device(tensor, "broadcast");
    HR_CHECK(root >= 0 && root < size_, "the broadcast's root " + std::to_string(root) +
                                            " is not a rank of " + std::to_string(size_));
    use_device();
    // Any dtype: the bytes travel, nothing is added up.
    const std::string what = "ncclBroadcast(" + tensor.tag() + ", " + tensor.describe() +
                             ", root " + std::to_string(root) + ")";
    cudaStream_t on = nccl_stream(what);
    check_nccl(nccl_library().ncclBroadcast(tensor.raw(), tensor.raw(), tensor.nbytes(), ncclUint8,
                                            root, comm_, on),
               what);
    end_collective(what);
  }

  void barrier() override { check_mpi(MPI_Barrier(mpi_), where() + "MPI_Barrier"); }

  // ncclCommSplit of this communicator (and MPI_Comm_split of its MPI
  // communicator, for the host sums and barriers), the groups named by
  // their first rank as MpiComm names them. The group gets streams of its
  // own; the run lends it the backend's stream as it lends this one.
  std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override {
    HR_CHECK(check_subgroup(first, stride, count, rank_, size_),
             where() + "not in the subgroup it names");
    HR_CHECK(pending_.empty(), where() + "subgroup while a gather is pending");
    if (nccl_library().ncclCommSplit == nullptr)
      throw UsageError(nccl_library().file +
                       ": no ncclCommSplit: parallel.tensor on cuda needs NCCL 2.18 or newer "
                       "(PyTorch's nvidia/nccl/lib has one)");
    use_device();
    const int key = (rank_ - first) / stride;
    MPI_Comm mpi = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(mpi_, first, key, &mpi), where() + "MPI_Comm_split");
    std::string name =
        "ranks " + std::to_string(first) + ".." + std::to_string(first + (count - 1) * stride);
    if (stride > 1) name += " step " + std::to_string(stride);
    ncclComm_t sub = nullptr;
    const ncclResult_t split = nccl_library().ncclCommSplit(comm_, first, key, &sub, nullptr);
    if (split != ncclSuccess) MPI_Comm_free(&mpi);
    check_nccl(split, "ncclCommSplit(" + name + ")");
    return std::unique_ptr<Communicator>(new NcclComm(device_, mpi, sub, name + " of " + name_));
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  // A group of the job's ranks (subgroup): `mpi` and `comm` made by the
  // splits, owned (freed with this one).
  NcclComm(int device, MPI_Comm mpi, ncclComm_t comm, std::string name)
      : device_(device), mpi_(mpi), name_(std::move(name)), comm_(comm) {
    MPI_Comm_set_errhandler(mpi_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(mpi_, &rank_);
    MPI_Comm_size(mpi_, &size_);
    try {
      make_streams();
    } catch (...) {
      release();
      throw;
    }
  }

  void make_streams() {
    // A blocking stream (not cudaStreamNonBlocking): it waits for what the
    // caller queued on the legacy default stream, so the tensors we get are
    // written before NCCL reads them.
    check_cuda(cudaStreamCreate(&own_stream_), where() + "cudaStreamCreate");
    stream_ = own_stream_;
    // Where NCCL runs while a backend lends its stream: kernels of that
    // stream queued before a collective's wait overlap the collective.
    check_cuda(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking),
               where() + "cudaStreamCreateWithFlags(comm stream)");
  }

  // "rank 2 of 8: " (of the job, or "rank 1 of 2 of ranks 2..3 of job: " in
  // a group), so a message from one rank says which.
  std::string where() const {
    std::string at = "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
    if (mpi_ != MPI_COMM_WORLD) at += " of " + name_;
    return at + ": ";
  }

  void check_nccl(ncclResult_t result, const std::string& what) const {
    if (result == ncclSuccess) return;
    std::string message = where() + what + " failed: " + nccl_library().ncclGetErrorString(result);
    // NCCL keeps a more specific line (which peer, which transport) per comm.
    const char* detail = comm_ ? nccl_library().ncclGetLastError(comm_) : nullptr;
    if (detail && *detail) message += std::string(" (") + detail + ")";
    throw InternalError(message);
  }

  void check_on_device(const Tensor& tensor, const char* collective) const {
    HR_CHECK(tensor.backend() == BackendKind::kCuda,
             std::string("NcclComm::") + collective + " takes device (cuda) tensors, not the " +
                 std::string(name_of(tensor.backend())) + " tensor " + tensor.tag());
  }

  // The thread may have switched devices since construction; the stream, the
  // comm and the tensors all belong to ours.
  void use_device() const {
    check_cuda(cudaSetDevice(device_), where() + "cudaSetDevice(" + std::to_string(device_) + ")");
  }

  // On our own stream (no backend lent one: the tests' raw launches) callers
  // read the result and free the comm buffers as soon as we return, so a
  // collective ends with the host waiting here.
  void synchronize(const std::string& what) const {
    check_cuda(cudaStreamSynchronize(stream_), where() + "cudaStreamSynchronize after " + what);
  }

  // The stream a collective's NCCL calls go on: ours, or, with a lent
  // stream, the comm stream made to wait (on the device) for everything
  // queued on the lent one so far: the kernels that wrote the tensor.
  cudaStream_t nccl_stream(const std::string& what) {
    if (!lent_) return stream_;
    cudaEvent_t ready = take_event(what);
    check_cuda(cudaEventRecord(ready, stream_), where() + "cudaEventRecord before " + what);
    check_cuda(cudaStreamWaitEvent(comm_stream_, ready, 0),
               where() + "cudaStreamWaitEvent(comm stream) before " + what);
    give_event(ready);  // the wait keeps the record it was queued on
    return comm_stream_;
  }

  // An event recorded on the comm stream after the collective's NCCL calls.
  cudaEvent_t record_done(const std::string& what) {
    cudaEvent_t done = take_event(what);
    check_cuda(cudaEventRecord(done, comm_stream_), where() + "cudaEventRecord after " + what);
    return done;
  }

  // The lent stream's later work waits for `done` (on the device).
  void wait_on_stream(cudaEvent_t done, const std::string& what) {
    check_cuda(cudaStreamWaitEvent(stream_, done, 0),
               where() + "cudaStreamWaitEvent(backend stream) after " + what);
    give_event(done);
  }

  // Ends a collective whose result the caller uses next: the host waits on
  // our own stream; with a lent one, the lent stream's later kernels wait
  // for the comm stream, and the host goes on. The caching allocator hands
  // a freed block only to work on the lent stream, which then comes after
  // the collective: freeing comm buffers right away is safe.
  void end_collective(const std::string& what) {
    if (!lent_) {
      synchronize(what);
      return;
    }
    wait_on_stream(record_done(what), what);
  }

  cudaEvent_t take_event(const std::string& what) {
    if (!free_events_.empty()) {
      cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
               where() + "cudaEventCreateWithFlags for " + what);
    return event;
  }
  // A waited-on event can be recorded again: a queued wait keeps the
  // record it saw (cudaStreamWaitEvent).
  void give_event(cudaEvent_t event) { free_events_.push_back(event); }

  void all_reduce_floats(Tensor& tensor) {
    use_device();
    const std::string what = "ncclAllReduce(" + tensor.tag() + ", " + tensor.describe() + ")";
    cudaStream_t on = nccl_stream(what);
    check_nccl(nccl_library().ncclAllReduce(tensor.raw(), tensor.raw(),
                                            static_cast<size_t>(tensor.numel()), ncclFloat, ncclSum,
                                            comm_, on),
               what);
    end_collective(what);
  }

  void reduce_scatter_floats(Tensor& flat, std::span<const int64_t> counts) {
    const std::vector<int64_t> offsets =
        piece_offsets(flat, counts, size_, "reduce_scatter_sum_in_place");
    float* base = static_cast<float*>(flat.raw());
    const std::string what =
        "reduce_scatter_sum_in_place(" + flat.tag() + ", " + flat.describe() + ")";
    cudaStream_t on = nccl_stream(what);
    run_group(what, [&](int r) {
      float* piece = base + offsets[static_cast<size_t>(r)];
      return nccl_library().ncclReduce(piece, piece,
                                       static_cast<size_t>(counts[static_cast<size_t>(r)]),
                                       ncclFloat, ncclSum, r, comm_, on);
    });
    end_collective(what);
  }

  // Issues op(r) for every rank inside one NCCL group. The group is closed
  // even when an op fails to enqueue, so NCCL's group state stays usable for
  // the error path (and the message names the failing rank's op).
  void run_group(const std::string& what, const std::function<ncclResult_t(int)>& op) {
    use_device();
    check_nccl(nccl_library().ncclGroupStart(), "ncclGroupStart for " + what);
    ncclResult_t failed = ncclSuccess;
    int failed_rank = -1;
    for (int r = 0; r < size_ && failed == ncclSuccess; ++r)
      if ((failed = op(r)) != ncclSuccess) failed_rank = r;
    const ncclResult_t ended = nccl_library().ncclGroupEnd();
    check_nccl(failed, what + ", the piece of rank " + std::to_string(failed_rank));
    check_nccl(ended, "ncclGroupEnd for " + what);
  }

  // The device twin of reduce_through_fp32_buffer (communicator.h): the same
  // two comm blocks, fp32 then the 16-bit dtype, with the same tag, allocated and freed
  // in the same order, so plans on meta match runs here. The narrow goes
  // through its own buffer only for that reason; the cast could write
  // `tensor` directly.
  // [begin, end) is the part narrowed back (a reduce-scatter's piece); the
  // default, everything (an all-reduce).
  void reduce_through_device_fp32_buffer(Allocator& allocator, Tensor& tensor, std::string_view tag,
                                         const std::function<void(Tensor&)>& reduce,
                                         int64_t begin = 0, int64_t end = -1) {
    use_device();
    const std::string name = std::string(tag) + ".comm";
    const int64_t n = tensor.numel();
    if (end < 0) end = n;
    Tensor wide = Tensor::empty(allocator, BackendKind::kCuda, tensor.shape(), DType::kF32,
                                Category::kComm, name);
    const bool bf16 = tensor.dtype() == DType::kBF16;
    const uint16_t* half = static_cast<const uint16_t*>(tensor.raw());
    float* widened = static_cast<float*>(wide.raw());
    check_cuda(bf16 ? cuda::cast_bf16_to_f32(half, widened, n, stream_)
                    : cuda::cast_f16_to_f32(half, widened, n, stream_),
               where() + "widening " + name + " (" + tensor.describe() + ")");
    reduce(wide);  // ordered before what stream_ queues next
    if (begin == end) return;
    Tensor narrow = Tensor::empty(allocator, BackendKind::kCuda, {end - begin}, tensor.dtype(),
                                  Category::kComm, name);
    const float* summed = static_cast<const float*>(wide.raw()) + begin;
    uint16_t* narrowed = static_cast<uint16_t*>(narrow.raw());
    check_cuda(bf16 ? cuda::cast_f32_to_bf16(summed, narrowed, end - begin, stream_)
                    : cuda::cast_f32_to_f16(summed, narrowed, end - begin, stream_),
               where() + "narrowing " + name + " (" + tensor.describe() + ")");
    check_cuda(cudaMemcpyAsync(static_cast<uint16_t*>(tensor.raw()) + begin, narrow.raw(),
                               narrow.nbytes(), cudaMemcpyDeviceToDevice, stream_),
               where() + "cudaMemcpyAsync(" + name + " -> " + tensor.tag() + ")");
    // Own stream: before `narrow` and `wide` go back to the allocator. A
    // lent stream orders their next user after these casts already.
    if (!lent_) synchronize("narrowing " + name);
  }

  // Best effort: a destructor cannot throw, and a failing teardown at the
  // end of a job has nothing left to protect.
  void release() {
    if (comm_stream_) (void)cudaStreamSynchronize(comm_stream_);
    for (auto& [id, event] : pending_)
      (void)cudaEventDestroy(event);
    for (cudaEvent_t event : free_events_)
      (void)cudaEventDestroy(event);
    pending_.clear();
    free_events_.clear();
    if (comm_) (void)nccl_library().ncclCommDestroy(comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (mpi_ != MPI_COMM_WORLD && mpi_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&mpi_);
    if (comm_stream_) (void)cudaStreamDestroy(comm_stream_);
    if (own_stream_) (void)cudaStreamDestroy(own_stream_);
    comm_ = nullptr;
    own_stream_ = stream_ = comm_stream_ = nullptr;
  }

  int device_ = 0;
  MPI_Comm mpi_ = MPI_COMM_WORLD;  // host sums and barriers: the job's, or a group's
  std::string name_ = "job";
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t own_stream_ = nullptr;   // made here; used until a backend lends its own
  cudaStream_t stream_ = nullptr;       // the backend's (lent) or own_stream_: casts, waits
  cudaStream_t comm_stream_ = nullptr;  // NCCL's while a stream is lent
  bool lent_ = false;
  std::map<uint64_t, cudaEvent_t> pending_;  // started gathers: their done events
  uint64_t next_pending_ = 1;
  std::vector<cudaEvent_t> free_events_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_comm(int device) {
  return std::make_unique<NcclComm>(device);
}

std::unique_ptr<Communicator> make_nccl_comm_for_local_rank() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw UsageError(
        "run.backend = \"cuda\" under an MPI launcher: no CUDA device is visible to this rank "
        "(check CUDA_VISIBLE_DEVICES and the job's GPU allocation)");
  }
  return make_nccl_comm(local_rank_from_environment() % count);
}

}  // namespace headroom
