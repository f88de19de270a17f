// The environment switches that turn a CPU-specific code path off on a CPU
// that has it (HEADROOM_CPU_BF16_DOT=0, HEADROOM_CPU_WIDE_FMA=0): what a CPU
// without the feature runs then becomes testable and measurable on one with
// it. docs/backend.md lists them.
#pragma once

#include <cstdlib>
#include <string_view>

namespace headroom {

// Whether `variable` is set to "0" in the environment. The callers read it
// once, into a function-local static with the CPU check, so a process never
// switches paths halfway (the bits of a run depend on the path).
inline bool cpu_path_switched_off(const char* variable) {
  const char* setting = std::getenv(variable);
  return setting != nullptr && std::string_view(setting) == "0";
}

}  // namespace headroom
