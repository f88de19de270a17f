#include "advice/step_cost.h"

#include <algorithm>
#include <cmath>

#include "memory/device_preset.h"

namespace headroom {

namespace {

double dtype_bytes(Precision p) {
  return p == Precision::kFp32 ? 4.0 : 2.0;
}

// Published dense bf16 tensor rates (fp32 accumulation) and link bandwidths
// per direction, by architecture; docs/devices.md cites them. The fractions
// are nominal: what a well-tuned step reaches, the same for every change.
struct ArchRates {
  double peak_flops;
  double link;  // bytes/s between GPUs of one node
  double host;  // bytes/s over PCIe
  const char* what;
};

constexpr double kComputeFraction = 0.4;
constexpr double kLinkFraction = 0.8;

ArchRates arch_rates(std::string_view preset) {
  // Hopper SXM: 989 TFLOP/s, NVLink 4 at 450 GB/s, PCIe 5 x16.
  if (preset.starts_with("h100") || preset.starts_with("h200") || preset.empty())
    return {989e12, 450e9, 50e9, "989 TFLOP/s bf16, NVLink 450 GB/s, PCIe 5 50 GB/s"};
  if (preset == "a800-80gb")  // NVLink capped at 400 GB/s both ways
    return {312e12, 200e9, 25e9, "312 TFLOP/s bf16, NVLink 200 GB/s, PCIe 4 25 GB/s"};
  if (preset.starts_with("a100"))
    return {312e12, 300e9, 25e9, "312 TFLOP/s bf16, NVLink 300 GB/s, PCIe 4 25 GB/s"};
  if (preset == "l40s-48gb")
    return {362e12, 25e9, 25e9, "362 TFLOP/s bf16, PCIe 4 25 GB/s (no NVLink)"};
  if (preset == "rtx4090-24gb")  // GeForce: fp32 accumulation at half rate, no P2P
    return {165e12, 12e9, 25e9, "165 TFLOP/s bf16, host-staged P2P 12 GB/s, PCIe 4 25 GB/s"};
  if (preset == "rtx3090-24gb")
    return {71e12, 12e9, 25e9, "71 TFLOP/s bf16, host-staged P2P 12 GB/s, PCIe 4 25 GB/s"};
  return {989e12, 450e9, 50e9, "989 TFLOP/s bf16, NVLink 450 GB/s, PCIe 5 50 GB/s"};
}

}  // namespace

double pairs_per_row(const ExperimentConfig& c, double W) {
  // The math path multiplies every pair of its row, masked or not.
  if (c.attention.backend == AttentionSection::Backend::kDenseAdditive) return W * W;
  const double causal = W * (W + 1) / 2;
  switch (c.attention.mask) {
    case AttentionSection::Mask::kSlidingWindow:
      return c.attention.window > 0 ? std::min(causal, W * static_cast<double>(c.attention.window))
                                    : causal;
    case AttentionSection::Mask::kDflashBlock: {
      // Block b (0-based, m tokens) sees blocks 0..b: (b + 1) m keys per
      // query; the last, partial block of r tokens sees the whole row.
      const double m = std::max<double>(1, static_cast<double>(c.attention.mask_block));
      const double full = std::floor(W / m), r = W - full * m;
      return m * m * full * (full + 1) / 2 + r * W;
    }
    case AttentionSection::Mask::kDocument:
    case AttentionSection::Mask::kCausal:
      break;
  }
  return causal;
}

StepCost step_cost(const ExperimentConfig& c, const ModelConfig& m, int world_size,
                   const StepShape& shape) {
  const double C = static_cast<double>(m.hidden_size), F = static_cast<double>(m.intermediate_size),
               V = static_cast<double>(m.vocab_size), L = static_cast<double>(m.num_layers),
               HD = static_cast<double>(m.num_heads * m.head_dim),
               KVD = static_cast<double>(m.num_kv_heads * m.head_dim);
  const double T = shape.tokens;
  const double block_weights = C * HD + 2 * C * KVD + HD * C + 3 * C * F;  // per block
  const double head_weights = V * C;

  // Computed (query, key) pairs per row, then per step.
  const double W = std::max(1.0, shape.row_width);
  const double pairs = pairs_per_row(c, W) * (T / W);
  const double attention_fwd = 4 * HD * pairs;  // per block

  const double block_fwd = 2 * block_weights * T + attention_fwd;
  const double head_fwd = 2 * head_weights * T;
  const bool frozen = c.lora.enabled;
  // Backward: dX always; dW of trained weights. Attention has no weights
  // but two backward matmuls per forward one.
  const double block_bwd =
      (frozen ? 2 * block_weights * T : 4 * block_weights * T) + 2 * attention_fwd;
  const double head_bwd = frozen ? head_fwd : 2 * head_fwd;

  StepCost cost;
  const int k = c.checkpoint.activations;
  const double recomputed_blocks = k > 0 ? std::ceil(L / k) : 0;
  // parallel.tensor: a rank computes 1 / N of every block (its heads and
  // its part of the MLP); the embedding and the head are replicated.
  const double N = std::max(1, c.parallel.tensor);
  cost.recompute_flops = recomputed_blocks * block_fwd / N;
  if (c.loss.chunk_size > 0 && c.loss.mode == LossSection::Mode::kRecompute)
    cost.recompute_flops += head_fwd;
  cost.flops = L * (block_fwd + block_bwd) / N + head_fwd + head_bwd + cost.recompute_flops;

  // Collectives: the gradients' over the data-parallel ranks, of this
  // rank's parameters (1 / N of each block).
  const double n = std::max(1.0, world_size / N);
  const double ring = n > 1 ? (n - 1) / n : 0;
  const double P = static_cast<double>(m.num_parameters()) - L * block_weights * (1 - 1 / N);
  const double bytes = dtype_bytes(c.model.dtype);
  // Trained parameters: all of them, or LoRA's adapters (r (in + out) per
  // target per block: small, but counted).
  double trained = P;
  if (frozen) {
    double per_block = 0;
    const double r = c.lora.rank;
    for (const std::string& t : c.lora.targets) {
      if (t == "q_proj")
        per_block += r * (C + HD);
      else if (t == "k_proj" || t == "v_proj")
        per_block += r * (C + KVD);
      else if (t == "o_proj")
        per_block += r * (HD + C);
      else
        per_block += r * (C + F);  // gate, up, down
    }
    trained = per_block * L;
  }
  if (c.zero.stage <= 2) {
    // All-reduce (stage 0) or reduce-scatter + all-gather (1, 2): the same bytes.
    cost.comm_bytes = 2 * ring * trained * bytes;
  } else {
    const double gathers = 2 + (k > 0 ? 1 : 0);  // forward, backward, recompute
    cost.comm_bytes = ring * (gathers * shape.micro_batches * P * bytes + trained * bytes);
  }
  if (N > 1) {
    // Megatron's layout: two ring all-reduces of the (T, C) activations per
    // sublayer (one forward, one backward), again for each recomputed
    // block's forward.
    const double tensor_ring = 2 * (N - 1) / N;
    const double all_reduces = 4 * L + 2 * recomputed_blocks;
    cost.comm_bytes += all_reduces * tensor_ring * T * C * bytes;
    // parallel.sequence moves the same bytes as all-gather + reduce-scatter,
    // and each sublayer's backward gathers its kept normed rows once more for
    // the weights' gradients (none with a frozen base: LoRA keeps no h).
    if (c.parallel.sequence && !c.lora.enabled)
      cost.comm_bytes += 2 * L * (N - 1) / N * T * C * bytes;
  }
  if (c.zero.offload_optimizer) {
    const double shard = n > 1 && c.zero.stage >= 1 ? trained / n : trained;
    cost.host_bytes = shard * 2 * bytes;  // gradients down, parameters up
  }
  if (c.memory.allocator == MemorySection::Allocator::kExact)
    cost.segment_calls = shape.allocations;
  return cost;
}

DeviceRates device_rates(const ExperimentConfig& c) {
  DeviceRates r;
  if (c.run.backend != RunSection::Backend::kCuda) {
    // A cpu run: what oneDNN reaches on two cores, and shared memory between ranks.
    r.flops_per_second = 200e9;
    r.link_bytes_per_second = 5e9;
    r.host_bytes_per_second = 10e9;
    r.seconds_per_segment_call = 20e-6;  // mmap, first touch of its pages, munmap
    r.source = "cpu target (nominal: 200 GFLOP/s, 5 GB/s between ranks)";
    return r;
  }
  const ArchRates a = arch_rates(c.memory.device);
  r.flops_per_second = kComputeFraction * a.peak_flops;
  r.link_bytes_per_second = kLinkFraction * a.link;
  r.host_bytes_per_second = kLinkFraction * a.host;
  // cudaMalloc and cudaFree (which waits for the device): tens of
  // microseconds each, and the stream's overlap lost.
  r.seconds_per_segment_call = 50e-6;
  r.source = (c.memory.device.empty() ? std::string("cuda target, Hopper") : c.memory.device) +
             " (nominal: 40% of " + a.what + ", 80% of the links, 50 us per cudaMalloc + cudaFree)";
  return r;
}

double seconds_of(const StepCost& cost, const DeviceRates& rates) {
  return cost.flops / rates.flops_per_second + cost.comm_bytes / rates.link_bytes_per_second +
         cost.host_bytes / rates.host_bytes_per_second +
         cost.segment_calls * rates.seconds_per_segment_call;
}

}  // namespace headroom
