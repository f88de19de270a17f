// headroom's side of the whole-model check against PyTorch (reference_check.py).
//
//   torch_reference_dump <out_dir> [seed]
//
// For every case (Llama, Qwen2, Qwen3 shapes with GQA; tied and untied head;
// fp32 and bf16) builds a small model on the cpu backend with random weights,
// runs one forward + backward on a fixed packed batch of several documents,
// and writes <out_dir>/<case>/:
//   model.safetensors, config.json   save_checkpoint: the HF names and the
//                                    config.json transformers would read
//   results.safetensors              batch.tokens, batch.targets,
//                                    batch.positions, batch.cu_seqlens (I32),
//                                    loss (F32 [1], the mean over counted
//                                    tokens), token_loss (F32 [T], 0 where no
//                                    target), grad.<HF name> (model dtype)
// The Transformer does not expose its logits (the fused linear +
// cross-entropy never holds them whole), so the logits are checked through
// token_loss: token t's loss is lse_t - logits[t, target_t], measured by a
// pass in which t is the only counted token.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "data/batch.h"
#include "memory/allocator.h"
#include "memory/segment_source.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace headroom {
namespace {

struct Case {
  const char* arch;  // "llama", "qwen2", "qwen3"
  bool tied;
  DType dtype;
};

// Shapes with the family's traits: GQA everywhere, Qwen3's H*D != C (as in
// Qwen3-0.6B, 16 * 128 vs 1024), Qwen2's biases, Llama's eps and theta.
ModelConfig shape_of(const Case& c) {
  ModelConfig m;
  m.name = std::string("torchref-") + c.arch;
  m.vocab_size = 97;
  m.intermediate_size = 80;
  m.num_layers = 2;
  m.max_position_embeddings = 128;
  m.tie_word_embeddings = c.tied;
  const std::string arch = c.arch;
  if (arch == "llama") {
    m.architecture = "LlamaForCausalLM";
    m.hidden_size = 64, m.num_heads = 4, m.num_kv_heads = 2, m.head_dim = 16;
    m.rope_theta = 10000, m.rms_norm_eps = 1e-5;
  } else if (arch == "qwen2") {
    m.architecture = "Qwen2ForCausalLM";
    m.hidden_size = 64, m.num_heads = 8, m.num_kv_heads = 2, m.head_dim = 8;
    m.rope_theta = 1e6, m.rms_norm_eps = 1e-6;
    m.attention_bias = true;
  } else {
    m.architecture = "Qwen3ForCausalLM";
    m.hidden_size = 48, m.num_heads = 4, m.num_kv_heads = 2, m.head_dim = 16;
    m.rope_theta = 1e6, m.rms_norm_eps = 1e-6;
    m.qk_norm = true;
  }
  return m;
}

// Five documents of different lengths, one of a single token (no target),
// packed into T = 64 tokens that straddle the 16-token attention tiles.
Batch packed_batch(int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  for (int64_t len : {11, 27, 1, 17, 8}) {
    std::vector<int32_t> doc(static_cast<size_t>(len));
    for (int32_t& t : doc)
      t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    append_document(b, doc.data(), len);
  }
  return b;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::string tail = suffix;
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Random values everywhere, at scales that keep every path's signal O(1):
// the 0.02 init would leave attention nearly uniform, and unit norm weights
// and zero biases would hide a norm or a bias applied in the wrong place.
void randomize(Backend& backend, Transformer& model, uint64_t base_seed) {
  uint64_t seed = base_seed * 1000;
  for (size_t g = 0; g < model.num_base_groups(); ++g) {
    model.begin_params_write(g);
    for (size_t i = 0; i < model.layouts()[g].specs.size(); ++i) {
      const ParamSpec& spec = model.layouts()[g].specs[i];
      Tensor& w = model.params()[g].views[i];
      if (ends_with(spec.name, "norm.weight")) {
        backend.fill_uniform(w, seed, 0.5f, 1.5f);
      } else if (ends_with(spec.name, ".bias")) {
        backend.fill_uniform(w, seed, -0.5f, 0.5f);
      } else if (spec.name == "model.embed_tokens.weight") {
        backend.fill_uniform(w, seed, -1.0f, 1.0f);
      } else {  // a linear (out, in): std 1 / sqrt(in)
        const float a = std::sqrt(3.0f / static_cast<float>(spec.shape[1]));
        backend.fill_uniform(w, seed, -a, a);
      }
      ++seed;
    }
    model.end_params_write(g);
  }
}

// The loss_sum of one forward_backward (gradients accumulate into the model's).
float loss_sum_of(Backend& backend, Transformer& model, const Batch& batch, float loss_scale) {
  Tensor loss_sum = backend.empty({1}, DType::kF32, Category::kWorkspace, "loss");
  backend.fill(loss_sum, 0.0f);
  model.forward_backward(batch, loss_scale, loss_sum);
  float host = 0;
  backend.copy_to_host(loss_sum, &host);
  return host;
}

void dump_case(const Case& c, uint64_t seed, const std::string& dir) {
  Allocator allocator(make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  std::unique_ptr<Backend> backend =
      make_backend(BackendKind::kCpu, TargetDevice::kHostCpu, allocator);
  TransformerOptions options;
  options.dtype = c.dtype;
  options.attention_block_size = 16;  // several tiles; documents cross tile edges
  options.loss.chunk_size = 24;       // several loss chunks, the last one partial
  Transformer model(*backend, shape_of(c), options);
  randomize(*backend, model, seed);
  save_checkpoint(*backend, model, dir);

  const Batch batch = packed_batch(model.config().vocab_size, seed);
  const int64_t T = batch.size();
  const float loss = loss_sum_of(*backend, model, batch, 1.0f / static_cast<float>(batch.counted)) /
                     static_cast<float>(batch.counted);

  SafetensorsWriter out(dir + "/results.safetensors");
  const int64_t docs = static_cast<int64_t>(batch.cu_seqlens.size());
  out.declare("batch.tokens", DType::kI32, {T});
  out.declare("batch.targets", DType::kI32, {T});
  out.declare("batch.positions", DType::kI32, {T});
  out.declare("batch.cu_seqlens", DType::kI32, {docs});
  out.declare("loss", DType::kF32, {1});
  out.declare("token_loss", DType::kF32, {T});
  const auto& layouts = model.layouts();
  for (const GroupLayout& layout : layouts)
    for (const ParamSpec& spec : layout.specs)
      out.declare("grad." + spec.name, c.dtype, spec.shape);
  out.write("batch.tokens", batch.tokens.data());
  out.write("batch.targets", batch.targets.data());
  out.write("batch.positions", batch.positions.data());
  out.write("batch.cu_seqlens", batch.cu_seqlens.data());
  out.write("loss", &loss);

  // Every gradient leaves the model before the per-token passes add to it.
  std::vector<std::vector<char>> grads;
  for (size_t g = 0; g < layouts.size(); ++g)
    for (const Tensor& view : model.grads()[g].views) {
      grads.emplace_back(view.nbytes());
      backend->copy_to_host(view, grads.back().data());
    }

  std::vector<float> token_loss(static_cast<size_t>(T), 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    if (batch.targets[static_cast<size_t>(t)] < 0) continue;
    Batch one = batch;
    for (int64_t u = 0; u < T; ++u)
      if (u != t) one.targets[static_cast<size_t>(u)] = -1;
    one.counted = 1;
    token_loss[static_cast<size_t>(t)] = loss_sum_of(*backend, model, one, 1.0f);
    model.zero_grads();
  }
  out.write("token_loss", token_loss.data());
  size_t k = 0;
  for (const GroupLayout& layout : layouts)
    for (const ParamSpec& spec : layout.specs)
      out.write("grad." + spec.name, grads[k++].data());
  out.finish();
}

int run(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s <out_dir> [seed]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const uint64_t seed = argc == 3 ? std::stoull(argv[2]) : 1;
  for (const char* arch : {"llama", "qwen2", "qwen3"})
    for (bool tied : {false, true})
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
        const Case c{arch, tied, dtype};
        const std::string name =
            std::string(arch) + (tied ? "-tied-" : "-untied-") + std::string(name_of(dtype));
        const std::string dir = root + "/" + name;
        std::filesystem::create_directories(dir);
        dump_case(c, seed, dir);
        std::printf("wrote %s\n", dir.c_str());
      }
  return 0;
}

}  // namespace
}  // namespace headroom

int main(int argc, char** argv) {
  try {
    return headroom::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_reference_dump: %s\n", e.what());
    return 1;
  }
}
