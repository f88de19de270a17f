// safetensors: one .safetensors file (its header length, JSON header,
// dtypes, shapes and offsets: SafetensorsIndex::open), then every tensor's
// bytes read as stored.
#include <vector>

#include "fuzz_input.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path = fuzz::write_file("model.safetensors", fuzz::as_text(data, size));
  return fuzz::swallow_usage_errors([&] {
    const SafetensorsIndex index = SafetensorsIndex::open(path);
    std::vector<uint8_t> bytes;
    for (const SafetensorsEntry& entry : index.entries()) {
      bytes.resize(entry.nbytes);
      index.read_raw(entry, bytes.data());
    }
  });
}
