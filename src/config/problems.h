// Every problem a config stage found, reported together: one edit fixes a
// file, so the user sees each mistake at once rather than one per run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headroom {

struct ConfigProblem {
  uint32_t line = 0;  // 0 when the problem has no position (a --set, a rule)
  uint32_t column = 0;
  std::string message;  // complete, position included
};

// Does nothing when `problems` is empty; else throws one UsageError whose
// message is every problem's, one per line, sorted by (line, column) when
// `sort_by_position` (a stable sort: problems at one place keep their order).
void throw_config_problems(std::vector<ConfigProblem> problems, bool sort_by_position = true);

}  // namespace headroom
