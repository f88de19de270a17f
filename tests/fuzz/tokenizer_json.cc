// tokenizer_json: a tokenizer.json loaded (BpeTokenizer::load: every key it
// checks, the vocabulary, merges, added tokens, the Split regexes compiled
// by ICU), then a fixed sample encoded and decoded with it.
#include "fuzz_input.h"
#include "tokenizer/bpe_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path = fuzz::write_file("tokenizer.json", fuzz::as_text(data, size));
  return fuzz::swallow_usage_errors([&] {
    const BpeTokenizer tokenizer = BpeTokenizer::load(path);
    const std::vector<int32_t> ids =
        tokenizer.encode("Hello, world! <|endoftext|> 123 naïve  \n\tcafé's 😀");
    (void)tokenizer.decode(ids);
  });
}
