#include "data/convert.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "data/token_dataset.h"
#include "data/token_dataset_writer.h"
#include "tokenizer/bpe_tokenizer.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

struct Counts {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t empty = 0;       // records with no ids: skipped
  int64_t short_ones = 0;  // fewer than --min-tokens once bos/eos are added: dropped
  int64_t mask_ones = 0;   // written tokens with loss_mask 1
  int64_t eos_appended = 0;
  int64_t bos_prepended = 0;
};

// Text to token ids: what the tokenizer will provide.
using Tokenize = std::function<void(std::string_view text, std::vector<int32_t>& ids)>;

// The tokenizer for --text-field, or an empty Tokenize when the records hold
// token ids.
Tokenize make_tokenizer(const ConvertOptions& o) {
  if (o.schema.text_field.empty()) {
    if (!o.tokenizer_path.empty())
      throw UsageError("--tokenizer " + o.tokenizer_path +
                       ": a tokenizer is for text; name the text field with --text-field NAME");
    return {};
  }
  if (o.tokenizer_path.empty())
    throw UsageError("--text-field " + o.schema.text_field +
                     " needs --tokenizer T.json (the model's HuggingFace tokenizer.json)");
  // Shared by the copies std::function makes; encode() is safe from any thread.
  auto tokenizer = std::make_shared<const BpeTokenizer>(BpeTokenizer::load(o.tokenizer_path));
  return [tokenizer](std::string_view text, std::vector<int32_t>& ids) {
    ids = tokenizer->encode(text);
  };
}

// The token ids of one record: its ids field, or its text through the
// tokenizer. The seam for text: nothing past this function knows which.
const std::vector<int32_t>& ids_of_record(const JsonlRecord& record, const Tokenize& tokenize,
                                          const JsonlDocumentReader& reader, int64_t vocab_size,
                                          std::vector<int32_t>& scratch) {
  if (!tokenize) return record.ids;  // checked against the vocabulary by the reader
  try {
    tokenize(record.text, scratch);
  } catch (const UsageError& e) {  // invalid UTF-8: say which record
    throw UsageError(reader.where() + ": " + e.what());
  }
  for (size_t i = 0; i < scratch.size(); ++i)
    if (scratch[i] < 0 || scratch[i] >= vocab_size)
      throw UsageError(reader.where() + ": the tokenizer gave id " + std::to_string(scratch[i]) +
                       " at position " + std::to_string(i) + ", outside [0, vocab_size = " +
                       std::to_string(vocab_size) + ") (--vocab too small for this tokenizer?)");
  return scratch;
}

std::string mask_fields(const JsonlSchema& schema) {
  if (schema.labels_field.empty()) return schema.mask_field;
  if (schema.mask_field.empty()) return schema.labels_field;
  return schema.mask_field + " or " + schema.labels_field;
}

void check_options(const ConvertOptions& o) {
  if (o.in.empty() || o.out.empty())
    throw UsageError("missing " + std::string(o.in.empty() ? "IN.jsonl" : "OUT.h5") +
                     " (see headroom data convert --help)");
  const int64_t vocab = o.schema.vocab_size;
  // Ids are stored as int32: the largest is 2^31 - 1.
  if (vocab < 1 || vocab > (int64_t{1} << 31))
    throw UsageError("--vocab " + std::to_string(vocab) + ": must be in [1, 2^31]");
  for (const auto& [name, id] : {std::pair{"--eos", o.eos}, std::pair{"--bos", o.bos}})
    if (id < -1 || id >= vocab)
      throw UsageError(std::string(name) + " " + std::to_string(id) +
                       ": must be in [-1, vocab_size = " + std::to_string(vocab) + ") (-1 = none)");
  if (o.append_eos && o.eos < 0) throw UsageError("--append-eos needs --eos ID");
  if (o.prepend_bos && o.bos < 0) throw UsageError("--prepend-bos needs --bos ID");
  if (o.min_tokens < 0)
    throw UsageError("--min-tokens " + std::to_string(o.min_tokens) + ": must be at least 0");
  if (o.schema.text_field.empty() && o.schema.ids_field.empty())
    throw UsageError("--ids-field: must name a field");
  if (!o.schema.labels_field.empty() && o.schema.labels_field == o.schema.mask_field)
    throw UsageError("--labels-field " + o.schema.labels_field + " is also --mask-field");
}

