// JsonlDocumentReader: tokenized documents from JSONL, one line at a time —
// the reading half of `headroom data convert` (docs/data-format.md,
// "Converting JSONL").
//
//   {"input_ids": [151644, 872, 198, 9707], "loss_mask": [0, 0, 0, 1]}
//   {"input_ids": [151644, 77091], "labels": [-100, 77091]}
//
// Each non-blank line is one JSON object. It is parsed with nlohmann's SAX
// interface straight into the record's vectors: no JSON tree is built and
// only the current line and its record are held, so memory is bounded by the
// longest line, never by the length of the file. Input is read through zlib:
// a gzip-compressed file (whatever its name) reads the same as plain text,
// and "-" reads standard input. Pipes and FIFOs stream like files
// (`<(zcat a.jsonl.gz)`); a NUL byte anywhere is an error at its line (JSON
// text never holds one, so /dev/zero stops at line 1), and so is a line of
// more than 1 GiB.
//
// Per record, with the field names of JsonlSchema:
//   ids_field     required: an array of integers in [0, vocab_size)
//   mask_field    optional: an array of 0/1 (or false/true), one per id
//   labels_field  optional, HuggingFace style: one per id, -100 (not a target)
//                 or the id itself (a target). A label that is neither — e.g.
//                 labels already shifted by one — is an error.
//   text_field    when set, the record is text for a tokenizer instead: only
//                 this string is read, the id/mask/labels fields are not.
// Other fields are ignored, whatever they hold. A field given twice, or a mask
// and labels in one record, is an error.
//
// Every problem is a UsageError "<path>:<line>: <what>" (line 1-based, the
// path "<stdin>" for "-") that names the field and element and what was
// expected, e.g.
//   train.jsonl:7: input_ids[3] = 70000 is outside [0, vocab_size = 32000)
//   train.jsonl:9: invalid JSON at byte 15: syntax error while parsing value - ...
//   train.jsonl:12: loss_mask has 5 entries but input_ids has 6: they must align one to one
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace headroom {

struct JsonlSchema {
  int64_t vocab_size = 0;                // ids must lie in [0, vocab_size); at least 1
  std::string ids_field = "input_ids";   // "" only in text mode
  std::string mask_field = "loss_mask";  // "" = never read a mask
  std::string labels_field;              // "" = never read labels
  std::string text_field;                // "" = token ids, not text
};

// One line's document. The vectors keep their capacity from record to record.
struct JsonlRecord {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;  // one per id when has_mask (from the mask or the labels field)
  bool has_mask = false;
  std::string text;  // text mode only
};

class JsonlDocumentReader {
 public:
  // Opens `path` ("-" = standard input). A missing or unreadable file, a
  // folder, or a schema without vocab_size or fields is a UsageError.
  JsonlDocumentReader(const std::string& path, JsonlSchema schema);
  ~JsonlDocumentReader();
  JsonlDocumentReader(const JsonlDocumentReader&) = delete;
  JsonlDocumentReader& operator=(const JsonlDocumentReader&) = delete;

  // Reads the next non-blank line into `record`; false at the end of the
  // input (a last line without '\n' counts). Lines of only whitespace are
  // skipped and counted.
  bool next(JsonlRecord& record);

  // "<path>:<line>" of the record next() returned last, for messages that
  // the caller adds (e.g. "train.jsonl:7").
  std::string where() const;
  const std::string& display_path() const;  // the path, or "<stdin>"
  int64_t line() const;                     // 1-based line of the last record
  int64_t lines() const;                    // lines read so far, blank ones included
  int64_t blank_lines() const;
  int64_t bytes() const;  // uncompressed input bytes read so far, newlines included

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace headroom
