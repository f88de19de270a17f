// Helpers shared by the trace tests: a scratch folder, synthetic records and
// running the external readers (h5dump, h5py) a user would run.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "memory/event.h"
#include "memory/postmortem.h"
#include "test_util/temp_dir.h"
#include "trace/records.h"

namespace headroom::testing {

// A capacity OOM of the loss's logits chunk at step 1 on meta: 100 MiB asked
// with 14 MiB allocated, 64 MiB reserved of 128 MiB, an 8 MiB embedding
// the one live block. What the report tests write into a trace's /oom.
inline Postmortem sample_oom() {
  constexpr uint64_t kMiB = 1 << 20;
  Postmortem pm;
  pm.requested_bytes = 100 * kMiB;
  pm.rounded_bytes = 100 * kMiB;
  pm.segment_bytes = 100 * kMiB;
  pm.tag = "loss.chunk.7.logits";
  pm.category = Category::kLogits;
  pm.phase = Phase::kLoss;
  pm.step = 1;
  pm.allocated = 14 * kMiB;
  pm.reserved = 64 * kMiB;
  pm.capacity = 128 * kMiB;
  pm.source = "meta";
  pm.capacity_limited = true;
  pm.live_by_category[static_cast<int>(Category::kParam)] = 8 * kMiB;
  pm.largest_live.push_back(
      LiveBlock{8 * kMiB, "param.embed", Category::kParam, Phase::kInit, -1, -1});
  return pm;
}

inline TraceHeader sample_header() {
  TraceHeader h;
  h.run_name = "qwen3-8b-lora-α";  // non-ASCII survives as UTF-8
  h.rank = 3;
  h.world_size = 4;
  h.backend = "meta";
  h.device = "virtual H200";
  h.capacity_bytes = 80ull << 30;
  h.config_toml = "[run]\nname = \"qwen3-8b-lora-α\"\n\n[memory]\ndevice_capacity = \"80GiB\"\n";
  h.started_at = "2024-05-01T12:34:56Z";
  h.headroom_version = "9.8.7-test";
  return h;
}

// A deterministic, never-trivial event: every field differs with `seq`.
inline MemoryEvent make_event(uint64_t seq, int64_t step) {
  MemoryEvent e{};
  e.seq = seq;
  e.t_ns = static_cast<int64_t>(seq * 1000 + 7);
  e.step = step;
  e.action = static_cast<MemoryAction>(seq % 5);
  e.bytes = 512 * (seq + 1);
  e.address = 0x7f0000000000ull + seq * 4096;
  e.category = static_cast<Category>(seq % kNumCategories);
  e.tag_id = static_cast<uint32_t>(seq % 3);
  e.phase = static_cast<Phase>(seq % kNumPhases);
  e.layer = static_cast<int32_t>(seq % 37) - 1;
  return e;
}

inline StepRecord make_step(int64_t step) {
  StepRecord s;
  s.step = step;
  s.loss = 10.5 - 0.25 * static_cast<double>(step);
  s.grad_norm = 1.0 + 0.125 * static_cast<double>(step);
  s.lr = 3e-4 * static_cast<double>(step + 1) / 8;
  s.tokens = 4000 + step;
  s.padded_tokens = 4096 + step;
  s.micro_batches = 2 + step % 3;
  s.longest_sample = 1500 + step;
  s.peak_allocated = (40ull << 30) + static_cast<uint64_t>(step);
  s.peak_reserved = (42ull << 30) + static_cast<uint64_t>(step);
  s.step_seconds = 0.5 + static_cast<double>(step);
  s.tokens_per_second = 8000.25;
  s.skipped = step % 2 == 1;
  s.truncated_samples = step % 4;
  s.padding_fraction = 0.125 * static_cast<double>(step % 3);
  s.loss_scale = 65536.0 / static_cast<double>(1 << (step % 2));
  return s;
}

inline void expect_event_eq(const MemoryEvent& a, const MemoryEvent& b, size_t row) {
  SCOPED_TRACE("event row " + std::to_string(row));
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.t_ns, b.t_ns);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.action, b.action);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.address, b.address);
  EXPECT_EQ(a.category, b.category);
  EXPECT_EQ(a.tag_id, b.tag_id);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.layer, b.layer);
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` through the shell, capturing its output.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The system python that has h5py (the pyenv one on PATH does not).
inline constexpr const char* kPython = "/usr/bin/python3";

inline bool have_h5py() {
  return run_command(std::string(kPython) + " -c 'import h5py, numpy'").exit_code == 0;
}

inline bool have_h5dump() {
  return run_command("command -v h5dump").exit_code == 0;
}

}  // namespace headroom::testing
