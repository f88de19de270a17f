// tokenizer_encode: the fuzzed bytes as text, encoded by the GPT-2 style
// test tokenizer (tests/tokenizer/tiny_gpt2.json: ByteLevel, added tokens)
// and decoded again: well-formed UTF-8 must come back as it went in
// (bpe_tokenizer.h: decode(encode(x)) == x without a normalizer).
#include <cstdlib>

#include "fuzz_input.h"
#include "tokenizer/bpe_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  static const BpeTokenizer tokenizer = BpeTokenizer::load(HEADROOM_FUZZ_TOKENIZER);
  const std::string_view text = fuzz::as_text(data, size);
  return fuzz::swallow_usage_errors([&] {
    const std::vector<int32_t> ids = tokenizer.encode(text);
    if (tokenizer.decode(ids) != text) std::abort();
  });
}
