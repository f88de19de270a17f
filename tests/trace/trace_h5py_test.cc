// What a user sees in h5py: enum names (not bare integers) for action,
// category and phase, numpy bool for `skipped`, str attributes, and the
// table layout docs/trace.md promises. Skipped where /usr/bin/python3 lacks h5py.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "trace/writer.h"
#include "trace_test_util.h"

namespace headroom {
namespace {

using testing::kPython;
using testing::TempDir;

std::string python_dict(bool categories) {
  std::string out = "{";
  if (categories) {
    for (Category c : kAllCategories)
      out += "'" + std::string(name_of(c)) + "': " + std::to_string(static_cast<int>(c)) + ", ";
  } else {
    for (Phase p : kAllPhases)
      out += "'" + std::string(name_of(p)) + "': " + std::to_string(static_cast<int>(p)) + ", ";
  }
  return out + "}";
}

constexpr const char* kScript = R"PY(
import sys, h5py, numpy as np
path, categories, phases = sys.argv[1], eval(sys.argv[2]), eval(sys.argv[3])
f = h5py.File(path, "r")

assert f.attrs["schema_version"] == 1
assert isinstance(f.attrs["run_name"], str), type(f.attrs["run_name"])
assert f.attrs["run_name"] == "qwen3-8b-lora-\u03b1"
assert int(f.attrs["capacity_bytes"]) == 80 * 2**30
assert f.attrs["config_toml"].startswith("[run]")

steps = f["steps"][:]
assert steps.dtype.names == ("step", "loss", "grad_norm", "lr", "tokens", "padded_tokens",
    "micro_batches", "longest_sample", "peak_allocated", "peak_reserved", "step_seconds",
    "tokens_per_second", "skipped", "truncated_samples", "padding_fraction", "loss_scale"), \
    steps.dtype.names
assert steps.dtype["skipped"] == np.bool_, steps.dtype["skipped"]
assert steps["step"].tolist() == [0, 1, 2]
assert steps["skipped"].tolist() == [False, True, False]
assert steps["loss_scale"].tolist() == [65536.0, 32768.0, 65536.0], steps["loss_scale"]

events = f["memory/events"]
assert events.dtype.names == ("seq", "t_ns", "step", "action", "bytes", "address", "category",
    "tag_id", "phase", "layer"), events.dtype.names
assert h5py.check_enum_dtype(events.dtype["action"]) == {
    "alloc": 0, "free": 1, "segment_alloc": 2, "segment_free": 3, "oom": 4}
assert h5py.check_enum_dtype(events.dtype["category"]) == categories
assert h5py.check_enum_dtype(events.dtype["phase"]) == phases
assert events.chunks == (16384,), events.chunks
assert events.attrs["recorded"] == True
ev = events[:]
assert len(ev) == 30
tags = f["memory/tags"].asstr()[:]
assert list(tags) == ["embed", "block.0.attn.out", "loss.chunk.0.logits"], list(tags)
names = {v: k for k, v in h5py.check_enum_dtype(events.dtype["category"]).items()}
assert names[int(ev["category"][5])] == "logits"
assert tags[ev["tag_id"][5]] == "loss.chunk.0.logits"

peaks = f["memory/phase_peaks"][:]
assert h5py.check_enum_dtype(peaks.dtype["phase"]) == phases
assert len(peaks) == 3

oom = f["oom"]
assert oom.attrs["category"] == "logits" and oom.attrs["phase"] == "loss"
assert oom.attrs["tag"] == "loss.chunk.7.logits"
assert int(oom.attrs["requested_bytes"]) == 1017118720
assert oom.attrs["capacity_limited"] == True
top = oom["top_blocks"][:]
assert top["tag"][0].decode() == "optim.exp_avg.block.3"
assert h5py.check_enum_dtype(oom["top_blocks"].dtype["category"]) == categories
live = oom["live_by_category"][:]
assert len(live) == len(categories)
print("ok")
)PY";

TEST(TraceH5py, NamesTypesAndLayout) {
  if (!testing::have_h5py()) GTEST_SKIP() << kPython << " has no h5py";
  TempDir dir;
  const std::string path = dir.file("t.h5");
  {
    TraceWriter writer(path, testing::sample_header(), true);
    for (int64_t step = 0; step < 3; ++step) {
      for (uint64_t i = 0; i < 10; ++i) {
        MemoryEvent e = testing::make_event(static_cast<uint64_t>(step) * 10 + i, step);
        if (i == 5) {
          e.category = Category::kLogits;
          e.tag_id = 2;
        }
        writer.on_memory_event(e);
      }
      writer.append_step(testing::make_step(step), {{step, Phase::kLoss, 5, 6}});
    }
    writer.flush({"embed", "block.0.attn.out", "loss.chunk.0.logits"});
    Postmortem pm;
    pm.requested_bytes = 1017118720;
    pm.tag = "loss.chunk.7.logits";
    pm.category = Category::kLogits;
    pm.phase = Phase::kLoss;
    pm.capacity_limited = true;
    pm.largest_live = {
        {4'000'000'000, "optim.exp_avg.block.3", Category::kOptim, Phase::kInit, -1, -1}};
    writer.write_oom(pm);
  }
  const std::string script = dir.file("check.py");
  std::ofstream(script) << kScript;
  testing::CommandResult py =
      testing::run_command(std::string(kPython) + " '" + script + "' '" + path + "' \"" +
                           python_dict(true) + "\" \"" + python_dict(false) + "\"");
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_EQ(py.output, "ok\n");
}

}  // namespace
}  // namespace headroom
