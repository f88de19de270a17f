// shard_index: a sharded checkpoint's shard_index.json (read_shard_index),
// beside the one rank file the corpus's index names, so that an index that
// parses goes on to the rank files' checks (sizes, dtype, every rank there).
#include <filesystem>

#include "fuzz_input.h"
#include "train/shard_index.h"

#ifndef HEADROOM_FUZZ_SHARD_FILE
#error "HEADROOM_FUZZ_SHARD_FILE names the rank file the corpus's index describes"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path =
      fuzz::write_file("shard_index/shard_index.json", fuzz::as_text(data, size));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  static const bool copied = [&] {
    std::filesystem::copy_file(HEADROOM_FUZZ_SHARD_FILE, dir / "shard.rank0.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    return true;
  }();
  (void)copied;
  return fuzz::swallow_usage_errors([&] { read_shard_index(dir.string()); });
}
