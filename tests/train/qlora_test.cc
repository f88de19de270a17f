// QLoRA: LoRA adapters on a base whose block projections are stored in NF4
// (model.quantization = "nf4"). The NF4 model computes exactly what a dense
// model holding the dequantized weights computes; the adapters' gradients
// match finite differences through the 4-bit base; meta makes exactly the
// cpu's allocations; and the base's bytes are bitsandbytes' (a 7B base about
// 3.9 GB with double quantization, 4.2 GB without, instead of 13.5 GB).
#include <gtest/gtest.h>

#include <string>

#include "backend/common/nf4.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "train_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::CpuRun;
using testing::loss_of;
using testing::make_batch;

const std::vector<LoraTarget> kAllTargets = {kLoraQ,    kLoraK,  kLoraV,   kLoraO,
                                             kLoraGate, kLoraUp, kLoraDown};

TransformerOptions qlora_options(bool double_quant, float dropout = 0.0f) {
  TransformerOptions o = testing::lora_test_options({kLoraQ, kLoraV, kLoraO, kLoraDown}, dropout);
  o.nf4 = true;
  o.nf4_double_quant = double_quant;
  return o;
}

// Trained-looking adapters: B random instead of zero.
void randomize_adapters(Backend& backend, Transformer& model, uint64_t seed) {
  for (size_t g = model.num_base_groups(); g < model.params().size(); ++g)
    backend.fill_uniform(model.params()[g].flat, seed * 1000 + g, -0.3f, 0.3f);
}

// A dense model whose block projections hold the NF4 model's dequantized
// weights (each projection quantized and dequantized as init did it)
// computes bit for bit what the NF4 model computes.
TEST(Qlora, AnNf4BaseComputesWhatItsDequantizedWeightsCompute) {
  for (bool double_quant : {false, true}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      CpuRun a, b;
      TransformerOptions nf4 = qlora_options(double_quant);
      nf4.dtype = dtype;
      TransformerOptions dense = nf4;
      dense.nf4 = false;
      dense.nf4_double_quant = false;
      const ModelConfig config = testing::tiny_decoder(true, true, false);
      Transformer quantized(*a.backend, config, nf4), reference(*b.backend, config, dense);
      quantized.init_random(7);
      reference.init_random(7);
      randomize_adapters(*a.backend, quantized, 3);
      randomize_adapters(*b.backend, reference, 3);
      for (size_t g = 1; g + 1 < reference.num_base_groups(); ++g) {
        for (int t = 0; t < kNumLoraTargets; ++t) {
          Tensor& w = reference.params()[g].views[weight_of(static_cast<LoraTarget>(t))];
          Nf4Weight q = b.backend->nf4_empty(w.shape(), double_quant, Category::kWorkspace, "q");
          b.backend->nf4_quantize(w, q);
          const Tensor back = b.backend->nf4_dequantize(q, dtype, Category::kWorkspace, "w");
          b.backend->copy(back, w);
        }
      }
      const Batch batch = make_batch(23, 3);
      EXPECT_EQ(loss_of(quantized, *a.backend, batch), loss_of(reference, *b.backend, batch))
          << "double_quant " << double_quant << " " << name_of(dtype);
    }
  }
}

class QloraGradients : public ::testing::TestWithParam<std::tuple<bool, float, int>> {};

// Only the adapters train: their gradients through the 4-bit base against
// central differences of the loss.
TEST_P(QloraGradients, MatchFiniteDifferences) {
  auto [double_quant, dropout, interval] = GetParam();
  CpuRun run;
  TransformerOptions options = qlora_options(double_quant, dropout);
  options.lora.targets = kAllTargets;
  options.checkpoint_interval = interval;
  Transformer model(*run.backend, testing::tiny_decoder(true, false, true), options);
  model.init_random(7);
  model.set_random_stream(5);
  randomize_adapters(*run.backend, model, 3);
  for (size_t g = 0; g < model.num_base_groups(); ++g)
    EXPECT_FALSE(model.grads()[g].flat.defined()) << "the frozen base has no gradient buffer";
  testing::expect_gradients_match_finite_differences(model, *run.backend, make_batch(23, 3), 16);
}

