// Loading and validation: every class of user error gives one exact,
// positioned message; valid files and overrides land in the struct.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "test_util/source_tree.h"
#include "util/bytes.h"
#include "util/error.h"

namespace headroom {
namespace {

// The UsageError message of loading `toml` (as "x.toml") with `overrides`.
std::string error_of(std::string_view toml, const std::vector<std::string>& overrides = {},
                     std::string_view source = "x.toml") {
  try {
    load_config_string(toml, source, overrides);
  } catch (const UsageError& error) {
    EXPECT_EQ(error.code(), ExitCode::kUsage);
    return error.what();
  }
  return "<loaded without error>";
}

ExperimentConfig load(std::string_view toml, const std::vector<std::string>& overrides = {}) {
  return load_config_string(toml, "x.toml", overrides);
}

// --- defaults -----------------------------------------------------------------

TEST(ConfigDefaults, EmptyFileIsTheDefaultStruct) {
  EXPECT_EQ(load(""), ExperimentConfig{});
  EXPECT_EQ(load("# only a comment\n\n"), ExperimentConfig{});
}

TEST(ConfigDefaults, DescribeASmallCpuQuickstart) {
  const ExperimentConfig c = load("");
  EXPECT_EQ(c.run.backend, RunSection::Backend::kCpu);
  EXPECT_EQ(c.run.out_dir, "results");
  EXPECT_GE(c.run.steps, 1);
  EXPECT_EQ(c.model.preset, "tiny");
  EXPECT_EQ(c.model.hf_config, "");
  EXPECT_EQ(c.model.weights, "");
  EXPECT_EQ(c.model.dtype, Precision::kFp32);
  EXPECT_FALSE(c.lora.enabled);
  EXPECT_EQ(c.lora.rank, 16);
  EXPECT_EQ(c.lora.alpha, 32.0);
  EXPECT_EQ(c.lora.dropout, 0.0);
  EXPECT_EQ(c.lora.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(c.data.max_sample_tokens, 0);
  EXPECT_EQ(c.batch.mode, BatchSection::Mode::kPacked);
  EXPECT_EQ(c.batch.seq_len, 0);
  EXPECT_EQ(c.batch.grad_accum, 1);
  EXPECT_EQ(c.attention.backend, AttentionSection::Backend::kBlockSparse);
  EXPECT_EQ(c.attention.mask, AttentionSection::Mask::kDocument);
  EXPECT_EQ(c.attention.mask_block, 0);
  EXPECT_EQ(c.attention.block_size, 64);
  EXPECT_EQ(c.loss.chunk_size, 0);
  EXPECT_EQ(c.loss.mode, LossSection::Mode::kRecompute);
  EXPECT_EQ(c.loss.logits_dtype, Precision::kFp32);
  EXPECT_EQ(c.memory.device, "");
  EXPECT_EQ(c.memory.device_capacity, 0u);
  EXPECT_EQ(c.memory.allocator, MemorySection::Allocator::kCaching);
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_EQ(c.zero.prefetch, 1);
  EXPECT_FALSE(c.zero.offload_optimizer);
  EXPECT_EQ(c.checkpoint.activations, 0);
  EXPECT_EQ(c.checkpoint.save_every, 0);
  EXPECT_EQ(c.checkpoint.format, CheckpointSection::Format::kConsolidated);
  EXPECT_FALSE(c.checkpoint.save_initial);
  EXPECT_EQ(c.optimizer.lr, 3e-4);
  EXPECT_EQ(c.optimizer.betas, (std::array<double, 2>{0.9, 0.95}));
  EXPECT_EQ(c.optimizer.eps, 1e-8);
  EXPECT_EQ(c.optimizer.weight_decay, 0.1);
  EXPECT_EQ(c.optimizer.grad_clip, 1.0);
  EXPECT_EQ(c.optimizer.master_dtype, OptimizerSection::Master::kFp32);
  EXPECT_EQ(c.optimizer.kind, OptimizerSection::Kind::kAdamw);
  EXPECT_EQ(c.schedule.decay, ScheduleSection::Decay::kCosine);
  EXPECT_LE(c.schedule.warmup_steps, c.run.steps);
  EXPECT_TRUE(c.trace.memory_events);
  EXPECT_EQ(c.trace.flush_every, 1);
}

TEST(ConfigDefaults, EnumNamesAreTheTomlSpellings) {
  EXPECT_EQ(name_of(AttentionSection::Mask::kDflashBlock), "dflash_block");
  EXPECT_EQ(name_of(RunSection::Backend::kMeta), "meta");
  EXPECT_EQ(name_of(Precision::kBf16), "bf16");
}

// --- a valid file ---------------------------------------------------------------

TEST(ConfigLoad, ReadsEverySectionOfAFile) {
  const ExperimentConfig c = load(R"(
[run]
name = "qwen3_8b_lora"
steps = 200
backend = "meta"

[model]
preset = "qwen3-8b"
dtype = "bf16"

[lora]
enabled = true
rank = 8
alpha = 16
targets = ["q_proj", "k_proj", "v_proj", "o_proj"]

[batch]
mode = "padded"
micro_batch_size = 2
seq_len = 2048

[attention]
backend = "dense_additive"
mask = "dflash_block"
block_size = 16
mask_block = 16

[loss]
chunk_size = 1024
mode = "save"
logits_dtype = "bf16"

[memory]
device_capacity = "80GiB"
allocator = "exact"

[zero]
stage = 3
offload_optimizer = true

[checkpoint]
activations = "every_2"

[optimizer]
lr = 1e-4
betas = [0.9, 0.999]
master_dtype = "bf16"

[schedule]
warmup_steps = 20
decay = "linear"
min_lr = 0
)");
  EXPECT_EQ(c.run.name, "qwen3_8b_lora");
  EXPECT_EQ(c.run.steps, 200);
  EXPECT_EQ(c.run.backend, RunSection::Backend::kMeta);
  EXPECT_EQ(c.model.preset, "qwen3-8b");
  EXPECT_EQ(c.model.dtype, Precision::kBf16);
  EXPECT_TRUE(c.lora.enabled);
  EXPECT_EQ(c.lora.rank, 8);
  EXPECT_EQ(c.lora.alpha, 16.0);  // a TOML integer is a fine float
  EXPECT_EQ(c.lora.targets.size(), 4u);
  EXPECT_EQ(c.batch.mode, BatchSection::Mode::kPadded);
  EXPECT_EQ(c.batch.micro_batch_size, 2);
  EXPECT_EQ(c.attention.backend, AttentionSection::Backend::kDenseAdditive);
  EXPECT_EQ(c.attention.mask, AttentionSection::Mask::kDflashBlock);
  EXPECT_EQ(c.loss.mode, LossSection::Mode::kSave);
  EXPECT_EQ(c.memory.device_capacity, 80 * kGiB);
  EXPECT_EQ(c.memory.allocator, MemorySection::Allocator::kExact);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_TRUE(c.zero.offload_optimizer);
  EXPECT_EQ(c.checkpoint.activations, 2);
  EXPECT_EQ(c.optimizer.betas[1], 0.999);
  EXPECT_EQ(c.schedule.decay, ScheduleSection::Decay::kLinear);
  EXPECT_EQ(c.schedule.min_lr, 0.0);
}

TEST(ConfigLoad, TopLevelDottedKeysAreTheSameAsSections) {
  EXPECT_EQ(load("run.steps = 7\nzero.stage = 2\n").zero.stage, 2);
}

TEST(ConfigLoad, ByteSizesAcceptUnitsAndIntegers) {
  auto capacity = [](std::string_view value) {
    return load("[memory]\ndevice_capacity = " + std::string(value) + "\n").memory.device_capacity;
  };
  EXPECT_EQ(capacity("\"80GiB\""), 80 * kGiB);
  EXPECT_EQ(capacity("\"80GB\""), 80'000'000'000u);
  EXPECT_EQ(capacity("\"1.5GB\""), 1'500'000'000u);
  EXPECT_EQ(capacity("\"512MiB\""), 512 * kMiB);
  EXPECT_EQ(capacity("\"2 MiB\""), 2 * kMiB);
  EXPECT_EQ(capacity("85899345920"), 80 * kGiB);
  EXPECT_EQ(capacity("0"), 0u);
}

TEST(ConfigLoad, ActivationCheckpointingSpellings) {
  auto interval = [](std::string_view value) {
    return load("[checkpoint]\nactivations = \"" + std::string(value) + "\"\n")
        .checkpoint.activations;
  };
  EXPECT_EQ(interval("none"), 0);
  EXPECT_EQ(interval("full"), 1);
  EXPECT_EQ(interval("every_1"), 1);
  EXPECT_EQ(interval("every_4"), 4);
  for (std::string_view bad : {"every_0", "every_", "every_x", "every_-2", "every_2x", "Full"}) {
    EXPECT_EQ(error_of("[checkpoint]\nactivations = \"" + std::string(bad) + "\"\n"),
              "x.toml:2:15: checkpoint.activations: expected \"none\", \"full\" or \"every_<k>\" "
              "with k >= 1, got \"" +
                  std::string(bad) + "\"")
        << bad;
  }
}

TEST(ConfigLoad, FileOnDisk) {
  const std::string path = testing::binary_dir() + "/config_test_file.toml";
  {
    std::ofstream file(path);
    file << "[run]\nsteps = 12\n[zero]\nstage = 7\n";
  }
  try {
    load_config_file(path);
    ADD_FAILURE() << "zero.stage = 7 was accepted";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()),
              path + ":4:9: zero.stage: expected an integer in 0..3, got 7");
  }
  {
    std::ofstream file(path);
    file << "[run]\nsteps = 12\n[zero]\nstage = 2\n";
  }
  const ExperimentConfig c = load_config_file(path, {"zero.stage=1"});
  EXPECT_EQ(c.run.steps, 12);
  EXPECT_EQ(c.zero.stage, 1);
  std::remove(path.c_str());
}

TEST(ConfigLoad, EveryExperimentInTheRepositoryLoads) {
  // The shipped experiments are the first thing a user runs; a schema change
  // that breaks one must fail here, not in a Slurm job.
  int loaded = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::filesystem::path(testing::source_dir()) / "experiments")) {
    if (entry.path().extension() != ".toml") continue;
    EXPECT_NO_THROW(load_config_file(entry.path().string())) << entry.path();
    ++loaded;
  }
  EXPECT_GE(loaded, 1);
}

TEST(ConfigLoad, MissingFile) {
  try {
    load_config_file("experiments/does_not_exist.toml");
    ADD_FAILURE() << "a missing file loaded";
  } catch (const UsageError& error) {
    EXPECT_EQ(
        std::string(error.what()),
        "experiments/does_not_exist.toml: cannot open config file: No such file or directory");
  }
}

TEST(ConfigLoad, DirectoryIsNotAFile) {
  try {
    load_config_file(testing::source_dir());
    ADD_FAILURE() << "a directory loaded";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()),
              testing::source_dir() + ": config file is a directory: expected a regular file");
  }
}

