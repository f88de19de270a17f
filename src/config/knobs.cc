#include "config/knobs.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "config/schema.h"
#include "util/error.h"

namespace headroom {

std::string_view name_of(KnobEffect effect) {
  switch (effect) {
    case KnobEffect::kSameTraining:
      return "same training";
    case KnobEffect::kSameGlobalBatch:
      return "same global batch";
    case KnobEffect::kChangesTraining:
      return "changes the training";
  }
  return "?";
}

const std::vector<std::string>& adapter_sets() {
  static const std::vector<std::string> sets = {"lora.enabled=true", "lora.rank=16",
                                                "lora.targets=[\"q_proj\", \"v_proj\"]"};
  return sets;
}

namespace {

using E = KnobEffect;
using Choices = std::vector<KnobChoice>;

// The document length at the nearest-rank percentile `p` (0 < p <= 100).
int64_t percentile(std::vector<int64_t> lengths, double p) {
  std::sort(lengths.begin(), lengths.end());
  const size_t rank =
      static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(lengths.size())));
  return lengths[std::clamp<size_t>(rank, 1, lengths.size()) - 1];
}

// Twice the micro-batches of a step, in whichever key the config counts them.
std::string accumulation_doubled(const ExperimentConfig& c) {
  if (c.batch.global_micro_batches > 0)
    return "batch.global_micro_batches=" + std::to_string(2 * c.batch.global_micro_batches);
  return "batch.grad_accum=" + std::to_string(2 * c.batch.grad_accum);
}

bool rows_grouped_by_tokens(const ExperimentConfig& c) {
  return c.batch.mode == BatchSection::Mode::kPacked || !c.batch.buckets.empty() ||
         c.batch.auto_buckets;
}

