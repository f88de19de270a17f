#include "advice/fit.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "train/config_options.h"
#include "util/bytes.h"
#include "util/error.h"

namespace headroom {

const std::vector<std::string>& fit_keys() {
  static const std::vector<std::string> keys = {"batch.max_tokens_per_micro_batch",
                                                "batch.micro_batch_size", "data.max_sample_tokens",
                                                "lora.rank"};
  return keys;
}

namespace {

int64_t current_value(const ExperimentConfig& c, const std::string& key) {
  if (key == "batch.max_tokens_per_micro_batch") return c.batch.max_tokens_per_micro_batch;
  if (key == "batch.micro_batch_size") return c.batch.micro_batch_size;
  if (key == "data.max_sample_tokens") return c.data.max_sample_tokens;
  if (key == "lora.rank") return c.lora.rank;
  return 0;
}

}  // namespace

FitResult fit_one(const ExperimentConfig& config, int world_size, const std::string& key,
                  int64_t upper, const std::filesystem::path& scratch) {
  const std::vector<std::string>& keys = fit_keys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    std::string list;
    for (const std::string& k : keys)
      list += (list.empty() ? "" : ", ") + k;
    throw UsageError("--vary " + key + ": expected one of " + list);
  }
  if (upper < 1) throw UsageError("--max " + std::to_string(upper) + ": expected >= 1");
  const auto start = std::chrono::steady_clock::now();
  FitResult result;
  result.key = key;
  auto fits = [&](int64_t value) {
    for (const FitProbe& p : result.probes)
      if (p.value == value) return p.plan.fits();
    FitProbe probe{value,
                   plan_with(config, world_size, {key + "=" + std::to_string(value)}, scratch)};
    result.probes.push_back(probe);
    return probe.plan.fits();
  };
  // A bracket lo (fits, or 0) < hi (fails, or upper + 1), then bisection.
  int64_t lo = 0, hi = upper + 1;
  int64_t v = std::clamp<int64_t>(current_value(config, key), 1, upper);
  if (fits(v)) {
    lo = v;
    while (lo < upper) {
      const int64_t next = std::min(upper, lo * 2);
      if (!fits(next)) {
        hi = next;
        break;
      }
      lo = next;
    }
  } else {
    hi = v;
    while (hi > 1) {
      const int64_t next = hi / 2;
      if (fits(next)) {
        lo = next;
        break;
      }
      hi = next;
    }
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  result.largest_fitting = lo;
  result.smallest_failing = hi <= upper ? hi : 0;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string format_fit(const FitResult& r) {
  std::string out = "fit " + r.key + ": " + std::to_string(r.probes.size()) + " plans";
  char secs[32];
  std::snprintf(secs, sizeof secs, " in %.2f s\n", r.seconds);
  out += secs;
  std::vector<FitProbe> probes = r.probes;
  std::sort(probes.begin(), probes.end(),
            [](const FitProbe& a, const FitProbe& b) { return a.value < b.value; });
  out += "  value       fits  peak reserved  room / out of memory at\n";
  for (const FitProbe& p : probes) {
    char value[32];
    std::snprintf(value, sizeof value, "  %-10lld  ", static_cast<long long>(p.value));
    std::string line = value;
    if (!p.plan.ran) {
      out += line + "no    refused: " + p.plan.usage_error + "\n";
      continue;
    }
    line += p.plan.fits() ? "yes   " : "NO    ";
    char peak[32];
    std::snprintf(peak, sizeof peak, "%-13s  ", format_bytes(p.plan.peak_reserved).c_str());
    line += peak;
    if (p.plan.fits())
      line += p.plan.capacity ? format_bytes(p.plan.capacity - p.plan.peak_reserved) + " to spare"
                              : "no capacity set";
    else
      line += p.plan.oom_tag;
    out += line + "\n";
  }
  if (r.largest_fitting == 0)
    out += "nothing fits: not even " + r.key + " = 1\n";
  else {
    out += "largest that fits: --set " + r.key + "=" + std::to_string(r.largest_fitting);
    if (r.smallest_failing > 0)
      out += " (" + std::to_string(r.smallest_failing) + " does not)";
    else
      out += " (the bound; pass --max to search higher)";
    out += "\n";
  }
  return out;
}

SearchResult fit_search(const ExperimentConfig& config, int world_size,
                        const std::filesystem::path& scratch) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::vector<std::string>> checkpointing = {{"checkpoint.activations=none"},
                                                               {"checkpoint.activations=every_2"},
                                                               {"checkpoint.activations=full"}};
  const std::vector<std::vector<std::string>> loss = {
      {"loss.chunk_size=0"}, {"loss.chunk_size=1024", "loss.mode=recompute"}};
  std::vector<std::vector<std::string>> stages;
  for (int stage = config.zero.stage; stage <= (world_size > 1 ? 3 : config.zero.stage); ++stage)
    stages.push_back({"zero.stage=" + std::to_string(stage)});
  const std::vector<std::vector<std::string>> offload = {{"zero.offload_optimizer=false"},
                                                         {"zero.offload_optimizer=true"}};
  const ModelConfig model = run_settings_of(config, RunMode::kPlan, world_size, 0).model;
  const DeviceRates rates = device_rates(config);
  SearchResult result;
  result.rates = rates.source;
  for (const auto& a : checkpointing)
    for (const auto& b : loss)
      for (const auto& c : stages)
        for (const auto& d : offload) {
          SearchPoint point;
          // Offload shards the optimizer: stage 0 becomes 1 (the same at one rank).
          const bool offloading = d.front() == "zero.offload_optimizer=true";
          const std::vector<std::string> stage = offloading && c.front() == "zero.stage=0"
                                                     ? std::vector<std::string>{"zero.stage=1"}
                                                     : c;
          for (const auto* part : {&a, &b, &stage, &d})
            point.overrides.insert(point.overrides.end(), part->begin(), part->end());
          if (std::any_of(result.points.begin(), result.points.end(),
                          [&](const SearchPoint& q) { return q.overrides == point.overrides; }))
            continue;
          point.plan = plan_with(config, world_size, point.overrides, scratch);
          if (point.plan.ran) {
            const ExperimentConfig changed =
                load_config_string(to_toml(config), "search", point.overrides);
            point.step_seconds =
                seconds_of(step_cost(changed, model, world_size, point.plan.shape), rates);
          }
          result.points.push_back(std::move(point));
        }
  for (SearchPoint& p : result.points) {
    if (!p.plan.fits()) continue;
    p.pareto = std::none_of(result.points.begin(), result.points.end(), [&](const SearchPoint& q) {
      return &q != &p && q.plan.fits() && q.plan.peak_reserved <= p.plan.peak_reserved &&
             q.step_seconds <= p.step_seconds &&
             (q.plan.peak_reserved < p.plan.peak_reserved || q.step_seconds < p.step_seconds);
    });
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string format_search(const SearchResult& r) {
  size_t fitting = 0;
  for (const SearchPoint& p : r.points)
    fitting += p.plan.fits();
  char head[128];
  std::snprintf(head, sizeof head, "fit --search: %zu of %zu combinations fit (%.2f s)\n", fitting,
                r.points.size(), r.seconds);
  std::string out = head;
  out += "  the Pareto front of peak reserved against step time (" + r.rates + "):\n";
  std::vector<const SearchPoint*> front;
  for (const SearchPoint& p : r.points)
    if (p.pareto) front.push_back(&p);
  std::sort(front.begin(), front.end(), [](const SearchPoint* a, const SearchPoint* b) {
    return a->step_seconds < b->step_seconds;
  });
  if (front.empty()) out += "  (none fits)\n";
  for (const SearchPoint* p : front) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-13s  %8.3f s/step  ",
                  format_bytes(p->plan.peak_reserved).c_str(), p->step_seconds);
    std::string sets;
    for (const std::string& o : p->overrides)
      sets += (sets.empty() ? "" : " ") + ("--set " + o);
    out += line + sets + "\n";
  }
  return out;
}

}  // namespace headroom