// A config is read whole: what is not a regular file of at most 16 MiB is
// refused by name before a byte of it is held (/dev/zero never ends).
TEST(ConfigLoad, OnlyARegularFileOfBoundedSizeIsRead) {
  auto message = [](const std::string& path) {
    try {
      load_config_file(path);
    } catch (const UsageError& error) {
      return std::string(error.what());
    }
    return std::string("loaded");
  };
  EXPECT_EQ(message("/dev/zero"),
            "/dev/zero: config file is a character device: expected a regular file");
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("headroom_load_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo.toml").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(message(fifo),
            fifo + ": config file is a FIFO: expected a regular file");  // without blocking
  const std::filesystem::path huge = dir / "huge.toml";
  std::ofstream(huge) << "[run]\n";
  std::filesystem::resize_file(huge, (16u << 20) + 1);  // sparse
  EXPECT_EQ(message(huge.string()), huge.string() +
                                        ": config file is 16.0 MiB (16777217 B); at most 16.0 "
                                        "MiB (16777216 B) of a config file is read");
  const std::string loop = (dir / "loop.toml").string();
  std::filesystem::create_symlink("loop.toml", loop);
  EXPECT_EQ(message(loop), loop + ": cannot open config file: Too many levels of symbolic links");
  std::filesystem::remove_all(dir);
}

