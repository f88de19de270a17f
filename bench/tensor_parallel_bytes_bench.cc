// The collective traffic of tensor parallelism (parallel.tensor = N), one
// micro-batch's forward and backward of a preset on meta with a simulated
// rank of the group, against the closed form: Megatron-LM's layout makes two
// all-reduces of the (b*s, h) activations per sublayer (forward after o /
// down, backward on the input gradient of q/k/v / gate/up), and a ring
// all-reduce sends 2 (N - 1) / N of its buffer per rank, so per sublayer
//   4 (N - 1) / N * b*s * h * bytes per element.
// Counted here: every all-reduce the model hands the group, its elements,
// and what the ring sends of them in the dtype they are reduced in (our
// communicators sum bf16 through an fp32 buffer, so 4 bytes, where NCCL's
// native bf16 ring would send 2). The rows: the closed form at 2 bytes and
// at 4, the counted bytes at 4, and their ratio to the closed form at 4
// (> 1 by the vocab-parallel embedding's output and loss's d_hidden, two
// more (b*s, h) all-reduces per micro-batch, and the small q/k norm
// gradients).
//
//   ./build/bench/tensor_parallel_bytes_bench [preset] [tokens]
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/transformer.h"

using namespace headroom;

namespace {

// A simulated rank that counts what the model reduces over it.
class CountingComm final : public Communicator {
 public:
  explicit CountingComm(int world_size) : inner_(make_simulated_comm(0, world_size)) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  bool is_distributed() const override { return false; }
  bool moves_tensors_of(BackendKind kind) const override { return inner_->moves_tensors_of(kind); }
  void all_reduce_sum(Backend& backend, Tensor& tensor, std::string_view tag) override {
    ++calls;
    elements += tensor.numel();
    if (tensor.numel() >= activation_elements) ++activation_calls;
    inner_->all_reduce_sum(backend, tensor, tag);
  }
  void all_reduce_sum(std::span<double> values) override { inner_->all_reduce_sum(values); }
  void all_gather_in_place(Tensor& flat, std::span<const int64_t> counts) override {
    inner_->all_gather_in_place(flat, counts);
  }
  void reduce_scatter_sum_in_place(Backend& backend, Tensor& flat, std::span<const int64_t> counts,
                                   std::string_view tag) override {
    inner_->reduce_scatter_sum_in_place(backend, flat, counts, tag);
  }
  void broadcast(Tensor& tensor, int root) override { inner_->broadcast(tensor, root); }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }

  int64_t activation_elements = 0;  // a call this large is an activation's
  int64_t calls = 0, activation_calls = 0, elements = 0;

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "qwen3-1.7b";
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 4096;
  const ModelConfig config = model_preset(preset);
  const int64_t h = config.hidden_size, L = config.num_layers;
  std::printf("%s, %lld tokens per micro-batch (b*s), h = %lld, %lld layers, bf16\n\n",
              preset.c_str(), static_cast<long long>(tokens), static_cast<long long>(h),
              static_cast<long long>(L));
  std::printf(
      "| N | all-reduces (activations) | elements | closed form, bf16 ring (MB/rank) | closed "
      "form, fp32 ring (MB/rank) | counted, fp32 ring (MB/rank) | counted / closed form |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int n : {2, 4, 8}) {
    if (!tensor_parallel_problem(config, n).empty()) continue;
    Allocator allocator(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
    std::unique_ptr<Backend> meta = make_meta_backend(allocator, TargetDevice::kCuda);
    CountingComm group(n);
    group.activation_elements = tokens * h;
    TransformerOptions options;
    options.dtype = DType::kBF16;
    options.loss.chunk_size = 1024;
    options.tensor_parallel = {0, n, &group};
    Transformer model(*meta, config, options);
    Batch batch;
    std::vector<int32_t> document(static_cast<size_t>(tokens), 1);
    append_document(batch, document.data(), tokens);
    Tensor loss = meta->empty({1}, DType::kF32, Category::kActivation, "loss");
    model.forward_backward(batch, 1.0f, loss);

    const double ring = 2.0 * (n - 1) / n;
    const double sublayers = 2.0 * static_cast<double>(L);
    const double closed = sublayers * 2 * ring * static_cast<double>(tokens * h);  // elements
    const double counted = ring * static_cast<double>(group.elements);
    std::printf("| %d | %lld (%lld) | %lld | %.1f | %.1f | %.1f | %.4f |\n", n,
                static_cast<long long>(group.calls), static_cast<long long>(group.activation_calls),
                static_cast<long long>(group.elements), closed * 2 / 1e6, closed * 4 / 1e6,
                counted * 4 / 1e6, counted / closed);
  }
  return 0;
}