INSTANTIATE_TEST_SUITE_P(Variants, QloraGradients,
                         ::testing::Values(std::make_tuple(false, 0.0f, 0),
                                           std::make_tuple(true, 0.3f, 0),
                                           std::make_tuple(true, 0.0f, 1)));

// meta = cpu event by event; the NF4 storage is param under its own tags,
// and every use of a projection dequantizes into a workspace buffer that is
// freed before the next allocation of its phase's projection.
TEST(Qlora, MetaMakesExactlyTheCpuAllocationsAndEveryUseDequantizes) {
  for (int interval : {0, 1}) {
    TransformerOptions o = qlora_options(true, 0.1f);
    o.dtype = DType::kBF16;
    o.checkpoint_interval = interval;
    const testing::StepEvents cpu = testing::expect_meta_makes_the_cpu_allocations(
        testing::tiny_decoder(true, false, true), o, make_batch(23, 4));
    int dequant_q = 0, storage = 0;
    for (const MemoryEvent& e : cpu.events) {
      if (e.action != MemoryAction::kAlloc) continue;
      const std::string& tag = cpu.tag_of(e);
      dequant_q += tag == "block.1.attn.q.dequant";
      if (e.category == Category::kParam && tag.find(".nf4") != std::string::npos) ++storage;
      if (e.category == Category::kWorkspace && tag.find(".nf4") != std::string::npos) {
        EXPECT_NE(tag.find(".absmax_fp32"), std::string::npos)
            << tag << ": only quantize's fp32 absmax is scratch";
      }
    }
    // Forward, the recompute of a checkpointed block, and backward's dx.
    EXPECT_EQ(dequant_q, interval ? 3 : 2);
    EXPECT_EQ(storage, 2 * 7 * 4) << "codes, absmax, absmax2, offset of 7 projections, 2 layers";
  }
}

// The base's bytes: NF4 for the 224 projections of Llama-2-7B, bf16 for the
// embedding, the head and the norms. Planned on meta, as `plan` does.
TEST(Qlora, ASevenBillionBaseTakesWhatBitsandbytesGivesIt) {
  for (bool double_quant : {false, true}) {
    Allocator allocator(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
    std::unique_ptr<Backend> backend = make_meta_backend(allocator, TargetDevice::kCuda);
    TransformerOptions o = qlora_options(double_quant);
    o.dtype = DType::kBF16;
    o.lora.rank = 16;
    o.lora.targets = {kLoraQ, kLoraV};
    const ModelConfig config = model_preset("llama-2-7b");
    Transformer model(*backend, config, o);
    model.init_random(1);
    uint64_t adapters = 0;
    for (size_t g = model.num_base_groups(); g < model.layouts().size(); ++g)
      adapters += static_cast<uint64_t>(model.layouts()[g].numel) * 2;
    const uint64_t base =
        allocator.stats().live_by_category[static_cast<int>(Category::kParam)] - adapters;
    // 6.476e9 projection weights at 0.5625 (0.5159) bytes, 0.525e9 bytes of bf16 rest.
    int64_t projections = 0;
    uint64_t nf4 = 0;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto [out, in] = projection_shape(config, static_cast<LoraTarget>(t));
      projections += 32 * out * in;
      nf4 += 32 * static_cast<uint64_t>(nf4_sizes(out * in, double_quant).bytes);
    }
    EXPECT_EQ(projections, 6476005376);
    const uint64_t dense = 2 * (2 * 32000 * 4096 + 65 * 4096);
    EXPECT_EQ(base, nf4 + dense);
    if (double_quant) {
      EXPECT_EQ(base, 3865592704u) << "3.87 GB";
    } else {
      EXPECT_EQ(base, 4167573504u) << "4.17 GB";
    }
    EXPECT_EQ(allocator.stats().live_by_category[static_cast<int>(Category::kWorkspace)], 0u)
        << "the staging of init is gone";
  }
}

TEST(Qlora, AnNf4BaseIsNotSavedAsDenseWeights) {
  CpuRun run;
  Transformer model(*run.backend, testing::tiny_decoder(true, false, false), qlora_options(false));
  model.init_random(1);
  EXPECT_THROW(save_weights(*run.backend, model, "/nonexistent/model.safetensors"), UsageError);
}

}  // namespace
}  // namespace headroom
