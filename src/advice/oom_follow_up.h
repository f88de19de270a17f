// What follows an out-of-memory, after its postmortem is safe in the trace:
// why it ran out (advice/why.h) and what would have fitted (advice/advice.h),
// both added to the traces of the ranks that failed (/oom/advice,
// trace/oom_advice.h), where `report` reads them. The command line prints
// the texts; these functions print nothing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "advice/why.h"
#include "memory/postmortem.h"

namespace headroom {

// One rank's out-of-memory: its rank, its (closed) trace and postmortem.
struct RankOom {
  int rank = 0;
  std::filesystem::path trace;
  Postmortem postmortem;
};

// A folder of this process's own for the advice's throwaway plans (under
// the system's temporary folder, named by the process id), which advise()
// creates and removes.
std::filesystem::path advice_scratch_folder();

// Stores in each failing rank's trace (ooms[i].trace) its explanation
// whys[i] and, unless `advice_json` is empty (no advice asked or had), the
// advice (advice_json(): the same for every rank). Throws UsageError naming
// the trace that could not be written (a full disk): the postmortem is
// already there either way.
void store_oom_follow_up(const std::vector<RankOom>& ooms, const std::vector<OomExplanation>& whys,
                         const std::string& advice_json);

}  // namespace headroom
