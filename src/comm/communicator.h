// Communicator: the collectives data-parallel training needs, over the
// ranks of one job. The model and the backend never see it; the trainer (and
// later ZeRO) call it between the backend's ops.
//
// Every rank must call the same collectives in the same order with tensors of
// the same shape and dtype. Tensors are summed in fp32: a bf16 tensor is
// widened into a comm buffer (category comm, tag "<tag>.comm"), reduced and
// narrowed back, as NCCL-less PyTorch DDP does for bf16 buckets; so the comm
// buffer is part of the accounted memory, in plan and run alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "backend/backend.h"

namespace headroom {

// A started all_gather_in_place (Communicator::start_all_gather_in_place).
struct PendingGather {
  uint64_t id = 0;  // 0: nothing pending (the gather already ended)
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Is this a real multi-process job (so errors must end every rank)?
  virtual bool is_distributed() const = 0;
  // Which backend's tensors the collectives move: MpiComm host (cpu)
  // memory, NcclComm device (cuda) memory. A world of one moves nothing and
  // takes any.
  virtual bool moves_tensors_of(BackendKind kind) const = 0;
  // The device stream every kernel of this rank's backend is queued on
  // (cuda: the CudaContext's, Backend::device_stream()), lent for the
  // backend's life: a communicator over device tensors then issues its
  // collectives on it, ordered after those kernels without a host wait.
  // nullptr gives the communicator's own stream back. Others ignore it.
  virtual void use_device_stream(void* /*stream*/) {}

  // tensor <- the sum of `tensor` over all ranks (fp32 or bf16).
  virtual void all_reduce_sum(Backend& backend, Tensor& tensor, std::string_view tag) = 0;
  // values <- their sum over all ranks (host doubles: losses, token counts,
  // squared norms).
  virtual void all_reduce_sum(std::span<double> values) = 0;
  // Assembles `flat` on every rank from the ranks' pieces, in place: rank r
  // contributes the counts[r] elements that start at counts[0] + ... +
  // counts[r - 1] (ZeRO's updated parameter shards). Allocates nothing.
  virtual void all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) = 0;
  // all_gather_in_place, started but not awaited: `flat` holds the result
  // for the work ordered after wait_for(pending), and must stay allocated
  // until then. ZeRO-3's prefetch: a device communicator gathers on its own
  // stream while the kernels queued before wait_for still run (NcclComm:
  // CUDA events, no host wait). The default gathers now; wait_for is then a
  // no-op. Every rank must call both in the same order as its other
  // collectives.
  virtual PendingGather start_all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) {
    all_gather_in_place(flat, counts);
    return {};
  }
  virtual void wait_for(PendingGather /*pending*/) {}
  // The reverse (ZeRO-2/3's gradient reduce-scatter): afterwards rank r's
  // piece of `flat` (the counts[r] elements from counts[0] + ... +
  // counts[r - 1]) holds the sum of that piece over all ranks; the rest of
  // `flat` is unspecified. fp32 or bf16 (bf16 is summed in an fp32 comm
  // buffer, as all_reduce_sum does).
  virtual void reduce_scatter_sum_in_place(Backend& backend, Tensor& flat,
                                           std::span<const int64_t> counts,
                                           std::string_view tag) = 0;
  // tensor <- rank `root`'s tensor, on every rank (any dtype).
  virtual void broadcast(Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
  // run.collective_timeout: a collective of this communicator that has not
  // completed after `seconds` (0 = never) ends the job with exit code 1,
  // after `describe(what)` (on a watchdog thread, while this rank is still
  // blocked in the collective; `what` names the collective and the group)
  // returns the line written to stderr: the caller adds its step and phase
  // and writes the line to its trace. `describe` may be empty. A later call
  // replaces the earlier one. Only communicators that wait on other
  // processes (MpiComm) keep a watchdog; the others ignore it.
  virtual void set_collective_timeout(int64_t /*seconds*/,
                                      std::function<std::string(const std::string&)> /*describe*/) {
  }
  // The ranks first, first + stride, .., first + (count - 1) * stride of
  // this communicator, this rank among them, as a communicator of their own
  // (rank order kept): tensor parallelism's groups and the data-parallel
  // groups across them. Collective: every rank of this communicator calls
  // it, each naming its own group, and the groups partition the ranks.
  // MpiComm: MPI_Comm_split; NcclComm: ncclCommSplit (NCCL >= 2.18) and
  // MPI_Comm_split; the simulated one: a simulated rank of the group. The
  // default refuses (UsageError).
  virtual std::unique_ptr<Communicator> subgroup(int first, int stride, int count);
  // Ends every rank of the job with `exit_code`, now; never returns. A rank
  // that fails calls this instead of returning, so the others never wait
  // forever in a collective.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// A world of one: every collective is the identity (and allocates nothing).
std::unique_ptr<Communicator> make_single_rank_comm();

// Rank `rank` of `world_size` simulated in this process, for planning: every
// collective allocates and frees what the real one does (the comm buffers of
// a bf16 reduction) and moves no data, so a plan of rank r on the meta
// backend makes rank r's allocations. Host sums return the local values.
std::unique_ptr<Communicator> make_simulated_comm(int rank, int world_size);

// The bf16 path of all_reduce_sum, shared by every communicator so real and
// simulated ranks allocate alike: widens `tensor` into an fp32 comm buffer,
// lets `reduce` sum it in place, and narrows the result back into `tensor`.
void reduce_through_fp32_buffer(Backend& backend, Tensor& tensor, std::string_view tag,
                                const std::function<void(Tensor&)>& reduce);

// The bf16 path of reduce_scatter_sum_in_place, shared the same way: widens
// `flat` into an fp32 comm buffer, lets `reduce` reduce-scatter it in place,
// and narrows only this rank's piece [begin, end) back into `flat` (through a
// comm buffer of the piece's size: the rest of `flat` is unspecified after a
// reduce-scatter, so it is not rewritten).
void reduce_scatter_through_fp32_buffer(Backend& backend, Tensor& flat, int64_t begin, int64_t end,
                                        std::string_view tag,
                                        const std::function<void(Tensor&)>& reduce);

// Whether `rank` of `world_size` is in the subgroup (first, stride, count)
// and the subgroup lies inside the world (Communicator::subgroup).
bool check_subgroup(int first, int stride, int count, int rank, int world_size);

// This rank's piece [begin, end) of a buffer cut by `counts` (one per rank).
std::pair<int64_t, int64_t> piece_of(std::span<const int64_t> counts, int rank);

}  // namespace headroom
