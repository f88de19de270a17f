// The text form of a synthetic corpus's document lengths (LengthSpec, in
// data/markov.h), as `headroom data synth --lengths` and the config key
// data.synthetic_lengths take it.
#pragma once

#include <cstdint>
#include <string>

#include "data/markov.h"

namespace headroom {

// The longest synthetic document: 2^24 tokens (64 MiB, built in memory),
// far past any context a run trains on.
inline constexpr int64_t kMaxSyntheticLength = int64_t{1} << 24;

// Parses `text` as one of
//   fixed:L   uniform:A-B   lognormal:MEDIAN,SIGMA,MIN-MAX   histogram:A-B:W,C-D:W,...
// and validates it (LengthSpec::validate, and no length past
// kMaxSyntheticLength). Otherwise throws UsageError
//   <name> "<text>": <what is wrong> (expected fixed:L, uniform:A-B, ...)
// where `name` says where the text came from ("--lengths",
// "data.synthetic_lengths =").
LengthSpec parse_length_spec(const std::string& text, const std::string& name);

}  // namespace headroom
