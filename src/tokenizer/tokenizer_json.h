// read_tokenizer_json: the parts of a HuggingFace tokenizer.json that
// BpeTokenizer uses, read and checked against what it can reproduce exactly
// (the list is in bpe_tokenizer.h). Every problem is a UsageError
// "<file>: <key>: <what>", the key written as a path into the JSON
// ("pre_tokenizer.pretokenizers[0].behavior", "model.merges[17]").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/pre_tokenizer.h"

namespace headroom {

struct TokenizerJson {
  std::string path;  // the file read (a folder's tokenizer.json)
  bool nfc = false;  // normalizer NFC; false = none
  std::vector<PreTokenizer::Step> pre_tokenizer;
  std::vector<std::pair<std::string, int32_t>> vocab;       // model.vocab, byte-level spelling
  std::vector<std::pair<std::string, std::string>> merges;  // model.merges, in rank order
  bool ignore_merges = false;
  std::vector<AddedToken> added_tokens;
};

// Qwen3's tokenizer.json is 11 MB and the largest public ones (Gemma's 262k
// vocabulary) about 35 MB: past this bound a file is not a tokenizer.
constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t{256} << 20;

// The tokenizer keeps a table by token id (the bytes each id decodes to), so
// its size follows the largest id, not the number of tokens: one id of 2^31
// would ask for 64 GiB. The largest vocabularies in use have about 262k ids
// (Gemma); ids past this bound (16 times that) are refused by key.
constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;

// Reads `path`, a tokenizer.json or a folder holding one: a regular file of
// at most kMaxTokenizerJsonBytes (util/read_file.h).
TokenizerJson read_tokenizer_json(const std::string& path);

}  // namespace headroom
