// Where a test finds the checkout's files (experiments, fixtures, docs,
// data_tools) and the build's (the headroom binary, files left for a human).
//
// Why functions rather than the HEADROOM_SOURCE_DIR / HEADROOM_BINARY_DIR
// macros they read: the paths are compiled into one object only
// (source_tree.cc), so every other test object is the same in any checkout
// and ccache (CMakeLists.txt) reuses it when CI builds a fresh clone at
// another path. With the macros in every test object, 60 of 541 compiles of
// such a clone missed the cache (~5 minutes of CI).
#pragma once

#include <string>

namespace headroom::testing {

// The checkout's root directory, without a trailing '/'.
const std::string& source_dir();
// The build directory (CMake's binary dir), without a trailing '/'.
const std::string& binary_dir();
// The headroom binary this build made: binary_dir() + "/headroom".
const std::string& headroom_binary();
// Where scripts/fetch-test-assets.sh puts Qwen3's tokenizer.json (not in the
// repository); the environment variable HEADROOM_QWEN3_TOKENIZER, when set
// and not empty, overrides it.
std::string qwen3_tokenizer();

}  // namespace headroom::testing
