#include "memory/postmortem.h"

#include <algorithm>
#include <cstdio>

#include "util/bytes.h"

namespace headroom {

namespace {

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string first_line(const Postmortem& pm) {
  std::string line = "OutOfMemory: " + (pm.tag.empty() ? std::string("(untagged)") : pm.tag) +
                     " needs " + format_bytes(pm.rounded_bytes);
  if (!pm.description.empty()) line += " (" + pm.description + ")";
  line += " in phase " + std::string(name_of(pm.phase));
  if (pm.layer >= 0) line += ", layer " + std::to_string(pm.layer);
  if (pm.step >= 0) line += ", step " + std::to_string(pm.step);
  return line;
}

}  // namespace

std::string tag_pattern(const std::string& tag) {
  std::string out;
  size_t start = 0;
  while (start <= tag.size()) {
    size_t end = tag.find('.', start);
    if (end == std::string::npos) end = tag.size();
    const std::string field = tag.substr(start, end - start);
    const bool number = !field.empty() && std::all_of(field.begin(), field.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (start > 0) out += '.';
    out += number ? "*" : field;
    start = end + 1;
  }
  return out;
}

std::string format_postmortem(const Postmortem& pm) {
  std::string out = first_line(pm) + "\n";
  out += "  allocated " + format_bytes(pm.allocated) + ", reserved " + format_bytes(pm.reserved) +
         ", capacity " + (pm.capacity ? format_bytes(pm.capacity) : std::string("unlimited")) +
         " (" + pm.source + ")\n";
  if (pm.capacity_limited) {
    out += "  refused by memory.device_capacity: reserving a " + format_bytes(pm.segment_bytes) +
           " segment would bring reserved to " + format_bytes(pm.reserved + pm.segment_bytes) +
           " > " + format_bytes(pm.capacity) + "\n";
  } else {
    out += "  refused by the " + pm.source + " memory source (a " + format_bytes(pm.segment_bytes) +
           " segment could not be had)\n";
  }
  if (pm.device_total != 0) {
    // What the driver saw: the part of the device this allocator does not
    // hold is the CUDA context, other processes, and other allocators.
    const uint64_t used = pm.device_total - std::min(pm.device_free, pm.device_total);
    out += "  device (cudaMemGetInfo): " + format_bytes(pm.device_free) + " free of " +
           format_bytes(pm.device_total) + "; in use outside this allocator " +
           format_bytes(used > pm.reserved ? used - pm.reserved : 0) + "\n";
  }
  out += "  request: " + format_bytes_exact(pm.requested_bytes) + " asked, " +
         format_bytes_exact(pm.rounded_bytes) + " after rounding, category " +
         std::string(name_of(pm.category)) + "\n";

  out += "\n  live bytes by category\n";
  for (Category c : kAllCategories) {
    uint64_t bytes = pm.live_by_category[static_cast<int>(c)];
    if (bytes == 0) continue;
    out += "    " + pad(std::string(name_of(c)), 12) + format_bytes_exact(bytes) + "\n";
  }

  if (!pm.largest_live.empty()) {
    out += "\n  largest live blocks\n";
    out += "    " + pad("bytes", 14) + pad("category", 12) + pad("phase", 11) + pad("layer", 7) +
           pad("step", 6) + "tag\n";
    for (const LiveBlock& b : pm.largest_live) {
      out += "    " + pad(format_bytes(b.bytes), 14) + pad(std::string(name_of(b.category)), 12) +
             pad(std::string(name_of(b.phase)), 11) +
             pad(b.layer >= 0 ? std::to_string(b.layer) : "-", 7) +
             pad(b.step >= 0 ? std::to_string(b.step) : "-", 6) + b.tag + "\n";
    }
  }
  return out;
}

OutOfMemory::OutOfMemory(Postmortem postmortem)
    : Error(ExitCode::kOutOfMemory, first_line(postmortem)), postmortem_(std::move(postmortem)) {}

}  // namespace headroom