// --- error classes --------------------------------------------------------------

TEST(ConfigErrors, UnknownKeySuggestsTheNearest) {
  // Thirteen lines before it, as in the example of STYLE.md.
  std::string text;
  for (int i = 0; i < 12; ++i)
    text += "# line " + std::to_string(i + 1) + "\n";
  text += "[attention]\nblock_sise = 64\n";
  EXPECT_EQ(error_of(text, {}, "experiments/x.toml"),
            "experiments/x.toml:14:1: attention.block_sise: unknown key "
            "(did you mean \"attention.block_size\"?)");
  EXPECT_EQ(error_of("[run]\nstpes = 3\n"),
            "x.toml:2:1: run.stpes: unknown key (did you mean \"run.steps\"?)");
}

TEST(ConfigErrors, KeyInTheWrongSectionSuggestsItsHome) {
  EXPECT_EQ(error_of("[run]\nlr = 1e-3\n"),
            "x.toml:2:1: run.lr: unknown key (did you mean \"optimizer.lr\"?)");
  EXPECT_EQ(error_of("steps = 3\n"),
            "x.toml:1:1: steps: unknown key (did you mean \"run.steps\"?)");
}

TEST(ConfigErrors, UnknownKeyFarFromAnyHasNoSuggestion) {
  EXPECT_EQ(error_of("[run]\ncolour = \"blue\"\n"), "x.toml:2:1: run.colour: unknown key");
}

TEST(ConfigErrors, UnknownSection) {
  EXPECT_EQ(error_of("[atention]\nwindow = 3\n"),
            "x.toml:1:1: atention: unknown section (did you mean \"attention\"?)");
  EXPECT_EQ(error_of("\n[wandb]\nproject = \"x\"\n"), "x.toml:2:1: wandb: unknown section");
}

TEST(ConfigErrors, NestedTableInASectionIsAnUnknownKey) {
  EXPECT_EQ(error_of("[run.extra]\na = 1\n"), "x.toml:1:6: run.extra: unknown key");
}

TEST(ConfigErrors, SectionThatIsNotATable) {
  EXPECT_EQ(error_of("run = 5\n"), "x.toml:1:7: run: expected a table [run], got integer 5");
}

TEST(ConfigErrors, WrongType) {
  EXPECT_EQ(error_of("# steps\n[run]\nsteps = \"ten\"\n"),
            "x.toml:3:9: run.steps: expected an integer, got string \"ten\"");
  EXPECT_EQ(error_of("[run]\nsteps = 1.5\n"),
            "x.toml:2:9: run.steps: expected an integer, got float 1.5");
  EXPECT_EQ(error_of("[lora]\nenabled = 1\n"),
            "x.toml:2:11: lora.enabled: expected a boolean (true or false), got integer 1");
  EXPECT_EQ(error_of("[optimizer]\nlr = \"3e-4\"\n"),
            "x.toml:2:6: optimizer.lr: expected a float, got string \"3e-4\"");
  EXPECT_EQ(error_of("[run]\nname = 5\n"),
            "x.toml:2:8: run.name: expected a string, got integer 5");
  EXPECT_EQ(
      error_of("[run]\nbackend = [\"cpu\"]\n"),
      "x.toml:2:11: run.backend: expected \"cpu\", \"cuda\" or \"meta\", got array [\"cpu\"]");
  EXPECT_EQ(error_of("[lora]\ntargets = \"q_proj\"\n"),
            "x.toml:2:11: lora.targets: expected an array of module names, got string \"q_proj\"");
  EXPECT_EQ(error_of("[run]\nname = 2024-01-02\n"),
            "x.toml:2:8: run.name: expected a string, got date 2024-01-02");
}

TEST(ConfigErrors, OutOfRange) {
  EXPECT_EQ(error_of("\n\n\n[zero]\nstage = 5\n"),
            "x.toml:5:9: zero.stage: expected an integer in 0..3, got 5");
  EXPECT_EQ(error_of("[run]\nsteps = 0\n"),
            "x.toml:2:9: run.steps: expected an integer >= 1, got 0");
  EXPECT_EQ(error_of("[attention]\nblock_size = -64\n"),
            "x.toml:2:14: attention.block_size: expected an integer in 1..128, got -64");
  EXPECT_EQ(error_of("[loss]\nchunk_size = -1\n"),
            "x.toml:2:14: loss.chunk_size: expected an integer in 0..2147483647, got -1");
  EXPECT_EQ(error_of("[optimizer]\nlr = 0\n"),
            "x.toml:2:6: optimizer.lr: expected a float > 0, got 0");
  EXPECT_EQ(error_of("[optimizer]\nlr = -1e-3\n"),
            "x.toml:2:6: optimizer.lr: expected a float > 0, got -0.001");
  EXPECT_EQ(error_of("[optimizer]\nlr = inf\n"),
            "x.toml:2:6: optimizer.lr: expected a float > 0, got inf");
  EXPECT_EQ(
      error_of("[optimizer]\nbetas = [0.9, 1.0]\n"),
      "x.toml:2:9: optimizer.betas: expected an array of two floats in [0, 1), got [0.9, 1.0]");
  EXPECT_EQ(error_of("[optimizer]\nbetas = [0.9]\n"),
            "x.toml:2:9: optimizer.betas: expected an array of two floats in [0, 1), got [0.9]");
  EXPECT_EQ(error_of("[lora]\ndropout = 1\n"),
            "x.toml:2:11: lora.dropout: expected a float in [0, 1), got 1");
  // Beyond int64: TOML itself refuses it.
  EXPECT_EQ(error_of("[run]\nsteps = 99999999999999999999\n").substr(0, 40),
            "x.toml:2:29: TOML syntax error: Error wh");
  // An int key whose field is `int` is capped by the field's range, not wrapped.
  EXPECT_EQ(error_of("[zero]\nprefetch = 4294967296\n"),
            "x.toml:2:12: zero.prefetch: expected an integer in 0..2147483647, got 4294967296");
}

