// The experiment config: one TOML file (plus --set overrides) resolved into a
// plain struct, strictly.
//
// Every key lives in one schema table (config/schema.h) that drives loading,
// --set, to_toml() and the reference in docs/config.md, so a key cannot exist
// in one of them and be missing from another. The defaults below describe a
// small cpu quickstart; `headroom plan` / `train` read everything else from
// the file.
//
// Strict means: an unknown key, a wrong type, an out-of-range value or two
// contradicting keys is a UsageError (exit code 2) whose message starts with
// `file:line:column: section.key:` (or `--set section.key=value: section.key:`)
// and says what was expected; a typo gets the nearest valid key suggested.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// Floating-point storage types a user can pick for weights, logits and the
// optimizer's master copy. Kept here (not tensor/dtype.h) because config sits
// beside util, below the tensor layer.
enum class Precision : uint8_t { kFp32, kBf16, kFp16 };

struct RunSection {
  enum class Backend : uint8_t { kCpu, kCuda, kMeta };

  std::string name = "quickstart";  // results go to <out_dir>/<name>/
  int64_t seed = 1234;              // dropout and any other per-step randomness
  int64_t steps = 50;               // optimizer steps
  Backend backend = Backend::kCpu;
  std::string out_dir = "results";
  // Seconds a rank waits in one collective before it reports what it waited
  // for and aborts the job (a rank that hangs); 0 = wait forever.
  int64_t collective_timeout = 600;

  bool operator==(const RunSection&) const = default;
};

struct ModelSection {
  // "nf4": QLoRA's frozen base, the block projections stored as bitsandbytes'
  // NF4 and dequantized per use (backend/common/nf4.h).
  enum class Quantization : uint8_t { kNone, kNf4 };
  // Exactly one of preset / hf_config names the architecture. "tiny" is the
  // default only while hf_config is not given (see docs/config.md).
  std::string preset = "tiny";
  std::string hf_config;  // path to a Hugging Face config.json
  std::string weights;    // safetensors file or folder; empty = random init from seed
  Precision dtype = Precision::kFp32;
  int64_t seed = 1234;  // weight init when weights is empty
  Quantization quantization = Quantization::kNone;
  bool double_quant = false;  // bnb_4bit_use_double_quant

  bool operator==(const ModelSection&) const = default;
};

struct LoraSection {
  // PEFT's init_lora_weights: True (A Kaiming-uniform) or "gaussian" (A ~
  // N(0, 1/r)); B starts at zero either way.
  enum class Init : uint8_t { kKaimingUniform, kGaussian };
  bool enabled = false;
  int rank = 16;
  double alpha = 32.0;  // the update is scaled by alpha / rank, as in PEFT
  double dropout = 0.0;
  std::vector<std::string> targets = {"q_proj", "v_proj"};  // HF module names
  Init init = Init::kKaimingUniform;
  int64_t seed = 0;  // A's init (the dropout masks come from run.seed)

  bool operator==(const LoraSection&) const = default;
};

struct DataSection {
  std::string path;               // tokenized HDF5 (data_tools/)
  int64_t max_sample_tokens = 0;  // longer samples are truncated; 0 = never
  bool shuffle = true;
  int64_t seed = 1234;
  // When `path` does not exist, write a synthetic corpus there first: an
  // order-1 Markov source of known entropy over the model's vocabulary
  // (docs/data-format.md). The quickstart uses it; real data leaves it off.
  bool synthesize_if_missing = false;
  int64_t synthetic_documents = 2000;
  // Lengths of the synthetic documents, in `headroom data synth --lengths`
  // syntax: fixed:L, uniform:A-B, lognormal:MEDIAN,SIGMA,MIN-MAX, histogram:A-B:W,...
  std::string synthetic_lengths = "uniform:32-512";

  bool operator==(const DataSection&) const = default;
};

struct BatchSection {
  enum class Mode : uint8_t { kPacked, kPadded };
  enum class Packing : uint8_t { kFirstFit, kFirstFitDecreasing, kNextFit };
  enum class PadTo : uint8_t { kBucket, kLongest };