// What `path` (the argument `argument` of the command line) is. A path the
// filesystem cannot resolve — a symlink loop, a name too long, a folder we
// may not enter — is a UsageError naming the argument; std::filesystem's
// own exceptions would reach the user as an internal error.
fs::file_type type_of(const std::string& argument, const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) return fs::file_type::not_found;
  if (error)
    throw UsageError(argument + " " + path + ": cannot use: " + error.message() +
                     (error.value() == ELOOP ? " (a symlink loop?)" : ""));
  return status.type();
}

// Refuses an input path the filesystem cannot resolve, before anything is
// read; a missing one is left to its reader, which says "cannot open".
void check_input(const std::string& argument, const std::string& path) {
  type_of(argument, path);
}

// Refuses an OUT that must not be replaced, before anything is read.
void check_output(const ConvertOptions& o) {
  const fs::file_type out = type_of("OUT.h5", o.out);
  const bool out_exists = out != fs::file_type::not_found;
  std::error_code error;
  if (o.in != "-" && out_exists && fs::equivalent(o.in, o.out, error))
    throw UsageError(o.out + ": is IN itself");
  if (out_exists && !o.overwrite)
    throw UsageError(o.out + ": exists; pass --overwrite to replace it");
  if (out == fs::file_type::directory) throw UsageError(o.out + ": is a folder");
  const fs::path parent = fs::path(o.out).parent_path();
  if (!parent.empty() && type_of("OUT.h5's folder", parent.string()) != fs::file_type::directory)
    throw UsageError(o.out + ": no such folder " + parent.string());
}

// A document ready for the writer.
struct Document {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;  // empty when the dataset has no /loss_mask
};

// Tokens that may wait between the reading and the writing thread (4 MiB of
// ids): enough to keep both busy, small next to the writer's own buffers.
constexpr size_t kQueuedTokens = size_t{1} << 20;

// Hands documents from the reading thread to the writing thread, at most
// kQueuedTokens tokens at a time (a longer document waits alone). Written-out
// documents travel back as spares so their buffers are refilled, not
// reallocated.
class DocumentQueue {
 public:
  // Reader: moves `document` in (waiting for room) and leaves a spare in it.
  // False once the writer has stopped.
  bool push(Document& document) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] {
      return stopped_ || queued_tokens_ == 0 ||
             queued_tokens_ + document.tokens.size() <= kQueuedTokens;
    });
    if (stopped_) return false;
    queued_tokens_ += document.tokens.size();
    documents_.push_back(std::move(document));
    document = Document();
    if (!spares_.empty()) {
      document = std::move(spares_.back());
      spares_.pop_back();
    }
    changed_.notify_all();
    return true;
  }
  // Reader: no more documents. After a failure the writer stops at once
  // rather than writing what is queued.
  void close(bool failed) {
    std::lock_guard lock(mutex_);
    closed_ = true;
    if (failed) documents_.clear();
    changed_.notify_all();
  }
  // Writer: the next document into `document` (whose buffers become a
  // spare); false when the reader has closed and nothing is left.
  bool pop(Document& document) {
    std::unique_lock lock(mutex_);
    if (document.tokens.capacity() > 0 && spares_.size() < kSpares) {
      document.tokens.clear();
      document.mask.clear();
      spares_.push_back(std::move(document));
    }
    changed_.wait(lock, [&] { return closed_ || !documents_.empty(); });
    if (documents_.empty()) return false;
    document = std::move(documents_.front());
    documents_.pop_front();
    queued_tokens_ -= document.tokens.size();
    changed_.notify_all();
    return true;
  }
  // Writer: it failed; the reader's next push returns false.
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    changed_.notify_all();
  }

 private:
  static constexpr size_t kSpares = 2;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Document> documents_;
  std::vector<Document> spares_;
  size_t queued_tokens_ = 0;
  bool closed_ = false;
  bool stopped_ = false;
};