TEST(ConfigErrors, BadChoiceSuggestsTheNearest) {
  EXPECT_EQ(error_of("[attention]\nbackend = \"blocksparse\"\n"),
            "x.toml:2:11: attention.backend: expected \"block_sparse\" or \"dense_additive\", got "
            "\"blocksparse\" (did you mean \"block_sparse\"?)");
  EXPECT_EQ(error_of("[loss]\nmode = \"checkpoint\"\n"),
            "x.toml:2:8: loss.mode: expected \"save\" or \"recompute\", got \"checkpoint\"");
}

TEST(ConfigErrors, ByteSizesPastAPebibyteAreRefusedNotWrapped) {
  // 10000000.5TB once became 2^63 bytes through llround's overflow.
  EXPECT_EQ(error_of("[memory]\ndevice_capacity = \"10000000.5TB\"\n"),
            "x.toml:2:19: memory.device_capacity: expected a byte size like \"80GiB\", \"1.5GB\" "
            "or an integer, at most 1 PiB, got \"10000000.5TB\"");
  EXPECT_EQ(error_of("[memory]\ndevice_capacity = \"20000000.5TB\"\n"),
            "x.toml:2:19: memory.device_capacity: expected a byte size like \"80GiB\", \"1.5GB\" "
            "or an integer, at most 1 PiB, got \"20000000.5TB\"");
  EXPECT_EQ(load("[memory]\ndevice_capacity = \"1024TiB\"\n").memory.device_capacity,
            uint64_t{1} << 50);
}

TEST(ConfigErrors, BadByteSize) {
  EXPECT_EQ(error_of("\n\n\n\n\n[memory]\ndevice_capacity = \"80 gigs\"\n"),
            "x.toml:7:19: memory.device_capacity: expected a byte size like \"80GiB\", \"1.5GB\" "
            "or an integer, at most 1 PiB, got \"80 gigs\"");
  EXPECT_EQ(error_of("[memory]\ndevice_capacity = -1\n"),
            "x.toml:2:19: memory.device_capacity: expected a byte size like \"80GiB\", \"1.5GB\" "
            "or an integer, at most 1 PiB, got -1");
  EXPECT_EQ(error_of("[memory]\ndevice_capacity = 1.5\n"),
            "x.toml:2:19: memory.device_capacity: expected a byte size like \"80GiB\", \"1.5GB\" "
            "or an integer, at most 1 PiB, got float 1.5");
}

TEST(ConfigErrors, BadLoraTargets) {
  EXPECT_EQ(error_of("[lora]\ntargets = [\"q_proj\", \"qproj\"]\n"),
            "x.toml:2:11: lora.targets: expected module names from \"q_proj\", \"k_proj\", "
            "\"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\" or \"down_proj\", got \"qproj\" "
            "(did you mean \"q_proj\"?)");
  EXPECT_EQ(error_of("[lora]\ntargets = [\"q_proj\", \"q_proj\"]\n"),
            "x.toml:2:11: lora.targets: \"q_proj\" is listed twice");
}

TEST(ConfigErrors, BadRunName) {
  EXPECT_EQ(error_of("[run]\nname = \"a/b\"\n"),
            "x.toml:2:8: run.name: expected a non-empty name without '/', got \"a/b\"");
}

TEST(ConfigErrors, SyntaxErrorHasLineAndColumn) {
  EXPECT_EQ(error_of("[run]\nsteps = = 5\n"),
            "x.toml:2:9: TOML syntax error: Error while parsing value: could not determine value "
            "type");
  const std::string unclosed = error_of("[run\n");
  EXPECT_EQ(unclosed.substr(0, 31), "x.toml:1:5: TOML syntax error: ") << unclosed;
  const std::string duplicate = error_of("[run]\nsteps = 1\nsteps = 2\n");
  EXPECT_EQ(duplicate,
            "x.toml:3:9: TOML syntax error: Error while parsing key-value pair: cannot "
            "redefine existing integer 'steps'");
}

TEST(ConfigErrors, EveryProblemOfAFileIsListedInFileOrder) {
  EXPECT_EQ(error_of("[zero]\nstage = 9\n[run]\nsteps = \"x\"\nstpes = 1\n"),
            "x.toml:2:9: zero.stage: expected an integer in 0..3, got 9\n"
            "x.toml:4:9: run.steps: expected an integer, got string \"x\"\n"
            "x.toml:5:1: run.stpes: unknown key (did you mean \"run.steps\"?)");
}

// --- rules between keys ---------------------------------------------------------

TEST(ConfigRules, LoraRankWhenEnabled) {
  EXPECT_EQ(error_of("[lora]\nenabled = true\nrank = 0\n"),
            "x.toml:3:8: lora.rank: must be >= 1 when lora.enabled = true, got 0");
  // Rank 0 is harmless while LoRA is off.
  EXPECT_EQ(load("[lora]\nrank = 0\n").lora.rank, 0);
  EXPECT_EQ(error_of("[lora]\nenabled = true\ntargets = []\n"),
            "x.toml:3:11: lora.targets: must name at least one module when lora.enabled = true, "
            "got []");
}

TEST(ConfigRules, OffloadNeedsZero) {
  EXPECT_EQ(error_of("[zero]\noffload_optimizer = true\n"),
            "x.toml:2:21: zero.offload_optimizer: true requires zero.stage >= 1, got zero.stage "
            "= 0");
  EXPECT_TRUE(load("[zero]\noffload_optimizer = true\nstage = 1\n").zero.offload_optimizer);
}

