// `headroom data tokenize`: placeholder until the tokenizer lands.
#include "data_tools.h"
#include "util/error.h"

namespace headroom {

int data_tokenize(const std::vector<std::string>&) {
  throw UsageError("headroom data tokenize is not built yet");
}

}  // namespace headroom