// The reading thread: records become documents — ids_of_record(), empty ones
// skipped, short ones dropped, bos/eos added, masks all or none — and go into
// `queue`. Returns early when the writer stops; throws on a bad record.
void read_documents(const ConvertOptions& o, JsonlDocumentReader& reader, const Tokenize& tokenize,
                    DocumentQueue& queue, Counts& c) {
  // The first non-empty record's mask, or its absence, decides whether the
  // file has a /loss_mask; every later record must agree.
  bool with_mask = false;
  int64_t first_line = 0;
  JsonlRecord record;
  std::vector<int32_t> scratch;
  Document document;
  while (reader.next(record)) {
    const std::vector<int32_t>& ids =
        ids_of_record(record, tokenize, reader, o.schema.vocab_size, scratch);
    if (ids.empty()) {
      ++c.empty;
      continue;
    }
    if (first_line == 0) {
      with_mask = record.has_mask;
      first_line = reader.line();
    } else if (record.has_mask != with_mask) {
      throw UsageError(reader.where() + ": " + (record.has_mask ? "has a" : "has no") +
                       " loss mask (" + mask_fields(o.schema) + ") but line " +
                       std::to_string(first_line) + ", the first document, had " +
                       (with_mask ? "one" : "none") +
                       ": every record must carry a mask, or none (the first decides whether "
                       "the dataset has a /loss_mask)");
    }

    const bool add_bos = o.prepend_bos && ids.front() != o.bos;
    const bool add_eos = o.append_eos && ids.back() != o.eos;
    if (static_cast<int64_t>(ids.size() + add_bos + add_eos) < o.min_tokens) {
      ++c.short_ones;
      continue;
    }
    std::vector<int32_t>& tokens = document.tokens;
    std::vector<uint8_t>& mask = document.mask;
    tokens.clear();
    mask.clear();
    if (add_bos) {
      tokens.push_back(static_cast<int32_t>(o.bos));
      if (with_mask) mask.push_back(0);  // nothing predicts the first token anyway
      ++c.bos_prepended;
    }
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    if (with_mask) mask.insert(mask.end(), record.mask.begin(), record.mask.end());
    if (add_eos) {
      tokens.push_back(static_cast<int32_t>(o.eos));
      if (with_mask) mask.push_back(1);  // the model must learn to stop
      ++c.eos_appended;
    }
    ++c.documents;
    c.tokens += static_cast<int64_t>(tokens.size());
    for (uint8_t m : mask)
      c.mask_ones += m;
    if (!queue.push(document)) return;
  }
}

}  // namespace

ConvertSummary convert_jsonl_to_dataset(const ConvertOptions& o) {
  check_options(o);
  if (o.in != "-") check_input("IN.jsonl", o.in);
  if (!o.tokenizer_path.empty()) check_input("--tokenizer", o.tokenizer_path);
  const Tokenize tokenize = make_tokenizer(o);
  check_output(o);

  const auto start = std::chrono::steady_clock::now();
  JsonlDocumentReader reader(o.in, o.schema);

  TokenDatasetAttributes attributes;
  attributes.vocab_size = o.schema.vocab_size;
  attributes.eos_id = o.eos;
  attributes.bos_id = o.bos;
  attributes.tokenizer =
      !o.tokenizer_name.empty() ? o.tokenizer_name
      : !o.tokenizer_path.empty()
          ? o.tokenizer_path
          : "unknown (token ids from " + reader.display_path() + "; name it with --tokenizer-name)";
  attributes.created_by = o.created_by;

  // Parsing on a thread of its own, writing (deflate) on this one.
  Counts c;
  DocumentQueue queue;
  std::exception_ptr read_error;
  std::thread reading([&] {
    try {
      read_documents(o, reader, tokenize, queue, c);
      queue.close(false);
    } catch (...) {
      read_error = std::current_exception();
      queue.close(true);
    }
  });
  // However writing ends, the reading thread stops before what it uses goes.
  struct Join {
    DocumentQueue& queue;
    std::thread& thread;
    ~Join() {
      queue.stop();
      if (thread.joinable()) thread.join();
    }
  } join{queue, reading};

  std::optional<TokenDatasetWriter> writer;
  bool with_mask = false;
  Document document;
  while (queue.pop(document)) {
    if (!writer) {
      with_mask = !document.mask.empty();  // documents are never empty
      writer.emplace(o.out, attributes, with_mask);
    }
    writer->append_document(document.tokens, document.mask);
  }
  reading.join();
  if (read_error) std::rethrow_exception(read_error);

  if (c.documents == 0)
    throw UsageError(reader.display_path() + ": no documents to write (" +
                     std::to_string(reader.lines()) +
                     " lines: " + std::to_string(reader.blank_lines()) + " blank, " +
                     std::to_string(c.empty) + " empty, " + std::to_string(c.short_ones) +
                     " shorter than --min-tokens " + std::to_string(o.min_tokens) + ")");
  writer->finish();
  ConvertSummary summary;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.input = reader.display_path();
  summary.output = o.out;
  summary.lines = reader.lines();
  summary.blank_lines = reader.blank_lines();
  summary.bytes = reader.bytes();
  summary.documents = c.documents;
  summary.tokens = c.tokens;
  summary.skipped_empty = c.empty;
  summary.dropped_short = c.short_ones;
  summary.with_mask = with_mask;
  summary.mask_ones = c.mask_ones;
  summary.eos_appended = c.eos_appended;
  summary.bos_prepended = c.bos_prepended;
  return summary;
}

}  // namespace headroom
