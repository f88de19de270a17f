#include "advice/advice.h"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>

#include "data/token_dataset.h"
#include "train/config_options.h"
#include "train/plan_ranks.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The shape a config's step has on a rank of `world_size`: tokens as
// planned; a packed row is the bin, a padded one as wide as the plan's
// samples.
StepShape shape_of(const ExperimentConfig& c, int world_size, double tokens, double longest) {
  StepShape shape;
  shape.tokens = tokens;
  shape.micro_batches = grad_accum_of(c, std::max(1, world_size / c.parallel.tensor));
  shape.row_width = c.batch.mode == BatchSection::Mode::kPacked
                        ? static_cast<double>(c.batch.max_tokens_per_micro_batch)
                    : c.batch.seq_len > 0 ? static_cast<double>(c.batch.seq_len)
                                          : longest;
  return shape;
}

}  // namespace

PlanFigures figures_of(const ExperimentConfig& config, int world_size,
                       const std::vector<RunResult>& ranks, int first_rank) {
  PlanFigures figures;
  figures.ran = true;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RunResult& r = ranks[i];
    const int rank = first_rank + static_cast<int>(i);
    figures.peak_allocated = std::max(figures.peak_allocated, r.memory.peak_allocated);
    figures.peak_reserved = std::max(figures.peak_reserved, r.memory.peak_reserved);
    figures.capacity = r.capacity;
    if (r.oom && !figures.out_of_memory) {
      figures.out_of_memory = true;
      figures.oom_tag = r.oom->tag + " in " + std::string(name_of(r.oom->phase));
      if (r.oom->step >= 0) figures.oom_tag += ", step " + std::to_string(r.oom->step);
      if (world_size > 1) figures.oom_tag += ", rank " + std::to_string(rank);
    }
    if (i == 0) {
      const double steps = static_cast<double>(r.next_step - r.first_step);
      figures.shape = shape_of(config, world_size,
                               steps > 0 ? static_cast<double>(r.padded_tokens_sum) / steps : 0,
                               steps > 0 ? static_cast<double>(r.longest_sample_sum) / steps : 0);
      figures.shape.allocations =
          steps > 0 ? static_cast<double>(r.step_allocations_sum) / steps : 0;
    }
    if (figures.out_of_memory) break;
  }
  return figures;
}

PlanFigures plan_with(const ExperimentConfig& config, int world_size,
                      const std::vector<std::string>& overrides, const fs::path& scratch) {
  const auto start = std::chrono::steady_clock::now();
  PlanFigures figures;
  std::vector<std::string> all = overrides;
  // Throwaway folders, no event table: only the peaks are wanted.
  all.push_back("run.out_dir=" + scratch.string());
  all.push_back("trace.memory_events=false");
  try {
    const ExperimentConfig planned = load_config_string(to_toml(config), "counterfactual", all);
    figures = figures_of(
        planned, world_size,
        plan_ranks(planned, world_size,
                   PlanRanksControl{.overwrite = true, .stop_at_first_oom = true, .observer = {}}));
  } catch (const UsageError& e) {
    figures.usage_error = e.what();
  }
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  figures.seconds = seconds_since(start);
  return figures;
}

namespace {

std::vector<int64_t> document_lengths(const ExperimentConfig& c) {
  const TokenDataset dataset = TokenDataset::open(c.data.path, 0);
  std::vector<int64_t> lengths(static_cast<size_t>(dataset.num_documents()));
  for (size_t d = 0; d < lengths.size(); ++d)
    lengths[d] = dataset.document_length(static_cast<int64_t>(d));
  return lengths;
}

}  // namespace