std::vector<KnobSpec> build_knob_table() {
  return {
      // Activations: every block's kept only as its input (full), or every
      // second block's (half the recompute, about half the saving).
      {"checkpoint.activations", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         Choices out;
         const int every = c.checkpoint.activations;
         if (every != 1)
           out.push_back({"checkpoint every block's activations",
                          {"checkpoint.activations=full"},
                          "recomputes each block's forward in backward"});
         if (every == 0 || every > 2)
           out.push_back({"checkpoint every second block's activations",
                          {"checkpoint.activations=every_2"},
                          "recomputes half the blocks' forward"});
         return out;
       }},
      // SDPA's math path keeps (B, H, S, S) fp32 probabilities per layer;
      // flash attention over the same mask keeps a logsumexp.
      {"attention.backend", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.attention.backend != AttentionSection::Backend::kDenseAdditive) return Choices{};
         return Choices{{"block-sparse flash attention over the same mask",
                         {"attention.backend=block_sparse"},
                         "the same attention, no [B, H, S, S] scores"}};
       }},
      // The loss: whole-vocabulary logits chunked, the chunks recomputed; a
      // recomputed chunk halved.
      {"loss.chunk_size", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.loss.chunk_size == 0)
           return Choices{{"a chunked loss (1024 tokens), logits recomputed in backward",
                           {"loss.chunk_size=1024", "loss.mode=recompute"},
                           "the head's matmul once more"}};
         if (c.loss.mode == LossSection::Mode::kRecompute && c.loss.chunk_size > 256)
           return Choices{{"half the loss chunk",
                           {"loss.chunk_size=" + std::to_string(c.loss.chunk_size / 2)},
                           ""}};
         return Choices{};
       }},
      {"loss.mode", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.loss.chunk_size == 0 || c.loss.mode != LossSection::Mode::kSave) return Choices{};
         return Choices{{"recompute each loss chunk's logits in backward instead of keeping them",
                         {"loss.mode=recompute"},
                         "the head's matmul once more"}};
       }},
      {"loss.logits_dtype", E::kSameGlobalBatch,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.loss.logits_dtype != Precision::kFp32 || c.model.dtype == Precision::kFp32)
           return Choices{};
         const std::string narrow(name_of(c.model.dtype));
         return Choices{{"logits in " + narrow,
                         {"loss.logits_dtype=" + narrow},
                         "the logits are rounded to " + narrow + " before the softmax"}};
       }},
      // The optimizer's states: no fp32 master copy of bf16 weights (seed
      // 003's 16 -> 12 bytes per parameter), and bitsandbytes' 8-bit moments
      // (8 -> ~2 bytes per parameter). Both round what the fp32 optimizer
      // keeps exactly.
      {"optimizer.master_dtype", E::kSameGlobalBatch,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.model.dtype != Precision::kBf16 ||
             c.optimizer.master_dtype != OptimizerSection::Master::kFp32)
           return Choices{};
         return Choices{
             {"no fp32 master: the bf16 weights updated in place (fp32 moments)",
              {"optimizer.master_dtype=none"},
              "each update is rounded to bf16 once; updates below half a bf16 ulp are lost"}};
       }},
      {"optimizer.kind", E::kSameGlobalBatch,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.optimizer.kind != OptimizerSection::Kind::kAdamw) return Choices{};
         return Choices{{"8-bit AdamW (bitsandbytes' blockwise moments)",
                         {"optimizer.kind=adamw_8bit"},
                         "m and v quantized to 8 bits per block of 256 values (tensors of 4096 "
                         "or more)"}};
       }},
      // Sharding: one stage further, where there are ranks to shard over.
      {"zero.stage", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext& context) {
         if (context.world_size <= 1 || c.zero.stage >= 3) return Choices{};
         return Choices{
             {"ZeRO stage " + std::to_string(c.zero.stage + 1),
              {"zero.stage=" + std::to_string(c.zero.stage + 1)},
              c.zero.stage == 2 ? "parameters gathered per block, per micro-batch" : ""}};
       }},
      // Tensor parallelism on the same ranks: groups twice as large, half
      // as many data-parallel ranks, so twice the accumulation per rank
      // keeps the tokens per step (batch.global_micro_batches derives it
      // already). The model's and the refusals' checks are the plan's: a
      // value it refuses is listed as refused.
      {"parallel.tensor", E::kSameGlobalBatch,
       [](const ExperimentConfig& c, const KnobContext& context) {
         const int doubled = 2 * c.parallel.tensor;
         if (context.world_size % doubled != 0) return Choices{};
         std::vector<std::string> overrides{"parallel.tensor=" + std::to_string(doubled)};
         if (c.batch.global_micro_batches == 0) overrides.push_back(accumulation_doubled(c));
         return Choices{{"tensor-parallel groups of " + std::to_string(doubled) + " ranks",
                         std::move(overrides),
                         "each block's weights, heads and MLP split over the group; two "
                         "all-reduces of the activations per sublayer"}};
       }},
      // Inside tensor-parallel groups: the residual stream on T/N tokens,
      // the same collective bytes.
      {"parallel.sequence", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.parallel.tensor < 2 || c.parallel.sequence) return Choices{};
         return Choices{{"sequence parallelism inside the tensor-parallel groups",
                         {"parallel.sequence=true"},
                         "reduce-scatter and all-gather instead of each all-reduce"}};
       }},
      {"zero.offload_optimizer", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.zero.offload_optimizer) return Choices{};
         return Choices{{"the optimizer's states and update in host memory",
                         {"zero.offload_optimizer=true"},
                         "gradients to the host and parameters back every step; host memory "
                         "holds the states"}};
       }},
      // The micro-batch halved, the accumulation doubled: the same tokens
      // per optimizer step.
      {"batch.max_tokens_per_micro_batch", E::kSameGlobalBatch,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (!rows_grouped_by_tokens(c) || c.batch.max_tokens_per_micro_batch < 2) return Choices{};
         return Choices{
             {"half the micro-batch's token budget, twice the accumulation",
              {"batch.max_tokens_per_micro_batch=" +
                   std::to_string(c.batch.max_tokens_per_micro_batch / 2),
               accumulation_doubled(c)},
              c.batch.mode == BatchSection::Mode::kPacked
                  ? "bins of half the size: documents are grouped differently into micro-batches"
                  : "rows grouped differently into micro-batches"}};
       }},
      {"batch.micro_batch_size", E::kSameGlobalBatch,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (rows_grouped_by_tokens(c) || c.batch.micro_batch_size < 2 ||
             c.batch.micro_batch_size % 2 != 0)
           return Choices{};
         return Choices{{"half the micro-batch, twice the accumulation",
                         {"batch.micro_batch_size=" + std::to_string(c.batch.micro_batch_size / 2),
                          accumulation_doubled(c)},
                         ""}};
       }},
      // The longest samples cut at the 99th percentile of the lengths.
      {"data.max_sample_tokens", E::kChangesTraining,
       [](const ExperimentConfig& c, const KnobContext& context) {
         const std::vector<int64_t>& lengths = context.lengths;
         if (lengths.empty()) return Choices{};
         const int64_t p99 = percentile(lengths, 99);
         const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
         const int64_t cut = c.data.max_sample_tokens;
         if (p99 >= longest || (cut != 0 && p99 >= cut)) return Choices{};
         int64_t cut_documents = 0, cut_tokens = 0;
         for (int64_t n : lengths) {
           const int64_t kept = cut > 0 ? std::min(n, cut) : n;
           if (kept > p99) {
             ++cut_documents;
             cut_tokens += kept - p99;
           }
         }
         return Choices{{"truncate samples at the 99th percentile of the lengths",
                         {"data.max_sample_tokens=" + std::to_string(p99)},
                         "truncates " + std::to_string(cut_documents) + " of " +
                             std::to_string(lengths.size()) + " documents (" +
                             std::to_string(cut_tokens) + " tokens)"}};
       }},
      // What is trained.
      {"lora.enabled", E::kChangesTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.lora.enabled) return Choices{};
         return Choices{{"LoRA (r = 16 on q_proj, v_proj) instead of full fine-tuning",
                         adapter_sets(), "trains low-rank adapters; the base stays frozen"}};
       }},
      {"lora.targets", E::kChangesTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (!c.lora.enabled || c.lora.targets.size() <= 2) return Choices{};
         return Choices{{"LoRA on q_proj and v_proj only",
                         {"lora.targets=[\"q_proj\", \"v_proj\"]"},
                         "fewer adapted projections"}};
       }},
      // The frozen base in 4 bits (QLoRA; seeds 003 and 004 both end there):
      // bitsandbytes' NF4 with double quantization, ~0.52 bytes per
      // projection weight instead of 2. The adapters it needs come from the
      // rule that NF4 requires LoRA.
      {"model.quantization", E::kChangesTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.model.quantization != ModelSection::Quantization::kNone) return Choices{};
         return Choices{{c.lora.enabled
                             ? "QLoRA: the frozen base in NF4 (4-bit, double quantization)"
                             : "QLoRA (r = 16 on q_proj, v_proj over a 4-bit NF4 base) instead "
                               "of full fine-tuning",
                         {"model.quantization=nf4", "model.double_quant=true"},
                         "the base's projections rounded to 4-bit NormalFloat and dequantized "
                         "for every use"}};
       }},
      // The allocator: a segment per request holds no cached free blocks.
      {"memory.allocator", E::kSameTraining,
       [](const ExperimentConfig& c, const KnobContext&) {
         if (c.memory.allocator != MemorySection::Allocator::kCaching) return Choices{};
         return Choices{{"the exact allocator (a segment per request, freed at once)",
                         {"memory.allocator=exact"},
                         "no cached segments: on a GPU, a cudaMalloc/cudaFree per allocation"}};
       }},
  };
}

