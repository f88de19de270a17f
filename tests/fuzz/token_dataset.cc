// token_dataset: an HDF5 token dataset (data/token_dataset.h) as training
// opens it: open() with a model's vocabulary (every check of the format),
// check_trainable, and each document read back. The input rewrites one of
// two valid datasets (a masked one, a synthetic corpus) value by value
// (hdf5_rewrite.h: the file stays well-formed HDF5; its content is the
// fuzzer's).
#include <vector>

#include "data/token_dataset.h"
#include "fuzz_input.h"
#include "hdf5_rewrite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  fuzz::Script script(data, size);
  const char* base = script.byte() % 2 == 0 ? HEADROOM_FUZZ_FIXTURES "/masked.h5"
                                            : HEADROOM_FUZZ_FIXTURES "/synth.h5";
  const std::string path = fuzz::rewrite_hdf5(base, "train.h5", script);
  return fuzz::swallow_usage_errors([&] {
    const TokenDataset dataset = TokenDataset::open(path, 4096);
    dataset.check_trainable(16);
    std::vector<int32_t> tokens;
    std::vector<uint8_t> mask;
    for (int64_t d = 0; d < dataset.num_documents() && d < 64; ++d)
      dataset.read_document(d, tokens, mask, 256);
  });
}
