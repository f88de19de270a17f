#include "util/error.h"

#include <cerrno>
#include <cstring>

namespace headroom {

void throw_system_error(const std::string& what) {
  throw InternalError(what + ": " + std::strerror(errno));
}

}  // namespace headroom