// `sets` preceded by the companions of every rule the change breaks, or
// nullopt when it breaks one that has none. A companion may break a rule
// of its own, so the rules are asked again until none is broken; a few
// rounds are enough for any chain the rules hold.
std::optional<std::vector<std::string>> with_companions(const ExperimentConfig& c,
                                                        const std::vector<std::string>& sets) {
  std::vector<std::string> companions;
  for (int round = 0; round < 4; ++round) {
    std::vector<std::string> all = companions;
    all.insert(all.end(), sets.begin(), sets.end());
    ExperimentConfig changed;
    try {
      changed = with_overrides_unchecked(c, all);
    } catch (const UsageError&) {
      return all;  // a value the key refuses: the plan says why (advice's refused list)
    }
    const std::vector<const ConfigRule*> broken = broken_rules(changed);
    if (broken.empty()) return all;
    for (const ConfigRule* rule : broken) {
      if (rule->companions.empty()) return std::nullopt;
      for (const std::string& companion : rule->companions)
        if (std::find(companions.begin(), companions.end(), companion) == companions.end())
          companions.push_back(companion);
    }
  }
  return std::nullopt;
}

}  // namespace

const std::vector<KnobSpec>& knob_table() {
  static const std::vector<KnobSpec> table = build_knob_table();
  return table;
}

std::vector<Knob> knob_catalogue(const ExperimentConfig& config, int world_size,
                                 const std::vector<int64_t>& lengths) {
  const KnobContext context{.world_size = world_size, .lengths = lengths};
  std::vector<Knob> knobs;
  for (const KnobSpec& spec : knob_table())
    for (KnobChoice& choice : spec.choices(config, context)) {
      std::optional<std::vector<std::string>> overrides = with_companions(config, choice.sets);
      if (!overrides) continue;
      knobs.push_back(
          {std::move(choice.what), std::move(*overrides), spec.effect, std::move(choice.note)});
    }
  return knobs;
}

}  // namespace headroom
