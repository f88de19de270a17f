#include "advice/why.h"

#include <algorithm>
#include <optional>

#include "data/batcher.h"
#include "data/token_dataset.h"
#include "train/config_options.h"
#include "util/bytes.h"
#include "util/error.h"

namespace headroom {

namespace {

std::string signed_bytes(uint64_t now, uint64_t before) {
  return now >= before ? "+" + format_bytes(now - before) : "-" + format_bytes(before - now);
}

// Which categories grew during the failing step, largest growth first.
std::string growth_finding(const Postmortem& pm) {
  if (pm.step < 0) {
    std::string out = "it ran out during initialization, before any step: ";
    bool first = true;
    for (Category c : kAllCategories) {
      const uint64_t bytes = pm.live_by_category[static_cast<int>(c)];
      if (!bytes) continue;
      out += (first ? "" : ", ") + std::string(name_of(c)) + " " + format_bytes(bytes);
      first = false;
    }
    return out + " live; what the model and optimizer hold at rest does not fit";
  }
  std::vector<std::pair<int64_t, Category>> grown;
  for (Category c : kAllCategories) {
    const int i = static_cast<int>(c);
    const int64_t delta = static_cast<int64_t>(pm.live_by_category[i]) -
                          static_cast<int64_t>(pm.step_start_by_category[i]);
    if (delta != 0) grown.push_back({delta, c});
  }
  std::sort(grown.begin(), grown.end(), [](auto& a, auto& b) { return a.first > b.first; });
  uint64_t at_start = 0;
  for (uint64_t b : pm.step_start_by_category)
    at_start += b;
  std::string out = "step " + std::to_string(pm.step) + " began with " + format_bytes(at_start) +
                    " live; by the failing request ";
  if (grown.empty()) return out + "nothing had grown (the request alone does not fit)";
  bool first = true;
  for (const auto& [delta, c] : grown) {
    const int i = static_cast<int>(c);
    out += (first ? "" : ", ") + std::string(name_of(c)) + " " +
           signed_bytes(pm.live_by_category[i], pm.step_start_by_category[i]);
    first = false;
  }
  return out;
}

// The failing step's batch on this rank (`s` is its settings) against its
// budget.
std::string batch_finding(const ExperimentConfig& config, const RunSettings& s,
                          const Postmortem& pm) {
  if (pm.step < 0) return "";
  const TokenDataset dataset = TokenDataset::open(s.data_path, 0);
  BatchOptions options = s.batch;
  options.pad_id = 0;
  Batcher batcher(dataset, options);
  std::vector<MicroBatchPlan> plans;
  for (int64_t step = 0; step <= pm.step; ++step)
    // Dealt over the data-parallel ranks (a tensor-parallel group shares its
    // micro-batches).
    plans = std::move(batcher.next_step_plan()[static_cast<size_t>(s.layout.data_rank)]);
  if (plans.empty()) return "";
  const MicroBatchPlan* widest = &plans.front();
  int64_t longest = 0, truncated = 0;
  for (const MicroBatchPlan& p : plans) {
    if (p.tokens > widest->tokens) widest = &p;
    longest = std::max(longest, p.longest);
    truncated += p.truncated;
  }
  std::string out = "step " + std::to_string(pm.step) + "'s longest sample has " +
                    std::to_string(longest) + " tokens";
  if (config.batch.mode == BatchSection::Mode::kPacked) {
    const int64_t budget = config.batch.max_tokens_per_micro_batch;
    out += " against a " + std::to_string(budget) + "-token bin";
    if (widest->tokens > budget)
      out +=
          ": a sample longer than the bin gets a bin of its own, and the peak follows its " +
          std::to_string(widest->tokens) + " tokens, not the budget" +
          (config.data.max_sample_tokens == 0 ? " (data.max_sample_tokens = 0 cuts nothing)" : "");
  } else {
    out += "; its largest micro-batch is " + std::to_string(widest->documents.size()) + " x " +
           std::to_string(widest->width) + " tokens (padded)";
  }
  if (truncated > 0) out += "; " + std::to_string(truncated) + " samples were truncated";
  return out;
}

}  // namespace

OomExplanation explain_oom(const ExperimentConfig& config, int rank, int world_size,
                           const Postmortem& pm) {
  OomExplanation e;
  e.findings.push_back(growth_finding(pm));
  // The rank's settings, read once for the batch and the device: without
  // them neither finding can be had.
  std::optional<RunSettings> settings;
  try {
    settings = run_settings_of(config, RunMode::kPlan, world_size, rank);
  } catch (const Error&) {
  }
  try {
    const std::string batch = settings ? batch_finding(config, *settings, pm) : "";
    if (!batch.empty()) e.findings.push_back(batch);
  } catch (const Error&) {
    // No dataset to re-derive the batch from: say nothing of it.
  }
  // Kept loss chunks, and saved activations per block.
  for (const LiveGroup& g : pm.live_groups) {
    if (g.pattern.starts_with("loss.chunk.*") && g.blocks > 1)
      e.findings.push_back(std::to_string(g.blocks) + " loss chunks (" + g.pattern + ") hold " +
                           format_bytes(g.bytes) + " for backward" +
                           (config.loss.mode == LossSection::Mode::kSave
                                ? " (loss.mode = \"save\" keeps every chunk's logits)"
                                : ""));
  }
  uint64_t saved = 0, blocks = 0;
  for (const LiveGroup& g : pm.live_groups)
    if (g.category == Category::kActivation && g.pattern.starts_with("block.*")) {
      saved += g.bytes;
      blocks = std::max(blocks, g.blocks);
    }
  if (saved > 0)
    e.findings.push_back("saved activations: " + format_bytes(saved) + " over " +
                         std::to_string(blocks) +
                         (blocks == 1 ? " block (about " : " blocks (about ") +
                         format_bytes(saved / std::max<uint64_t>(blocks, 1)) + " each)" +
                         (config.checkpoint.activations == 0
                              ? "; checkpoint.activations = \"none\" keeps every block's"
                              : ""));
  // The cache.
  const uint64_t cached = pm.reserved > pm.allocated ? pm.reserved - pm.allocated : 0;
  if (pm.capacity > 0 && cached > 0) {
    std::string line = format_bytes(cached) + " was reserved but not allocated (cached free " +
                       "blocks in the allocator's segments)";
    if (pm.capacity_limited && pm.capacity - pm.allocated >= pm.rounded_bytes)
      line += ": released, it would have served this " + format_bytes(pm.rounded_bytes) +
              " request, though not necessarily the rest of the run (the plan with "
              "memory.allocator = \"exact\" below says)";
    else
      line += "; even released, the request would not fit (" +
              format_bytes(pm.allocated + pm.rounded_bytes - pm.capacity) + " short)";
    e.findings.push_back(line);
  }
  // Outside the allocator.
  if (settings && settings->device) {
    const DeviceBudget& device = *settings->device;
    uint64_t outside = 0;
    std::string parts;
    for (const BudgetLine& line : device.lines) {
      outside += line.bytes;
      parts += (parts.empty() ? "" : ", ") + line.name + " " + format_bytes(line.bytes);
    }
    e.findings.push_back("outside the allocator: " + format_bytes(outside) + " of the " +
                         format_bytes(device.usable_bytes) + " usable on " +
                         std::string(device.preset->name) + " (" + parts + ")");
  }
  return e;
}

std::string format_explanation(const OomExplanation& e) {
  std::string out = "\nwhy it ran out:\n";
  for (const std::string& f : e.findings)
    out += "  - " + f + "\n";
  return out;
}

}  // namespace headroom