Advice advise(const ExperimentConfig& config, int world_size, const PlanFigures& failed,
              const fs::path& scratch) {
  const auto start = std::chrono::steady_clock::now();
  Advice advice;
  advice.rates = device_rates(config);
  const ModelConfig model = run_settings_of(config, RunMode::kPlan, world_size, 0).model;
  advice.baseline = failed;

  std::vector<int64_t> lengths;
  try {
    lengths = document_lengths(config);
  } catch (const UsageError&) {
    // No dataset to read: no truncation knob.
  }
  for (const Knob& knob : knob_catalogue(config, world_size, lengths)) {
    Counterfactual cf;
    cf.knob = knob;
    cf.plan = plan_with(config, world_size, knob.overrides, scratch);
    if (!cf.plan.ran) {
      advice.refused.push_back(std::move(cf));
      continue;
    }
    const ExperimentConfig changed =
        load_config_string(to_toml(config), "counterfactual", knob.overrides);
    cf.cost = step_cost(changed, model, world_size, cf.plan.shape);
    cf.step_seconds = seconds_of(cf.cost, advice.rates);
    // The baseline over the same tokens: its own split and row width. The
    // same tokens per step, that is: a rank of a tensor-parallel group
    // computes its group's micro-batches, so a rank of groups twice as large
    // sees twice the baseline rank's tokens.
    const double base_tokens = cf.plan.shape.tokens * config.parallel.tensor /
                               static_cast<double>(changed.parallel.tensor);
    const StepShape base_shape =
        shape_of(config, world_size, base_tokens,
                 config.batch.mode == BatchSection::Mode::kPacked ? 0 : cf.plan.shape.row_width);
    StepShape own = base_shape;
    own.allocations = cf.plan.shape.allocations;
    cf.base_cost = step_cost(config, model, world_size, own);
    const double base = seconds_of(cf.base_cost, advice.rates);
    cf.extra_fraction = base > 0 ? cf.step_seconds / base - 1 : 0;
    (cf.plan.fits() ? advice.fits : advice.not_fitting).push_back(std::move(cf));
  }
  std::stable_sort(advice.fits.begin(), advice.fits.end(),
                   [](const Counterfactual& a, const Counterfactual& b) {
                     if (a.knob.effect != b.knob.effect) return a.knob.effect < b.knob.effect;
                     return a.extra_fraction < b.extra_fraction;
                   });
  std::stable_sort(advice.not_fitting.begin(), advice.not_fitting.end(),
                   [](const Counterfactual& a, const Counterfactual& b) {
                     return a.plan.peak_reserved < b.plan.peak_reserved;
                   });
  // Nothing fits alone: the two same-training changes that came closest, together.
  if (advice.fits.empty()) {
    std::vector<const Counterfactual*> same;
    for (const Counterfactual& cf : advice.not_fitting)
      if (cf.knob.effect == KnobEffect::kSameTraining) same.push_back(&cf);
    // The closest, and the next closest that sets none of its keys.
    auto key_of = [](const std::string& o) { return o.substr(0, o.find('=')); };
    const Counterfactual* second = nullptr;
    for (size_t i = 1; i < same.size() && !second; ++i) {
      bool disjoint = true;
      for (const std::string& a : same[0]->knob.overrides)
        for (const std::string& b : same[i]->knob.overrides)
          disjoint &= key_of(a) != key_of(b);
      if (disjoint) second = same[i];
    }
    if (second) {
      Counterfactual both;
      both.knob.what = same[0]->knob.what + ", and " + second->knob.what;
      both.knob.overrides = same[0]->knob.overrides;
      both.knob.overrides.insert(both.knob.overrides.end(), second->knob.overrides.begin(),
                                 second->knob.overrides.end());
      both.knob.effect = KnobEffect::kSameTraining;
      both.plan = plan_with(config, world_size, both.knob.overrides, scratch);
      if (both.plan.ran) {
        const ExperimentConfig changed =
            load_config_string(to_toml(config), "counterfactual", both.knob.overrides);
        both.cost = step_cost(changed, model, world_size, both.plan.shape);
        both.step_seconds = seconds_of(both.cost, advice.rates);
        StepShape own =
            shape_of(config, world_size, both.plan.shape.tokens, both.plan.shape.row_width);
        own.allocations = both.plan.shape.allocations;
        both.base_cost = step_cost(config, model, world_size, own);
        const double base = seconds_of(both.base_cost, advice.rates);
        both.extra_fraction = base > 0 ? both.step_seconds / base - 1 : 0;
        advice.combined = std::move(both);
      }
    }
  }
  advice.seconds = seconds_since(start);
  return advice;
}

