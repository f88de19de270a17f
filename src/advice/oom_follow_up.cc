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

}  // namespace headroom