TEST(ConfigRules, PaddedNeedsMicroBatchSize) {
  EXPECT_EQ(error_of("[batch]\nmode = \"padded\"\n"),
            "x.toml:2:8: batch.micro_batch_size: must be >= 1 when batch.mode = \"padded\" "
            "without batch.buckets, got 0");
  // With buckets the rows follow from the budget; micro_batch_size only caps them.
  EXPECT_EQ(load("[batch]\nmode = \"padded\"\nbuckets = [64, 128]\n").batch.micro_batch_size, 0);
  EXPECT_TRUE(load("[batch]\nmode = \"padded\"\nbuckets = \"auto\"\n").batch.auto_buckets);
}

TEST(ConfigRules, GlobalMicroBatchesReplaceThePerRankAccumulation) {
  EXPECT_EQ(error_of("[batch]\nglobal_micro_batches = 8\ngrad_accum = 2\n"),
            "x.toml:3:14: batch.global_micro_batches: 8 sets the micro-batches of a step over all "
            "ranks, and batch.grad_accum = 2 sets them per rank; set one of them (batch.grad_accum "
            "= 1 or batch.global_micro_batches = 0)");
  EXPECT_EQ(load("[batch]\nglobal_micro_batches = 8\n").batch.global_micro_batches, 8);
  EXPECT_EQ(load("[batch]\nglobal_micro_batches = 8\ngrad_accum = 1\n").batch.grad_accum, 1);
}

TEST(ConfigLoad, BucketsAreAutoOrIncreasingTokenCounts) {
  ExperimentConfig c = load("[batch]\nmode = \"padded\"\nbuckets = [512, 1024, 4096]\n");
  EXPECT_EQ(c.batch.buckets, (std::vector<int64_t>{512, 1024, 4096}));
  EXPECT_FALSE(c.batch.auto_buckets);
  EXPECT_EQ(c.batch.pad_to, BatchSection::PadTo::kBucket) << "static shapes by default";
  c = load("[batch]\nmode = \"padded\"\nbuckets = \"auto\"\npad_to = \"longest\"\n");
  EXPECT_TRUE(c.batch.auto_buckets);
  EXPECT_TRUE(c.batch.buckets.empty());
  EXPECT_EQ(c.batch.pad_to, BatchSection::PadTo::kLongest);
  // The last spelling wins: an override replaces "auto" by a list and back.
  c = load("[batch]\nmode = \"padded\"\nbuckets = \"auto\"\n", {"batch.buckets=[8]"});
  EXPECT_FALSE(c.batch.auto_buckets);
  EXPECT_EQ(c.batch.buckets, (std::vector<int64_t>{8}));
  EXPECT_EQ(load("", {"batch.buckets=[]"}), ExperimentConfig{}) << "[] = no buckets";
}

TEST(ConfigErrors, BadBuckets) {
  const std::string expected =
      "batch.buckets: expected \"auto\" or an array of increasing token counts in 1..2147483647, "
      "got ";
  EXPECT_EQ(error_of("[batch]\nmode = \"padded\"\nbuckets = [512, 256]\n"),
            "x.toml:3:11: " + expected + "[512, 256] (256 after 512 does not increase)");
  EXPECT_EQ(error_of("[batch]\nmode = \"padded\"\nbuckets = [64, 64]\n"),
            "x.toml:3:11: " + expected + "[64, 64] (64 after 64 does not increase)");
  EXPECT_EQ(error_of("[batch]\nbuckets = [0, 8]\n"), "x.toml:2:11: " + expected + "0 in it");
  EXPECT_EQ(error_of("[batch]\nbuckets = [2147483648]\n"),
            "x.toml:2:11: " + expected + "2147483648 in it");
  EXPECT_EQ(error_of("[batch]\nbuckets = [8, 1.5]\n"),
            "x.toml:2:11: " + expected + "float 1.5 in it");
  EXPECT_EQ(error_of("[batch]\nbuckets = \"quantiles\"\n"),
            "x.toml:2:11: " + expected + "\"quantiles\"");
  EXPECT_EQ(error_of("[batch]\nbuckets = 512\n"), "x.toml:2:11: " + expected + "integer 512");
  EXPECT_EQ(error_of("[batch]\npad_to = \"longst\"\n"),
            "x.toml:2:10: batch.pad_to: expected \"bucket\" or \"longest\", got \"longst\" (did "
            "you mean \"longest\"?)");
}

TEST(ConfigRules, BucketsArePaddedAndNotWithSeqLen) {
  EXPECT_EQ(error_of("[batch]\nbuckets = [64, 128]\n"),
            "x.toml:2:11: batch.buckets: buckets padded micro-batches, but batch.mode = "
            "\"packed\"; set batch.mode = \"padded\", or batch.buckets = []");
  EXPECT_EQ(error_of("[batch]\nmode = \"padded\"\nbuckets = \"auto\"\nseq_len = 512\n"),
            "x.toml:4:11: batch.buckets: pads rows to their bucket, but batch.seq_len = 512 pads "
            "every row to one length; set one of them (batch.seq_len = 0 or batch.buckets = [])");
}

TEST(ConfigRules, PadToMultipleOfPadsBinsAndRows) {
  EXPECT_EQ(load("[batch]\nmode = \"padded\"\nmicro_batch_size = 2\npad_to_multiple_of = 64\n")
                .batch.pad_to_multiple_of,
            64);
  EXPECT_EQ(error_of("[batch]\npad_to_multiple_of = -8\n"),
            "x.toml:2:22: batch.pad_to_multiple_of: expected an integer in 0..2147483647, got -8");
  EXPECT_EQ(load("[batch]\npad_to_multiple_of = 64\n").batch.pad_to_multiple_of, 64);
  // Rows of seq_len rounded up must still fit int32 offsets.
  EXPECT_EQ(error_of("[batch]\nmode = \"padded\"\nmicro_batch_size = 2\nseq_len = 1073741800\n"
                     "pad_to_multiple_of = 64\n"),
            "x.toml:4:11: batch.seq_len: 1073741800 (padded to 1073741824) with "
            "batch.micro_batch_size = 2 makes 2147483648 tokens per micro-batch, more than "
            "2147483647");
}

