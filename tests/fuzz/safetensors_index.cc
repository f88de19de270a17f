// safetensors_index: a model.safetensors.index.json (the weight_map of a
// sharded checkpoint) beside two small valid shards, opened as a folder.
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_input.h"
#include "model/safetensors.h"

namespace {

// Two shards of one F32 tensor each: "a" (2, 2) and "b" (3).
void write_shards() {
  using headroom::SafetensorsDType;
  using headroom::SafetensorsWriter;
  const float zeros[4] = {};
  std::filesystem::create_directories(headroom::fuzz::scratch_dir() / "ckpt");
  for (const auto& [file, name, shape] :
       {std::tuple{"model-00001-of-00002.safetensors", "a", std::vector<int64_t>{2, 2}},
        std::tuple{"model-00002-of-00002.safetensors", "b", std::vector<int64_t>{3}}}) {
    SafetensorsWriter writer((headroom::fuzz::scratch_dir() / "ckpt" / file).string());
    writer.declare(name, SafetensorsDType::kF32, shape);
    writer.write(name, zeros);
    writer.finish();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  static const bool shards_written = (write_shards(), true);
  (void)shards_written;
  fuzz::write_file("ckpt/model.safetensors.index.json", fuzz::as_text(data, size));
  return fuzz::swallow_usage_errors(
      [&] { (void)SafetensorsIndex::open((fuzz::scratch_dir() / "ckpt").string()); });
}
