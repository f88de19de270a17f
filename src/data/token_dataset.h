// TokenDataset: a tokenized corpus in one HDF5 file (docs/data-format.md).
//
//   /tokens     int32 (N)            every document's tokens, concatenated
//   /offsets    int64 (D + 1)        document d is /tokens[offsets[d], offsets[d + 1])
//   /loss_mask  uint8 (N), optional  0 = this token is never a target
//   attributes  format_version (= 1), vocab_size, eos_id, bos_id (-1 = none),
//               tokenizer, created_by; optional source_entropy_nats
//
// open() checks everything a training run would otherwise trip over hours
// later (a token id past the embedding table reads out of bounds; a bad
// offset silently glues documents together). Each problem is a UsageError
// naming the file, the dataset and the first bad index, e.g.
//   data/train.h5: /offsets[1024] = 88231 < /offsets[1023] = 90112: offsets must not decrease
//
// /loss_mask values must be 0 or 1 (the first other one is named with its
// document and position); open() streams the mask once for that and to count
// the targets (num_targets, check_trainable) in memory bounded by one slab.
//
// Memory: the offsets stay in memory (8 bytes per document) so that document
// lengths, which the batcher plans every epoch with, cost no I/O. Tokens are
// never loaded whole: open() validates them in 1M-token hyperslabs and
// read_document() reads one document's hyperslab.
//
// Not thread-safe: one TokenDataset per thread (HDF5 serializes calls anyway).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace headroom {

// The root attributes of a token dataset.
struct TokenDatasetAttributes {
  int64_t format_version = 1;
  int64_t vocab_size = 0;  // ids the tokenizer can produce; every token is below it
  int64_t eos_id = -1;     // -1 = the tokenizer has none / documents carry none
  int64_t bos_id = -1;
  std::string tokenizer;   // e.g. "Qwen/Qwen3-8B tokenizer.json sha256:..." or "none (synthetic)"
  std::string created_by;  // the tool and its arguments, for provenance
  // The per-token entropy rate (nats) of the synthetic source that generated
  // the corpus: the loss a perfect model converges to. Absent for real text.
  std::optional<double> source_entropy_nats;

  bool operator==(const TokenDatasetAttributes&) const = default;
};

class TokenDataset {
 public:
  // The format this build reads and writes.
  static constexpr int64_t kFormatVersion = 1;

  // Opens and validates `path`. Every token must lie in [0, vocab_size) of
  // the file and, when model_vocab > 0, in [0, model_vocab) of the model that
  // will embed it (model_vocab = 0: no model yet, e.g. an inspect tool).
  static TokenDataset open(const std::string& path, int64_t model_vocab);

  TokenDataset(TokenDataset&&) noexcept;
  TokenDataset& operator=(TokenDataset&&) noexcept;
  ~TokenDataset();

  const std::string& path() const;
  const TokenDatasetAttributes& attributes() const;
  int64_t num_documents() const;
  int64_t num_tokens() const;
  bool has_loss_mask() const;
  // Tokens that training predicts (counted at open, with no truncation):
  // token j >= 1 of a document, when its /loss_mask value is 1 (or there is no
  // /loss_mask) — exactly the targets the Batcher's batches hold.
  int64_t num_targets() const;
  // Throws a UsageError naming the file unless a run on this dataset, with
  // every document cut to its first `truncate_at` tokens (0 = never cut),
  // has at least one target: zero documents, only empty documents, only
  // one-token documents, a /loss_mask that is 0 wherever a target could be,
  // or a cut before every document's first target. Costs nothing: the
  // numbers it needs are gathered by open(). The Batcher calls it; a run
  // calls it before it writes anything.
  void check_trainable(int64_t truncate_at = 0) const;
  int64_t document_length(int64_t document) const;
  // Where document `document` starts in /tokens.
  int64_t document_offset(int64_t document) const;

  // Reads document `document` (its first `max_tokens` tokens when
  // max_tokens > 0) into `tokens`, and its loss mask into `mask` (left empty
  // when the file has no /loss_mask). Both vectors are resized, not appended.
  void read_document(int64_t document, std::vector<int32_t>& tokens, std::vector<uint8_t>& mask,
                     int64_t max_tokens = 0) const;

 private:
  struct State;
  explicit TokenDataset(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace headroom