TEST(ConfigRules, SlidingWindowNeedsWindow) {
  EXPECT_EQ(error_of("[attention]\nmask = \"sliding_window\"\nwindow = 0\n"),
            "x.toml:3:10: attention.window: must be >= 1 when attention.mask = "
            "\"sliding_window\", got 0");
  EXPECT_EQ(load("[attention]\nmask = \"sliding_window\"\nwindow = 512\n").attention.window, 512);
  EXPECT_EQ(error_of("[attention]\nwindow = 512\n"),
            "x.toml:2:10: attention.window: 512 is a sliding window's length, but "
            "attention.mask = \"document\"; set attention.window = 0 or attention.mask = "
            "\"sliding_window\"");
}

TEST(ConfigRules, DflashBlockNeedsItsOwnBlockLength) {
  // No default: the tile size (attention.block_size) is not the mask's block.
  EXPECT_EQ(error_of("[attention]\nmask = \"dflash_block\"\n"),
            "x.toml:2:8: attention.mask_block: must be >= 1 when attention.mask = "
            "\"dflash_block\", got 0");
  EXPECT_EQ(error_of("[attention]\nmask_block = 16\n"),
            "x.toml:2:14: attention.mask_block: 16 is a dflash block's length, but "
            "attention.mask = \"document\"; set attention.mask_block = 0 or attention.mask = "
            "\"dflash_block\"");
  EXPECT_EQ(load("[attention]\nmask = \"dflash_block\"\nmask_block = 16\n").attention.mask_block,
            16);
}

TEST(ConfigRules, CausalAcrossThePackNeedsPackedBatches) {
  EXPECT_EQ(error_of("[batch]\nmode = \"padded\"\nmicro_batch_size = 2\n[attention]\nmask = "
                     "\"causal\"\n"),
            "x.toml:5:8: attention.mask: \"causal\" attends across the whole pack, but "
            "batch.mode = \"padded\" keeps one sample per row; use attention.mask = "
            "\"document\" (causal within each row)");
  EXPECT_EQ(load("[attention]\nmask = \"causal\"\n").attention.mask,
            AttentionSection::Mask::kCausal);
}

TEST(ConfigRules, DenseAdditiveWithDflashBlockIsAllowed) {
  // Seed 000's setup: the slow path is legal, it is what `plan` is for.
  const ExperimentConfig c =
      load("[attention]\nbackend = \"dense_additive\"\nmask = \"dflash_block\"\nmask_block = 16\n");
  EXPECT_EQ(c.attention.backend, AttentionSection::Backend::kDenseAdditive);
  EXPECT_EQ(c.attention.mask, AttentionSection::Mask::kDflashBlock);
}

TEST(ConfigRules, LossSaveModeWithChunksIsAllowed) {
  EXPECT_EQ(load("[loss]\nmode = \"save\"\nchunk_size = 2048\n").loss.chunk_size, 2048);
}

TEST(ConfigRules, WarmupWithinSteps) {
  EXPECT_EQ(error_of("[run]\nsteps = 10\n[schedule]\nwarmup_steps = 20\n"),
            "x.toml:4:16: schedule.warmup_steps: must be <= run.steps = 10, got 20");
  // With warmup at its default, the error points at run.steps, the edit that broke it.
  EXPECT_EQ(error_of("[run]\nsteps = 2\n"),
            "x.toml:2:9: schedule.warmup_steps: must be <= run.steps = 2, got 5");
}

TEST(ConfigRules, MinLrBelowLr) {
  EXPECT_EQ(error_of("[schedule]\nmin_lr = 1e-3\n"),
            "x.toml:2:10: schedule.min_lr: must be <= optimizer.lr = 0.0003, got 0.001");
}

TEST(ConfigRules, MasterCopyNotLessPreciseThanWeights) {
  EXPECT_EQ(error_of("[optimizer]\nmaster_dtype = \"bf16\"\n"),
            "x.toml:2:16: optimizer.master_dtype: \"bf16\" requires model.dtype = \"bf16\", got "
            "model.dtype = \"fp32\"");
  EXPECT_EQ(load("[model]\ndtype = \"bf16\"\n[optimizer]\nmaster_dtype = \"bf16\"\n")
                .optimizer.master_dtype,
            OptimizerSection::Master::kBf16);
  // fp32 weights are their own master: "none" is "fp32" for them, not a contradiction.
  EXPECT_EQ(load("[optimizer]\nmaster_dtype = \"none\"\n").optimizer.master_dtype,
            OptimizerSection::Master::kNone);
  EXPECT_EQ(error_of("[optimizer]\nmaster_dtype = \"fp16\"\n"),
            "x.toml:2:16: optimizer.master_dtype: expected \"fp32\", \"bf16\" or \"none\", got "
            "\"fp16\"");
  EXPECT_EQ(error_of("[optimizer]\nkind = \"adamw8bit\"\n"),
            "x.toml:2:8: optimizer.kind: expected \"adamw\" or \"adamw_8bit\", got "
            "\"adamw8bit\" (did you mean \"adamw_8bit\"?)");
}