  Mode mode = Mode::kPacked;
  Packing packing = Packing::kFirstFit;       // packed: how documents are put into bins
  int64_t packing_window = 4096;              // packed: documents packed together; 0 = the epoch
  int64_t max_tokens_per_micro_batch = 2048;  // packed: the first-fit bin's token budget
  int64_t pad_to_multiple_of = 0;  // bins (packed) / rows (padded) to a multiple; 0 = not padded
  // Samples per micro-batch; padded needs >= 1 unless bucketed, where it caps
  // the rows (0 = no cap); packed: 0 = no cap.
  int micro_batch_size = 0;
  int grad_accum = 1;  // micro-batches per optimizer step, per data-parallel rank
  // Micro-batches per optimizer step over all data-parallel ranks; each rank
  // accumulates global_micro_batches / (data-parallel ranks). 0 = off
  // (batch.grad_accum per rank).
  int64_t global_micro_batches = 0;
  int64_t seq_len = 0;  // padded: fixed length; 0 = longest sample of the micro-batch
  // Padded: length-bucket boundaries in tokens, increasing; empty = none.
  // auto_buckets: from the dataset's length quantiles (batch.buckets = "auto").
  std::vector<int64_t> buckets;
  bool auto_buckets = false;
  PadTo pad_to = PadTo::kBucket;  // bucketed rows: to the bucket's length or to the longest
  // Padded: length grouping over pools worth this many micro-batches (HF's
  // LengthGroupedSampler megabatch is 50); 0 = off.
  int64_t group_pool = 0;

  bool operator==(const BatchSection&) const = default;
};

struct AttentionSection {
  enum class Backend : uint8_t { kBlockSparse, kDenseAdditive };
  enum class Mask : uint8_t { kCausal, kDocument, kSlidingWindow, kDflashBlock };

  Backend backend = Backend::kBlockSparse;
  Mask mask = Mask::kDocument;
  int block_size = 64;     // tile edge of the block-sparse kernel (not a mask parameter)
  int window = 0;          // sliding_window: tokens each query sees (itself included)
  int64_t mask_block = 0;  // dflash_block: tokens per block; no default (must be set)

  bool operator==(const AttentionSection&) const = default;
};

struct LossSection {
  enum class Mode : uint8_t { kSave, kRecompute };

  int64_t chunk_size = 0;  // tokens per cross-entropy chunk; 0 = whole logits at once
  Mode mode = Mode::kRecompute;
  Precision logits_dtype = Precision::kFp32;

  bool operator==(const LossSection&) const = default;
};

struct MemorySection {
  enum class Allocator : uint8_t { kCaching, kExact };

  // A GPU preset (memory/device_preset.h, docs/devices.md): its usable memory
  // less what lives outside the allocator is the capacity. "" = none.
  std::string device;
  uint64_t device_capacity = 0;  // bytes; past it an allocation is an OOM. 0 = unlimited
  Allocator allocator = Allocator::kCaching;

  bool operator==(const MemorySection&) const = default;
};

struct ZeroSection {
  int stage = 0;
  int prefetch = 1;  // blocks gathered ahead of the one computing
  bool offload_optimizer = false;

  bool operator==(const ZeroSection&) const = default;
};

// How the ranks of a job divide the model beside data parallelism.
struct ParallelSection {
  // Tensor-parallel group size N: ranks r with the same r / N hold one
  // model between them (model/tensor_parallel.h), and ZeRO and the data
  // are over the world / N groups across them (r % N equal).
  int tensor = 1;
  // Megatron's sequence parallelism within each tensor-parallel group
  // (model/tensor_parallel.h): the residual stream and the norms on T/N
  // tokens per rank.
  bool sequence = false;

  bool operator==(const ParallelSection&) const = default;
};

struct CheckpointSection {
  enum class Format : uint8_t { kSharded, kConsolidated };
  // "auto": continue from the newest complete checkpoint this config wrote
  // (a requeued job), or start afresh when there is none.
  enum class Resume : uint8_t { kNever, kAuto };