namespace {

// An override as a shell word: quoted when the shell would split or expand it.
std::string shell_word(const std::string& override_text) {
  if (override_text.find_first_of(" \"'[]*?$&;|<>(){}") == std::string::npos) return override_text;
  return "'" + override_text + "'";
}

std::string set_flags(const std::vector<std::string>& overrides) {
  std::string out;
  for (const std::string& o : overrides)
    out += (out.empty() ? "" : " ") + std::string("--set ") + shell_word(o);
  return out;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f%%", 100.0 * fraction);
  return buf;
}

// "+31% (recompute 1.2 PFLOP, comm +2.1 GB)": what the change adds per step.
std::string cost_text(const Counterfactual& cf) {
  std::string out = percent(cf.extra_fraction);
  std::vector<std::string> parts;
  char buf[64];
  const double recompute = cf.cost.recompute_flops - cf.base_cost.recompute_flops;
  if (recompute > 0) {
    if (recompute >= 1e12)
      std::snprintf(buf, sizeof buf, "recompute +%.1f TFLOP", recompute / 1e12);
    else
      std::snprintf(buf, sizeof buf, "recompute +%.1f GFLOP", recompute / 1e9);
    parts.push_back(buf);
  }
  const double comm = cf.cost.comm_bytes - cf.base_cost.comm_bytes;
  if (std::abs(comm) > 1e6) {
    std::snprintf(buf, sizeof buf, "comm %+.1f GB", comm / 1e9);
    parts.push_back(buf);
  }
  const double host = cf.cost.host_bytes - cf.base_cost.host_bytes;
  if (host > 1e6) {
    std::snprintf(buf, sizeof buf, "PCIe +%.1f GB", host / 1e9);
    parts.push_back(buf);
  }
  const double calls = cf.cost.segment_calls - cf.base_cost.segment_calls;
  if (calls > 0) {
    std::snprintf(buf, sizeof buf, "%.0f segment calls", calls);
    parts.push_back(buf);
  }
  if (!parts.empty()) {
    out += " (";
    for (size_t i = 0; i < parts.size(); ++i)
      out += (i ? ", " : "") + parts[i];
    out += ")";
  }
  return out;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s + " ";
}

}  // namespace

