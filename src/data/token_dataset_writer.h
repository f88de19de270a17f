// TokenDatasetWriter: writes a token dataset (token_dataset.h) one document at
// a time, in bounded memory, so corpora larger than RAM can be produced.
//
// The datasets are chunked, extendable and deflate-compressed (token ids
// compress ~2-3x). Nothing appears at `path` until finish(): the file is
// written to a temporary beside it ("<path>.tmp-<pid>-<n>", an
// AtomicFileWriter of util/atomic_file.h), flushed to disk and renamed, so a
// killed writer never leaves a half-written dataset that a training run could
// open, an existing `path` stays byte-identical until the rename, and two
// writers of one path never share a temporary. A writer destroyed without
// finish() (after any error) removes its temporary.
//
// A full disk (ENOSPC, EDQUOT, or EFBIG from RLIMIT_FSIZE), wherever it
// strikes, is a UsageError "<path>: <what>: No space left on device (disk
// full)" naming `path`; the temporary is closed without HDF5 writing again
// (hdf5::detach_from_disk) and removed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "data/token_dataset.h"

namespace headroom {

class TokenDatasetWriter {
 public:
  // `attributes.vocab_size` must be set: appended tokens are checked against
  // it. With `with_loss_mask`, the file gets a /loss_mask; documents appended
  // without a mask get all ones (every token a target).
  TokenDatasetWriter(std::string path, TokenDatasetAttributes attributes,
                     bool with_loss_mask = false);
  ~TokenDatasetWriter();
  TokenDatasetWriter(const TokenDatasetWriter&) = delete;
  TokenDatasetWriter& operator=(const TokenDatasetWriter&) = delete;

  // Appends one document. A token outside [0, vocab_size), a mask whose
  // length differs from the document's, or a mask on a writer made without
  // one is a UsageError naming the document.
  void append_document(std::span<const int32_t> tokens, std::span<const uint8_t> mask = {});

  // Written at finish(); change them any time before (e.g. an entropy that is
  // only known once the corpus is generated).
  TokenDatasetAttributes& attributes();

  int64_t num_documents() const;
  int64_t num_tokens() const;

  // Flushes, writes the attributes, closes, and renames the temporary to
  // `path`.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace headroom
