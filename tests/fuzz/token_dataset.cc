// token_dataset: an HDF5 token dataset (data/token_dataset.h) as training
// opens it: open() with a model's vocabulary (every check of the format),
// check_trainable, and each document read back.
#include <vector>

#include "data/token_dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path = fuzz::write_file("train.h5", fuzz::as_text(data, size));
  return fuzz::swallow_usage_errors([&] {
    const TokenDataset dataset = TokenDataset::open(path, 4096);
    dataset.check_trainable(16);
    std::vector<int32_t> tokens;
    std::vector<uint8_t> mask;
    for (int64_t d = 0; d < dataset.num_documents() && d < 64; ++d)
      dataset.read_document(d, tokens, mask, 256);
  });
}
