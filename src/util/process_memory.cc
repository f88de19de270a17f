#include "util/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace headroom {

namespace {
uint64_t status_field_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream value(line.substr(prefix.size()));
    uint64_t kib = 0;
    value >> kib;
    return kib;
  }
  return 0;
}
}  // namespace

uint64_t resident_bytes() {
  return status_field_kib("VmRSS") * 1024;
}
uint64_t resident_file_bytes() {
  return status_field_kib("RssFile") * 1024;
}
uint64_t peak_resident_bytes() {
  return status_field_kib("VmHWM") * 1024;
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  return static_cast<bool>(out.flush());
}

}  // namespace headroom
