// `train` computes on run.backend; `plan` makes the same allocations on the
// meta backend and computes nothing (promise 1: one code path).
#pragma once

namespace headroom {

enum class RunMode { kTrain, kPlan };

}  // namespace headroom
