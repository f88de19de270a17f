// Why a run ran out of memory, in terms of what changed rather than only
// what was live: seed 004's postmortem lists ten 368 MiB parameter blocks as
// the largest live, which is true and useless (the parameters were always
// going to be there); the 30 blocks' activations are what grew. Each finding
// is one line of text:
//  - which categories grew during the failing step (against its start);
//  - the step's longest sample against the micro-batch budget (seed 001: the
//    peak follows the 24k sample, not the 16384-token bin), re-derived from
//    the batcher, whose schedule is deterministic;
//  - the loss chunks kept for backward (loss.mode = "save");
//  - the blocks' saved activations, per block;
//  - reserved but unallocated bytes (the cache), and whether releasing it
//    would have served the request;
//  - memory outside the allocator (memory.device's lines) against the device.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "memory/postmortem.h"

namespace headroom {

struct OomExplanation {
  std::vector<std::string> findings;  // one sentence each, most telling first
};

// Explains `pm`, the postmortem of rank `rank` of `world_size` running
// `config`. Reads the dataset (for the failing step's batch) when it can;
// never throws for what it cannot read (that finding is left out).
OomExplanation explain_oom(const ExperimentConfig& config, int rank, int world_size,
                           const Postmortem& pm);

// "\nwhy it ran out:\n  - ...\n".
std::string format_explanation(const OomExplanation& explanation);

}  // namespace headroom
