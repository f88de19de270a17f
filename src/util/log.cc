#include "util/log.h"

#include <atomic>
#include <cstdio>
#include <string>

namespace headroom::log {

namespace {
// The process's rank; the one piece of process-wide state in util, written
// once at start-up before any thread exists.
std::atomic<int> g_rank{-1};

void write(const char* level, std::string_view message) {
  std::string line;
  int rank = g_rank.load();
  if (rank >= 0) line += "[rank " + std::to_string(rank) + "] ";
  line += level;
  line.append(message);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}
}  // namespace

void set_rank(int rank) {
  g_rank.store(rank);
}
void info(std::string_view message) {
  write("", message);
}
void warn(std::string_view message) {
  write("warning: ", message);
}

}  // namespace headroom::log
