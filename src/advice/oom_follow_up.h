// What follows an out-of-memory, after its postmortem is safe in the trace:
// why it ran out (advice/why.h) and what would have fitted (advice/advice.h),
// both added to the traces of the ranks that failed (/oom/advice,
// trace/oom_advice.h), where `report` reads them. The command line prints
// the texts (through `say`); these functions print nothing.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "advice/advice.h"
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

// The whole follow-up of the ranks `ooms` of `world_size` running `config`:
// each rank's explanation (the first one's text said), then, when
// `advise_too`, the advice measured against `failed` (figures_of the failed
// plan's ranks; nullptr for a training, whose baseline is planned here), its
// text said; then both stored in the failing ranks' traces and where they
// went said. Advice that cannot be had (a disk too full for its plans) is
// said and skipped, as is a trace that cannot take it: the postmortem is
// already safe. `say` is called in order, as the texts become known.
void follow_up_oom(const ExperimentConfig& config, int world_size, const std::vector<RankOom>& ooms,
                   const PlanFigures* failed, bool advise_too,
                   const std::function<void(const std::string&)>& say);

}  // namespace headroom