  // Activation checkpointing interval in blocks: 0 = none, 1 = every block
  // ("full"), k = every k-th block ("every_<k>").
  int activations = 0;
  int64_t save_every = 0;  // steps between saved checkpoints; 0 = none during the run
  std::string dir;         // empty = <run.out_dir>/<run.name>/checkpoints
  Format format = Format::kConsolidated;
  bool save_initial = false;
  std::string resume_from;  // a step-N checkpoint folder to continue from; empty = start afresh
  Resume resume = Resume::kNever;

  bool operator==(const CheckpointSection&) const = default;
};

struct OptimizerSection {
  // "adamw": fp32 moments (torch.optim.AdamW). "adamw_8bit": bitsandbytes'
  // AdamW8bit, blockwise 8-bit moments (train/optimizer.h).
  enum class Kind : uint8_t { kAdamw, kAdamw8bit };
  // The copy of the weights the update is made on: fp32 (mixed precision),
  // a bf16 copy, or none (the weights are updated in place).
  enum class Master : uint8_t { kFp32, kBf16, kNone };

  Kind kind = Kind::kAdamw;
  double lr = 3e-4;
  std::array<double, 2> betas = {0.9, 0.95};
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // global grad-norm clip; 0 = no clipping
  Master master_dtype = Master::kFp32;
  // Consecutive steps skipped as non-finite after which the run stops with
  // exit 4; 0 = never stop early (a run none of whose steps was finite still
  // exits 4).
  int64_t max_nonfinite_steps = 10;
  // The loss is multiplied by this before backward and the gradients divided
  // by it before the update (fp16's small gradients would flush to zero):
  // a constant >= 1 (1: no scaling), or 0 for "dynamic", PyTorch's
  // GradScaler (start 65536, x2 after 2000 steps without overflow, x0.5 and
  // the step skipped on an inf or NaN gradient).
  double loss_scale = 1.0;

  bool operator==(const OptimizerSection&) const = default;
};

struct ScheduleSection {
  enum class Decay : uint8_t { kCosine, kLinear, kConstant };

  int64_t warmup_steps = 5;
  Decay decay = Decay::kCosine;
  double min_lr = 3e-5;

  bool operator==(const ScheduleSection&) const = default;
};

struct TraceSection {
  bool memory_events = true;  // every alloc/free into /memory/events
  int flush_every = 1;        // steps between HDF5 flushes

  bool operator==(const TraceSection&) const = default;
};

struct ExperimentConfig {
  RunSection run;
  ModelSection model;
  LoraSection lora;
  DataSection data;
  BatchSection batch;
  AttentionSection attention;
  LossSection loss;
  MemorySection memory;
  ZeroSection zero;
  ParallelSection parallel;
  CheckpointSection checkpoint;
  OptimizerSection optimizer;
  ScheduleSection schedule;
  TraceSection trace;

  bool operator==(const ExperimentConfig&) const = default;
};

