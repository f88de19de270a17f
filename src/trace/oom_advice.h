// /oom/advice: what would have fitted (advice/advice.h), added to a closed
// trace whose postmortem is already written. It is a separate step because
// the advice is computed after the run: by re-planning, which takes seconds,
// and must never stand between a failing run and its postmortem.
#pragma once

#include <optional>
#include <string>

namespace headroom {

// Writes `json` as the scalar UTF-8 string dataset /oom/advice of the trace
// at `path`, replacing an earlier one. The trace must hold /oom. Reserves
// the room first (util/hdf5/hdf5_handle.h: reserve_space), so a full disk
// leaves the trace as it was. Throws UsageError naming the file.
void write_oom_advice(const std::string& path, const std::string& json);

// The advice of the trace at `path`; nullopt when it has none (no OOM, or a
// trace written before advice existed).
std::optional<std::string> read_oom_advice(const std::string& path);

}  // namespace headroom
