// What one optimizer step of one rank costs, counted rather than timed: the
// matmul and attention FLOPs (forward, backward, recompute), the bytes the
// rank moves in collectives and over PCIe. The counterfactual plans of an
// OOM (advice.h) and `headroom fit` rank the changes that fit by what they
// add to this, converted to seconds at a device's nominal rates.
//
// What is counted (docs/cli.md, "What would fit"):
//  - matmuls at 2 FLOPs per multiply-add: q, k, v, o, gate, up, down per
//    block and the head, over every token the step processes (padding too);
//    LoRA's adapters are left out (r << C);
//  - attention: QK^T and PV, 4 * H * D FLOPs per computed (query, key)
//    pair (pairs_per_row);
//  - backward: 2x forward for trained weights (dX and dW), 1x for frozen
//    ones (dX only: a LoRA base);
//  - recompute: the forward of the checkpointed blocks (checkpoint.activations
//    = every_k: ceil(L / k) of L) and, with loss.mode = "recompute" and a
//    chunked loss, the head's forward once more;
//  - collectives as ring algorithms move (n - 1) / n of the buffer per
//    reduce-scatter or all-gather and twice that per all-reduce: gradients
//    of the trained parameters once per step, ZeRO-3's parameter gathers per
//    micro-batch in forward, backward and recompute;
//  - zero.offload_optimizer: gradients to the host and parameters back;
//  - memory.allocator = "exact": a segment reserved and released per
//    allocation (cudaMalloc / cudaFree, which synchronizes the device), the
//    plan's allocations per step times a nominal cost per pair.
// Kernel launches, elementwise ops and the optimizer's own arithmetic are
// not counted: they are the same for every change ranked here, or small.
#pragma once

#include <string>

#include "config/config.h"
#include "model/model_config.h"

namespace headroom {

struct StepCost {
  double flops = 0;            // everything below, in FLOPs
  double recompute_flops = 0;  // the part spent recomputing
  double comm_bytes = 0;       // collective bytes this rank sends
  double host_bytes = 0;       // bytes over PCIe (offload)
  double segment_calls = 0;    // segments reserved and released (the exact allocator)
};

// The shape of a step as the plan saw it: tokens processed per rank (with
// padding) and the width of a micro-batch row.
// The (query, key) pairs attention computes in a row of W tokens: a causal
// row (document or causal mask) W (W + 1) / 2, a sliding window at most
// W * window, dflash blocks of m: block b's queries see (b + 1) m keys, the
// last partial block the whole row (m = 1 is causal, m >= W is W^2). Dense
// additive attention (SDPA's math path) computes all W^2, masked or not.
double pairs_per_row(const ExperimentConfig& config, double W);

struct StepShape {
  double tokens = 0;     // per rank per optimizer step
  double row_width = 0;  // tokens per row of a micro-batch (a packed bin, a padded row)
  int micro_batches = 1;
  double allocations = 0;  // allocator requests per step (the plan's, init included, averaged)
};

// The rates a step's counts are converted with: a nominal fraction of the
// device's published dense bf16 rate and link bandwidths.
struct DeviceRates {
  double flops_per_second = 0;
  double link_bytes_per_second = 0;     // between the ranks (NVLink, PCIe without P2P)
  double host_bytes_per_second = 0;     // PCIe to the host
  double seconds_per_segment_call = 0;  // one segment reserved and released
  std::string source;                   // "h100-80gb (nominal: 40% of 989 TFLOP/s ...)"
};

// The step cost of `config` (run at `world_size` ranks, on `model`) for a
// step of shape `shape`.
StepCost step_cost(const ExperimentConfig& config, const ModelConfig& model, int world_size,
                   const StepShape& shape);

// memory.device's rates; without a preset, a cuda target gets Hopper's and a
// cpu target a 2-core host's.
DeviceRates device_rates(const ExperimentConfig& config);

// Seconds the step's counts take at `rates` (compute, communication and host
// transfers added, none overlapped: an upper bound used only for ranking).
double seconds_of(const StepCost& cost, const DeviceRates& rates);

}  // namespace headroom
