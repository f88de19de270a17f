// `headroom data convert`: placeholder until the convert tool lands.
#include "data_tools.h"
#include "util/error.h"

namespace headroom {

int data_convert(const std::vector<std::string>&) {
  throw UsageError("headroom data convert is not built yet");
}

}  // namespace headroom
