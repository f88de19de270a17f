// This process's resident memory, as the kernel counts it (/proc/self/status).
// Used to check the allocator's accounting against the operating system.
#pragma once

#include <cstdint>

namespace headroom {

// VmRSS in bytes, or 0 where /proc is not available.
uint64_t resident_bytes();
// RssFile in bytes: the resident pages backed by files (program and library
// code and read-only data, mapped files), shared with every process that maps
// them and dropped by the kernel under pressure without being written; 0
// where /proc is not available.
uint64_t resident_file_bytes();
// VmHWM (peak resident) in bytes since start or the last reset, or 0.
uint64_t peak_resident_bytes();
// Restarts VmHWM from the current RSS (writes 5 to /proc/self/clear_refs).
// Returns false when the kernel does not allow it.
bool reset_peak_resident();

}  // namespace headroom
