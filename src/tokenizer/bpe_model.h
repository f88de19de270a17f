// BpeModel: the merge step of byte-level BPE, exactly as HF `tokenizers`
// (models/bpe/word.rs, `Word::merge_all`) performs it without dropout.
//
// A pre-token's bytes start as one symbol per byte. The pair of neighbouring
// symbols with the lowest merge rank (the leftmost on a tie) is merged into
// the token the merge names, and so on until no neighbouring pair has a
// merge. A min-heap of candidate pairs keeps this O(n log n) in the
// pre-token's length n, so a pre-token of 100k spaces costs milliseconds,
// not minutes. Stale heap entries are skipped with the same test HF uses (the
// pair now at that position no longer yields the entry's token), which keeps
// the result identical to HF's even where two merges produce one token.
//
// With `ignore_merges` (Llama-3), a pre-token that is itself a vocabulary
// entry is emitted as that id without merging.
//
// Thread-safe: const after construction.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace headroom {

// Strings to ids, looked up by string_view without building a std::string.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Merge {
    int32_t left;
    int32_t right;
    int32_t result;
  };

  // `byte_ids[b]`: the id of the one-byte symbol b. `merges`: in rank order
  // (rank = index); a pair listed twice keeps its last rank, as in HF.
  // `whole_tokens`: every vocabulary entry by the bytes it spells, consulted
  // only with `ignore_merges`.
  BpeModel(const std::array<int32_t, 256>& byte_ids, const std::vector<Merge>& merges,
           TokenIds whole_tokens, bool ignore_merges);

  // Appends the ids of one pre-token (raw bytes, not empty) to `out`.
  void encode(std::string_view bytes, std::vector<int32_t>& out) const;

 private:
  struct Rule {
    uint32_t rank;
    int32_t result;
  };
  // Pre-tokens up to this many bytes take the allocation-free quadratic
  // loop; longer ones the heap.
  static constexpr size_t kShortWord = 48;
  void encode_short(std::string_view bytes, std::vector<int32_t>& out) const;
  void encode_long(std::string_view bytes, std::vector<int32_t>& out) const;

  static uint64_t key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  const Rule* rule(int32_t left, int32_t right) const {
    auto it = rules_.find(key(left, right));
    return it == rules_.end() ? nullptr : &it->second;
  }

  std::array<int32_t, 256> byte_ids_;
  std::unordered_map<uint64_t, Rule> rules_;
  TokenIds whole_tokens_;
  bool ignore_merges_;
};

}  // namespace headroom