// The TOML spelling of each enumerator, indexed by its value. The schema parses
// with these and name_of() prints with them, so the two cannot disagree.
template <class E>
struct EnumNames {};
template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::string_view, 3> kNames = {"fp32", "bf16", "fp16"};
};
template <>
struct EnumNames<ModelSection::Quantization> {
  static constexpr std::array<std::string_view, 2> kNames = {"none", "nf4"};
};
template <>
struct EnumNames<RunSection::Backend> {
  static constexpr std::array<std::string_view, 3> kNames = {"cpu", "cuda", "meta"};
};
template <>
struct EnumNames<BatchSection::Mode> {
  static constexpr std::array<std::string_view, 2> kNames = {"packed", "padded"};
};
template <>
struct EnumNames<BatchSection::Packing> {
  static constexpr std::array<std::string_view, 3> kNames = {"first_fit", "first_fit_decreasing",
                                                             "next_fit"};
};
template <>
struct EnumNames<BatchSection::PadTo> {
  static constexpr std::array<std::string_view, 2> kNames = {"bucket", "longest"};
};
template <>
struct EnumNames<AttentionSection::Backend> {
  static constexpr std::array<std::string_view, 2> kNames = {"block_sparse", "dense_additive"};
};
template <>
struct EnumNames<AttentionSection::Mask> {
  static constexpr std::array<std::string_view, 4> kNames = {"causal", "document", "sliding_window",
                                                             "dflash_block"};
};
template <>
struct EnumNames<LoraSection::Init> {
  static constexpr std::array<std::string_view, 2> kNames = {"kaiming_uniform", "gaussian"};
};
template <>
struct EnumNames<LossSection::Mode> {
  static constexpr std::array<std::string_view, 2> kNames = {"save", "recompute"};
};
template <>
struct EnumNames<MemorySection::Allocator> {
  static constexpr std::array<std::string_view, 2> kNames = {"caching", "exact"};
};
template <>
struct EnumNames<CheckpointSection::Format> {
  static constexpr std::array<std::string_view, 2> kNames = {"sharded", "consolidated"};
};
template <>
struct EnumNames<CheckpointSection::Resume> {
  static constexpr std::array<std::string_view, 2> kNames = {"never", "auto"};
};
template <>
struct EnumNames<OptimizerSection::Kind> {
  static constexpr std::array<std::string_view, 2> kNames = {"adamw", "adamw_8bit"};
};
template <>
struct EnumNames<OptimizerSection::Master> {
  static constexpr std::array<std::string_view, 3> kNames = {"fp32", "bf16", "none"};
};
template <>
struct EnumNames<ScheduleSection::Decay> {
  static constexpr std::array<std::string_view, 3> kNames = {"cosine", "linear", "constant"};
};

// "block_sparse", "bf16", ...: the spelling a user writes in the TOML file.
template <class E>
requires requires {
  EnumNames<E>::kNames;
}
constexpr std::string_view name_of(E value) {
  return EnumNames<E>::kNames[static_cast<size_t>(value)];
}

// What the loader does with a [sweep] table (the keys a sweep varies,
// sweep/sweep_spec.h): `train` and `plan` refuse a file holding one with a
// UsageError at the table's position (it is not one run), `headroom sweep`
// loads the base experiment with the table skipped.
enum class SweepTable : uint8_t { kRefuse, kSkip };

// Reads the TOML file at `path`, applies `overrides` ("section.key=value", in
// order, after the file), checks every value and every rule between keys, and
// returns the resolved config. Throws UsageError naming the file (or the
// --set argument), line:column, the key and what was expected; a file that
// cannot be read gives "<path>: cannot open config file: <strerror>", and
// only a regular file of at most 16 MiB is read (util/read_file.h).
ExperimentConfig load_config_file(const std::string& path,
                                  const std::vector<std::string>& overrides = {},
                                  SweepTable sweep_table = SweepTable::kRefuse);

// As load_config_file, for TOML text already in memory; `source_name` stands
// for the file in error messages (e.g. "experiments/x.toml", "<trace>").
ExperimentConfig load_config_string(std::string_view toml_text, std::string_view source_name,
                                    const std::vector<std::string>& overrides = {},
                                    SweepTable sweep_table = SweepTable::kRefuse);

// `config` with `overrides` applied as --set applies them, the rules between
// keys left unchecked (config/schema.h's broken_rules asks them): for a
// caller that completes a change with what the rules require beside it.
// Throws UsageError for an unknown key or a value its key refuses.
ExperimentConfig with_overrides_unchecked(const ExperimentConfig& config,
                                          const std::vector<std::string>& overrides);

// The text of the config file at `path`, read as load_config_file reads it
// (a regular file of at most 16 MiB), for a caller that parses it twice.
std::string read_config_text(const std::string& path);

// Every section and every key, in schema order, as TOML that loads back to an
// equal config: load_config_string(to_toml(c), ...) == c for any valid c. This
// is what is echoed into results/<name>/config.toml and the trace.
std::string to_toml(const ExperimentConfig& config);

// The key reference (one Markdown table per section, then the rules between
// keys), generated from the schema; docs/config.md embeds it verbatim and a
// test keeps the two identical.
std::string config_reference_markdown();

}  // namespace headroom