std::string format_advice(const Advice& a) {
  const size_t planned = a.fits.size() + a.not_fitting.size();
  std::string out = "\nwhat would fit: " + std::to_string(a.fits.size()) + " of " +
                    std::to_string(planned) + " single changes, each re-planned (" +
                    std::to_string(a.fits.size() + a.not_fitting.size() + a.refused.size() + 1) +
                    " plans in ";
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f s", a.seconds);
  out += std::string(secs) + ")\n";
  const Counterfactual* first = !a.fits.empty()                         ? &a.fits.front()
                                : a.combined && a.combined->plan.fits() ? &*a.combined
                                                                        : nullptr;
  if (first)
    out += "  cheapest that fits: " + set_flags(first->knob.overrides) + "\n";
  else
    out += "  no single change from the catalogue fits; see the peaks below\n";
  size_t width = 8;
  for (const auto* list : {&a.fits, &a.not_fitting})
    for (const Counterfactual& cf : *list)
      width = std::max(width, set_flags(cf.knob.overrides).size());
  width = std::min<size_t>(width, 64);
  if (!a.fits.empty()) {
    out += "\n  " + pad("fits", width) + pad("peak reserved", 14) + pad("room", 10) +
           pad("step time", 30) + "effect\n";
    for (const Counterfactual& cf : a.fits) {
      const uint64_t room =
          cf.plan.capacity > cf.plan.peak_reserved ? cf.plan.capacity - cf.plan.peak_reserved : 0;
      out += "  " + pad(set_flags(cf.knob.overrides), width) +
             pad(format_bytes(cf.plan.peak_reserved), 14) + pad(format_bytes(room), 10) +
             pad(cost_text(cf), 30) + std::string(name_of(cf.knob.effect)) +
             (cf.knob.note.empty() ? "" : ": " + cf.knob.note) + "\n";
    }
  }
  if (a.combined) {
    const Counterfactual& cf = *a.combined;
    out += "\n  combined: " + set_flags(cf.knob.overrides) + ": peak reserved " +
           format_bytes(cf.plan.peak_reserved) +
           (cf.plan.fits() ? ", fits, step time " + cost_text(cf)
                           : ", still out of memory (" + cf.plan.oom_tag + ")") +
           "\n";
  }
  if (!a.not_fitting.empty()) {
    out += "\n  " + pad("still out of memory", width) + "at\n";
    for (const Counterfactual& cf : a.not_fitting)
      out += "  " + pad(set_flags(cf.knob.overrides), width) + cf.plan.oom_tag + "\n";
  }
  for (const Counterfactual& cf : a.refused)
    out += "  not applicable: " + set_flags(cf.knob.overrides) + ": " + cf.plan.usage_error + "\n";
  out += "  step time: FLOPs and bytes per step at " + a.rates.source +
         "; tiers first (same training, same global batch, changes the training), then cost\n";
  return out;
}

namespace {

nlohmann::json counterfactual_json(const Counterfactual& cf) {
  nlohmann::json j;
  j["what"] = cf.knob.what;
  j["set"] = cf.knob.overrides;
  j["effect"] = std::string(name_of(cf.knob.effect));
  j["note"] = cf.knob.note;
  j["fits"] = cf.plan.fits();
  j["peak_allocated"] = cf.plan.peak_allocated;
  j["peak_reserved"] = cf.plan.peak_reserved;
  j["capacity"] = cf.plan.capacity;
  if (cf.plan.out_of_memory) j["out_of_memory_at"] = cf.plan.oom_tag;
  if (!cf.plan.usage_error.empty()) j["refused"] = cf.plan.usage_error;
  j["step_flops"] = cf.cost.flops;
  j["recompute_flops"] = cf.cost.recompute_flops;
  j["comm_bytes"] = cf.cost.comm_bytes;
  j["host_bytes"] = cf.cost.host_bytes;
  j["segment_calls"] = cf.cost.segment_calls;
  j["baseline_step_flops"] = cf.base_cost.flops;
  j["extra_step_time"] = cf.extra_fraction;
  return j;
}

}  // namespace

std::string advice_json(const Advice& a) {
  nlohmann::json j;
  j["rates"] = a.rates.source;
  j["baseline"] = {{"peak_allocated", a.baseline.peak_allocated},
                   {"peak_reserved", a.baseline.peak_reserved},
                   {"capacity", a.baseline.capacity}};
  j["fits"] = nlohmann::json::array();
  for (const Counterfactual& cf : a.fits)
    j["fits"].push_back(counterfactual_json(cf));
  j["not_fitting"] = nlohmann::json::array();
  for (const Counterfactual& cf : a.not_fitting)
    j["not_fitting"].push_back(counterfactual_json(cf));
  j["refused"] = nlohmann::json::array();
  for (const Counterfactual& cf : a.refused)
    j["refused"].push_back(counterfactual_json(cf));
  if (a.combined) j["combined"] = counterfactual_json(*a.combined);
  j["seconds"] = a.seconds;
  return j.dump(1);
}

}  // namespace headroom