TEST(ConfigRules, Nf4IsQloraOnStagesThatKeepTheBaseWhole) {
  EXPECT_EQ(error_of("[model]\nquantization = \"nf4\"\n"),
            "x.toml:2:16: model.quantization: \"nf4\" freezes the base in 4 bits and trains "
            "adapters only, but lora.enabled = false; set lora.enabled = true (QLoRA) or "
            "model.quantization = \"none\"");
  const std::string qlora = "[lora]\nenabled = true\n[model]\nquantization = \"nf4\"\n";
  EXPECT_EQ(load(qlora).model.quantization, ModelSection::Quantization::kNf4);
  EXPECT_EQ(error_of(qlora + "[zero]\nstage = 3\n"),
            "x.toml:6:9: model.quantization: \"nf4\" keeps the quantized base whole on every "
            "rank, but zero.stage = 3 shards parameters; use zero.stage <= 2 (the adapters' "
            "states are sharded from stage 1)");
  EXPECT_EQ(error_of("[model]\ndouble_quant = true\n"),
            "x.toml:2:16: model.double_quant: true quantizes NF4's absmax, but "
            "model.quantization = \"none\"; set model.quantization = \"nf4\" or "
            "model.double_quant = false");
  EXPECT_TRUE(load(qlora + "double_quant = true\n").model.double_quant);
  EXPECT_EQ(error_of("[model]\nquantization = \"int4\"\n"),
            "x.toml:2:16: model.quantization: expected \"none\" or \"nf4\", got \"int4\"");
}

TEST(ConfigRules, PresetOrHfConfig) {
  // hf_config alone means that architecture: the "tiny" default steps aside.
  const ExperimentConfig c = load("[model]\nhf_config = \"models/qwen3/config.json\"\n");
  EXPECT_EQ(c.model.preset, "");
  EXPECT_EQ(c.model.hf_config, "models/qwen3/config.json");
  EXPECT_EQ(error_of("[model]\npreset = \"qwen3-8b\"\nhf_config = \"c.json\"\n"),
            "x.toml:3:13: model.preset: \"qwen3-8b\" and model.hf_config = \"c.json\" both name "
            "the architecture; set model.preset = \"\" to use model.hf_config");
  EXPECT_EQ(error_of("[model]\npreset = \"\"\n"),
            "x.toml:2:10: model.preset: is \"\" and model.hf_config is \"\" too; one of them must "
            "name the architecture");
}

TEST(ConfigRules, AllBrokenRulesAreListed) {
  EXPECT_EQ(error_of("[zero]\noffload_optimizer = true\n[batch]\nmode = \"padded\"\n"),
            "x.toml:4:8: batch.micro_batch_size: must be >= 1 when batch.mode = \"padded\" "
            "without batch.buckets, got 0\n"
            "x.toml:2:21: zero.offload_optimizer: true requires zero.stage >= 1, got zero.stage "
            "= 0");
}

// --- memory.device -------------------------------------------------------------------

TEST(ConfigDevice, EveryPresetNameLoads) {
  for (const char* name : {"h100-80gb", "h100-94gb", "h200-141gb", "a100-40gb", "a100-80gb",
                           "a800-80gb", "rtx3090-24gb", "rtx4090-24gb", "l40s-48gb"}) {
    const ExperimentConfig c =
        load("[run]\nbackend = \"cuda\"\n[memory]\ndevice = \"" + std::string(name) + "\"\n");
    EXPECT_EQ(c.memory.device, name);
    EXPECT_EQ(c.memory.device_capacity, 0u);  // the preset supplies the capacity
  }
  EXPECT_EQ(load("[memory]\ndevice = \"\"\n").memory.device, "");
  EXPECT_EQ(load("[run]\nbackend = \"meta\"\n[memory]\ndevice = \"a800-80gb\"\n").memory.device,
            "a800-80gb");
}

TEST(ConfigDevice, UnknownNameListsThePresetsAtItsPosition) {
  const std::string presets =
      "expected \"\", \"h100-80gb\", \"h100-94gb\", \"h200-141gb\", \"a100-40gb\", \"a100-80gb\", "
      "\"a800-80gb\", \"rtx3090-24gb\", \"rtx4090-24gb\" or \"l40s-48gb\", got ";
  EXPECT_EQ(
      error_of("[run]\nbackend = \"cuda\"\n\n[memory]\ndevice = \"h100-80g\"\n"),
      "x.toml:5:10: memory.device: " + presets + "\"h100-80g\" (did you mean \"h100-80gb\"?)");
  EXPECT_EQ(error_of("[memory]\ndevice = \"tpu-v5\"\n"),
            "x.toml:2:10: memory.device: " + presets + "\"tpu-v5\"");
  // Names are exact: the spelling of the table, not nvidia-smi's.
  EXPECT_EQ(error_of("[memory]\ndevice = \"H100-80GB\"\n"),
            "x.toml:2:10: memory.device: " + presets + "\"H100-80GB\"");
  EXPECT_EQ(
      error_of("[memory]\ndevice = 80\n"),
      "x.toml:2:10: memory.device: " + presets.substr(0, presets.size() - 6) + ", got integer 80");
  EXPECT_EQ(error_of("", {"memory.device=a900"}),
            "--set memory.device=a900: memory.device: " + presets + "\"a900\"");
}

TEST(ConfigDevice, NamesAGpuSoNotForACpuRun) {
  EXPECT_EQ(error_of("[memory]\ndevice = \"h100-80gb\"\n"),
            "x.toml:2:10: memory.device: \"h100-80gb\" is a GPU, but run.backend = \"cpu\" runs "
            "on the host; set run.backend = \"cuda\" (or \"meta\" to plan), or memory.device = "
            "\"\"");
  // The override that makes the contradiction is the one named.
  EXPECT_EQ(error_of("[run]\nbackend = \"cuda\"\n[memory]\ndevice = \"h100-80gb\"\n",
                     {"run.backend=cpu"}),
            "--set run.backend=cpu: memory.device: \"h100-80gb\" is a GPU, but run.backend = "
            "\"cpu\" runs on the host; set run.backend = \"cuda\" (or \"meta\" to plan), or "
            "memory.device = \"\"");
}

