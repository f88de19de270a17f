// `headroom data convert` as library code: JSONL, one document per line, of
// token ids (or of text, through a HuggingFace byte-level BPE tokenizer)
// into a token dataset (docs/data-format.md, "Converting JSONL"). The CLI
// (src/cli/data_convert.cc) parses the options and prints the summary.
//
// Streaming: data/jsonl_documents.h reads one line at a time,
// data/token_dataset_writer.h appends one document at a time, on two
// threads (one parses JSON and tokenizes, the other writes with HDF5's
// deflate) with a bounded queue between them. Memory is therefore bounded by
// a few of the longest documents plus the writer's ~5 MiB of buffers,
// whatever the corpus size.
//
// All or nothing: the dataset is written as OUT.tmp-<pid>-<n> and renamed at the end,
// so any error — a bad line anywhere in the file — leaves no OUT and an
// existing OUT (with overwrite) untouched.
//
// Built into headroom_data_tools, not headroom_data: it links the tokenizer
// (and ICU).
#pragma once

#include <cstdint>
#include <string>

#include "data/jsonl_documents.h"

namespace headroom {

struct ConvertOptions {
  std::string in;   // the JSONL file, gzip or not; "-" = standard input
  std::string out;  // the dataset file to write
  // Ids, mask and labels fields and vocab_size; with a text_field the
  // records hold text, tokenized with `tokenizer_path`.
  JsonlSchema schema;
  std::string tokenizer_path;  // tokenizer.json or its folder; only with schema.text_field
  std::string tokenizer_name;  // the tokenizer attribute; "" = tokenizer_path, or "unknown (...)"
  int64_t eos = -1;            // -1 = none
  int64_t bos = -1;
  bool append_eos = false;   // end every document with eos unless it does (a target)
  bool prepend_bos = false;  // start every document with bos unless it does (mask 0)
  int64_t min_tokens = 0;    // drop documents shorter, counted after bos/eos
  bool overwrite = false;    // replace an existing `out` (only on success)
  std::string created_by;    // the created_by attribute: who wrote the file
};

// What was read and written.
struct ConvertSummary {
  std::string input;  // the input's path, or "<stdin>"
  std::string output;
  int64_t lines = 0;  // lines read, blank ones included
  int64_t blank_lines = 0;
  int64_t bytes = 0;          // uncompressed input bytes
  int64_t documents = 0;      // written
  int64_t tokens = 0;         // written, bos/eos included
  int64_t skipped_empty = 0;  // records with no ids
  int64_t dropped_short = 0;  // fewer than min_tokens once bos/eos are added
  bool with_mask = false;     // the dataset has a /loss_mask
  int64_t mask_ones = 0;      // written tokens with loss_mask 1
  int64_t eos_appended = 0;
  int64_t bos_prepended = 0;
  double seconds = 0.0;  // reading, tokenizing and writing (not the tokenizer's load)
};

// Checks the options, the input and the output before reading a line, then
// converts. Every error is a UsageError that names the option (as `headroom
// data convert` spells it: "--eos 7: must be in [-1, vocab_size = 5)"), the
// path ("OUT: exists; pass --overwrite to replace it") or the input line
// ("train.jsonl:7: ..."); the first record with a mask, or without one,
// decides whether the dataset has a /loss_mask and every later one must
// agree; a file with no documents to write is an error too. On any error
// nothing is written.
ConvertSummary convert_jsonl_to_dataset(const ConvertOptions& options);

}  // namespace headroom
