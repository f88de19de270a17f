#include "advice/oom_follow_up.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "trace/oom_advice.h"
#include "util/error.h"

namespace headroom {

std::filesystem::path advice_scratch_folder() {
  return std::filesystem::temp_directory_path() /
         ("headroom-advice-" + std::to_string(static_cast<long long>(::getpid())));
}

void store_oom_follow_up(const std::vector<RankOom>& ooms, const std::vector<OomExplanation>& whys,
                         const std::string& advice_json) {
  HR_CHECK(whys.size() == ooms.size(), "one explanation per rank that ran out of memory");
  // One JSON object per trace: the advice's keys, and "why" beside them.
  const nlohmann::json advice =
      advice_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(advice_json);
  for (size_t i = 0; i < ooms.size(); ++i) {
    nlohmann::json stored = advice;
    stored["why"] = whys[i].findings;
    write_oom_advice(ooms[i].trace.string(), stored.dump(1));
  }
}

void follow_up_oom(const ExperimentConfig& config, int world_size, const std::vector<RankOom>& ooms,
                   const PlanFigures* failed, bool advise_too,
                   const std::function<void(const std::string&)>& say) {
  std::vector<OomExplanation> whys;
  for (const RankOom& oom : ooms) {
    whys.push_back(explain_oom(config, oom.rank, world_size, oom.postmortem));
    if (&oom == &ooms.front()) say(format_explanation(whys.back()));
  }
  std::string advice_text;
  if (advise_too) {
    const std::filesystem::path scratch = advice_scratch_folder();
    try {
      // A training's own figures are one rank's: its plan has them all.
      const PlanFigures baseline = failed ? *failed : plan_with(config, world_size, {}, scratch);
      const Advice advice = advise(config, world_size, baseline, scratch);
      say(format_advice(advice));
      advice_text = advice_json(advice);
    } catch (const Error& e) {
      say("\nno advice: " + std::string(e.what()) + "\n");
    }
  }
  try {
    store_oom_follow_up(ooms, whys, advice_text);
    if (!ooms.empty())
      say("  " + std::string(advise_too ? "why and what would fit" : "why") + " written to " +
          ooms.front().trace.string() + " (/oom/advice)\n");
  } catch (const Error& e) {
    say("  could not add the advice to the trace: " + std::string(e.what()) + "\n");
  }
}

}  // namespace headroom