TEST(ConfigDevice, DeviceCapacityIsACapBelowWhatThePresetLeaves) {
  // Both set: device_capacity still bounds the allocator, the preset bounds it.
  const ExperimentConfig c = load(
      "[run]\nbackend = \"cuda\"\n[memory]\ndevice = \"h100-80gb\"\ndevice_capacity = "
      "\"40GiB\"\n");
  EXPECT_EQ(c.memory.device, "h100-80gb");
  EXPECT_EQ(c.memory.device_capacity, 40 * kGiB);
  // 80 GiB is the spec sheet's figure, not what an H100 can give the allocator.
  EXPECT_EQ(
      error_of("[run]\nbackend = \"cuda\"\n[memory]\ndevice = \"h100-80gb\"\ndevice_capacity = "
               "\"80GiB\"\n"),
      "x.toml:5:19: memory.device_capacity: 80.0 GiB (85899345920 B) exceeds the 78.7 GiB "
      "(84491401954 B) that memory.device = \"h100-80gb\" leaves for the allocator (usable 79.1 "
      "GiB less 416.0 MiB outside it, at one rank); set memory.device_capacity = 0 to use all "
      "of it");
  // Pointing at whichever key came last.
  EXPECT_EQ(error_of("[run]\nbackend = \"cuda\"\n[memory]\ndevice_capacity = \"24GiB\"\n",
                     {"memory.device=rtx4090-24gb"})
                .substr(0, 72),
            "--set memory.device=rtx4090-24gb: memory.device_capacity: 24.0 GiB (2576");
  // device_capacity alone keeps meaning what it always did.
  EXPECT_EQ(load("[memory]\ndevice_capacity = \"80GiB\"\n").memory.device_capacity, 80 * kGiB);
}

// --- --set overrides ------------------------------------------------------------

TEST(ConfigOverrides, ValuesAreTomlOrBareStrings) {
  const ExperimentConfig c =
      load("", {"run.steps=5", "run.name=\"x\"", "run.backend=meta", "data.path=/data/train.h5",
                "memory.device_capacity=80GiB", "optimizer.betas=[0.8, 0.9]",
                "lora.targets=[\"k_proj\"]", " zero.stage = 2 ", "checkpoint.dir="});
  EXPECT_EQ(c.run.steps, 5);
  EXPECT_EQ(c.run.name, "x");
  EXPECT_EQ(c.run.backend, RunSection::Backend::kMeta);
  EXPECT_EQ(c.data.path, "/data/train.h5");
  EXPECT_EQ(c.memory.device_capacity, 80 * kGiB);
  EXPECT_EQ(c.optimizer.betas, (std::array<double, 2>{0.8, 0.9}));
  EXPECT_EQ(c.lora.targets, std::vector<std::string>{"k_proj"});
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.checkpoint.dir, "");
}

TEST(ConfigOverrides, ApplyAfterTheFileInOrder) {
  const ExperimentConfig c = load("[run]\nsteps = 100\n", {"run.steps=7", "run.steps=9"});
  EXPECT_EQ(c.run.steps, 9);
  // A value that is not one TOML value ("5\nx = 6") is taken whole as a string.
  EXPECT_EQ(load("", {"run.name=a\nb = 6"}).run.name, "a\nb = 6");
}

TEST(ConfigOverrides, CanResolveAContradictionOfTheFile) {
  EXPECT_EQ(load("[zero]\noffload_optimizer = true\n", {"zero.stage=2"}).zero.stage, 2);
}

TEST(ConfigOverrides, ContradictionPointsAtTheOverrideThatCausedIt) {
  EXPECT_EQ(error_of("[zero]\nstage = 1\noffload_optimizer = true\n", {"zero.stage=0"}),
            "--set zero.stage=0: zero.offload_optimizer: true requires zero.stage >= 1, got "
            "zero.stage = 0");
}

TEST(ConfigOverrides, HfConfigOverrideAgainstAnExplicitPreset) {
  EXPECT_EQ(load("", {"model.hf_config=c.json"}).model.preset, "");
  EXPECT_EQ(error_of("[model]\npreset = \"tiny\"\n", {"model.hf_config=c.json"}),
            "--set model.hf_config=c.json: model.preset: \"tiny\" and model.hf_config = \"c.json\" "
            "both name the architecture; set model.preset = \"\" to use model.hf_config");
}

TEST(ConfigOverrides, Errors) {
  EXPECT_EQ(error_of("", {"run.steps=ten"}),
            "--set run.steps=ten: run.steps: expected an integer, got string \"ten\"");
  EXPECT_EQ(error_of("", {"run.steps"}),
            "--set run.steps: expected section.key=value, e.g. run.steps=10");
  EXPECT_EQ(error_of("", {"=5"}), "--set =5: expected section.key=value, e.g. run.steps=10");
  EXPECT_EQ(error_of("", {"run.stpes=5"}),
            "--set run.stpes=5: run.stpes: unknown key (did you mean \"run.steps\"?)");
  EXPECT_EQ(error_of("", {"atention.window=5"}),
            "--set atention.window=5: atention.window: unknown key (did you mean "
            "\"attention.window\"?)");
  EXPECT_EQ(error_of("", {"zero.stage=4"}),
            "--set zero.stage=4: zero.stage: expected an integer in 0..3, got 4");
  EXPECT_EQ(error_of("", {"memory.device_capacity=80 gigs"}),
            "--set memory.device_capacity=80 gigs: memory.device_capacity: expected a byte size "
            "like \"80GiB\", \"1.5GB\" or an integer, at most 1 PiB, got \"80 gigs\"");
}

TEST(ConfigOverrides, AllBadOverridesAreListedInOrder) {
  EXPECT_EQ(error_of("", {"zero.stage=4", "run"}),
            "--set zero.stage=4: zero.stage: expected an integer in 0..3, got 4\n"
            "--set run: expected section.key=value, e.g. run.steps=10");
}

TEST(ConfigOverrides, FileErrorsComeFirst) {
  EXPECT_EQ(error_of("[zero]\nstage = 4\n", {"zero.stage=1"}),
            "x.toml:2:9: zero.stage: expected an integer in 0..3, got 4");
}

}  // namespace
}  // namespace headroom
