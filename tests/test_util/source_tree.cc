// The one test object compiled with the checkout's paths (source_tree.h
// says why).
#include "test_util/source_tree.h"

#include <cstdlib>

namespace headroom::testing {

const std::string& source_dir() {
  static const std::string dir = HEADROOM_SOURCE_DIR;
  return dir;
}

const std::string& binary_dir() {
  static const std::string dir = HEADROOM_BINARY_DIR;
  return dir;
}

const std::string& headroom_binary() {
  static const std::string path = binary_dir() + "/headroom";
  return path;
}

std::string qwen3_tokenizer() {
  const char* env = std::getenv("HEADROOM_QWEN3_TOKENIZER");
  return env != nullptr && *env != '\0' ? env : HEADROOM_QWEN3_TOKENIZER;
}

}  // namespace headroom::testing
