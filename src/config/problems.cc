#include "config/problems.h"

#include <algorithm>
#include <tuple>

#include "util/error.h"

namespace headroom {

void throw_config_problems(std::vector<ConfigProblem> problems, bool sort_by_position) {
  if (problems.empty()) return;
  if (sort_by_position) {
    std::stable_sort(problems.begin(), problems.end(),
                     [](const ConfigProblem& a, const ConfigProblem& b) {
                       return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                     });
  }
  std::string message;
  for (const ConfigProblem& problem : problems) {
    if (!message.empty()) message += '\n';
    message += problem.message;
  }
  throw UsageError(message);
}

}  // namespace headroom
