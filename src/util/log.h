// Logging to stderr with the rank in front, so interleaved mpirun output stays
// readable. The rank is set once per process by the CLI; until then it is
// omitted. Progress lines (rank 0's step line) go to stdout elsewhere.
#pragma once

#include <string_view>

namespace headroom::log {

void set_rank(int rank);
void info(std::string_view message);
void warn(std::string_view message);

}  // namespace headroom::log
