// `headroom data convert IN.jsonl OUT.h5 --vocab N`: JSONL of token-id lists
// into a token dataset (docs/data-format.md, "Converting JSONL"), streaming:
// data/jsonl_documents.h reads one line at a time, data/token_dataset_writer.h
// appends one document at a time.
//
// Two threads, each about half of the work: one parses JSON, the other writes
// (HDF5's deflate), with at most kQueuedTokens tokens between them. Memory is
// therefore bounded by a few of the longest documents plus the writer's
// ~5 MiB of buffers, whatever the corpus size.
//
// All or nothing: the dataset is written as OUT.tmp and renamed by finish(),
// so any error — a bad line anywhere in the file — leaves no OUT and an
// existing OUT (with --overwrite) untouched.
//
// Text (`--text-field` with `--tokenizer`) goes through ids_of_record(), the
// one place a record becomes token ids, through the byte-level BPE tokenizer
// (data/bpe_tokenizer.h, loaded by make_tokenizer()).
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>
#include <thread>

#include "data/bpe_tokenizer.h"
#include "data/jsonl_documents.h"
#include "data/token_dataset.h"
#include "data/token_dataset_writer.h"
#include "data_tools.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/process_memory.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace headroom {

namespace {

constexpr const char* kUsage = R"(usage: headroom data convert IN.jsonl OUT.h5 --vocab N [options]

Converts JSONL, one document per line, into a token dataset:
  {"input_ids": [151644, 872, 198, 9707], "loss_mask": [0, 0, 0, 1]}
Ids must lie in [0, N); the mask (or HF-style labels, -100 = not a target) is
optional but must be in every record or in none. IN may be gzip-compressed;
"-" reads standard input. Streams: memory does not grow with the file. On any
error nothing is written and an existing OUT is left as it was.
)";

struct Options {
  std::string in;
  std::string out;
  JsonlSchema schema;
  std::string text_field;
  std::string tokenizer_path;
  std::string tokenizer_name;
  int64_t eos = -1;
  int64_t bos = -1;
  bool append_eos = false;
  bool prepend_bos = false;
  int64_t min_tokens = 0;
  bool overwrite = false;
  bool json = false;
};

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
Tokenize make_tokenizer(const Options& o) {
  if (o.text_field.empty()) {
    if (!o.tokenizer_path.empty())
      throw UsageError("--tokenizer " + o.tokenizer_path +
                       ": a tokenizer is for text; name the text field with --text-field NAME");
    return {};
  }
  if (o.tokenizer_path.empty())
    throw UsageError("--text-field " + o.text_field +
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

// `headroom data convert ...` as typed, for the created_by attribute.
std::string command_line(const std::vector<std::string>& args) {
  std::string line = std::string("headroom ") + HEADROOM_VERSION + " data convert";
  for (const std::string& a : args)
    line += a.find_first_of(" \t'\"") == std::string::npos ? " " + a : " '" + a + "'";
  return line;
}

std::string mask_fields(const JsonlSchema& schema) {
  if (schema.labels_field.empty()) return schema.mask_field;
  if (schema.mask_field.empty()) return schema.labels_field;
  return schema.mask_field + " or " + schema.labels_field;
}

void check_options(const Options& o) {
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
  if (o.text_field.empty() && o.schema.ids_field.empty())
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
void check_output(const Options& o) {
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

void print_summary(const Options& o, const JsonlDocumentReader& reader, const Counts& c,
                   bool with_mask, double seconds) {
  const double megabytes = static_cast<double>(reader.bytes()) / 1e6;
  const double mb_per_s = seconds > 0 ? megabytes / seconds : 0;
  const double tokens_per_s = seconds > 0 ? static_cast<double>(c.tokens) / seconds : 0;
  const double coverage =
      c.tokens > 0 ? static_cast<double>(c.mask_ones) / static_cast<double>(c.tokens) : 0;
  const uint64_t peak_rss = peak_resident_bytes();
  if (o.json) {
    nlohmann::ordered_json j;
    j["input"] = reader.display_path();
    j["output"] = o.out;
    j["lines"] = reader.lines();
    j["blank_lines"] = reader.blank_lines();
    j["bytes"] = reader.bytes();
    j["documents"] = c.documents;
    j["tokens"] = c.tokens;
    j["skipped_empty"] = c.empty;
    j["dropped_short"] = c.short_ones;
    j["min_tokens"] = o.min_tokens;
    j["eos_appended"] = c.eos_appended;
    j["bos_prepended"] = c.bos_prepended;
    j["loss_mask"] = {{"present", with_mask},
                      {"targets_kept", with_mask ? c.mask_ones : c.tokens},
                      {"coverage", with_mask ? coverage : 1.0}};
    j["vocab_size"] = o.schema.vocab_size;
    j["seconds"] = seconds;
    j["mb_per_second"] = mb_per_s;
    j["tokens_per_second"] = tokens_per_s;
    j["peak_rss_bytes"] = peak_rss;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("wrote %s: %lld documents, %lld tokens, vocab %lld\n", o.out.c_str(),
              static_cast<long long>(c.documents), static_cast<long long>(c.tokens),
              static_cast<long long>(o.schema.vocab_size));
  std::printf(
      "  read       %s: %lld lines, %.1f MB; skipped %lld blank lines, %lld empty "
      "documents; dropped %lld shorter than --min-tokens %lld\n",
      reader.display_path().c_str(), static_cast<long long>(reader.lines()), megabytes,
      static_cast<long long>(reader.blank_lines()), static_cast<long long>(c.empty),
      static_cast<long long>(c.short_ones), static_cast<long long>(o.min_tokens));
  if (with_mask)
    std::printf("  loss_mask  %lld of %lld tokens are targets (%.2f%%)\n",
                static_cast<long long>(c.mask_ones), static_cast<long long>(c.tokens),
                100.0 * coverage);
  else
    std::printf("  loss_mask  none (every token is a target)\n");
  if (o.prepend_bos || o.append_eos)
    std::printf("  added      bos to %lld documents, eos to %lld (none where already there)\n",
                static_cast<long long>(c.bos_prepended), static_cast<long long>(c.eos_appended));
  std::printf("  took       %.2f s: %.1f MB/s of JSONL, %.2f M tokens/s; peak RSS %s\n", seconds,
              mb_per_s, tokens_per_s / 1e6, format_bytes(peak_rss).c_str());
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
void read_documents(const Options& o, JsonlDocumentReader& reader, const Tokenize& tokenize,
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

int data_convert(const std::vector<std::string>& args) {
  Options o;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "vocab", po::value<int64_t>(&o.schema.vocab_size)->required(),
      "vocabulary size N of the tokenizer: every id is in [0, N) (required)")(
      "ids-field", po::value<std::string>(&o.schema.ids_field)->default_value("input_ids"),
      "the field holding the token ids")(
      "mask-field", po::value<std::string>(&o.schema.mask_field)->default_value("loss_mask"),
      "the optional field of 0/1 per token (0 = not a target); '' ignores masks")(
      "labels-field", po::value<std::string>(&o.schema.labels_field),
      "an optional HuggingFace labels field instead (e.g. labels): -100 = not a target, "
      "otherwise the id itself")("eos", po::value<int64_t>(&o.eos)->default_value(-1),
                                 "end-of-sequence id (-1 = none)")(
      "bos", po::value<int64_t>(&o.bos)->default_value(-1), "beginning-of-sequence id (-1 = none)")(
      "append-eos", po::bool_switch(&o.append_eos),
      "end every document with --eos, unless it already does (a target: mask 1)")(
      "prepend-bos", po::bool_switch(&o.prepend_bos),
      "start every document with --bos, unless it already does (mask 0)")(
      "min-tokens", po::value<int64_t>(&o.min_tokens)->default_value(0),
      "drop documents shorter than this, counted after --prepend-bos/--append-eos "
      "(empty records are always skipped)")(
      "tokenizer-name", po::value<std::string>(&o.tokenizer_name),
      "the tokenizer attribute: which tokenizer made the ids (e.g. \"Qwen/Qwen3-8B\")")(
      "text-field", po::value<std::string>(&o.text_field),
      "tokenize this text field instead of reading ids; needs --tokenizer")(
      "tokenizer", po::value<std::string>(&o.tokenizer_path),
      "HuggingFace tokenizer.json (or its folder) for --text-field")(
      "overwrite", po::bool_switch(&o.overwrite), "replace an existing OUT.h5 (only on success)")(
      "json", po::bool_switch(&o.json), "print the summary as one JSON object");
  po::options_description hidden;
  hidden.add_options()("in", po::value<std::string>(&o.in))("out", po::value<std::string>(&o.out));
  po::positional_options_description positional;
  positional.add("in", 1).add("out", 1);
  po::variables_map vm;
  if (!parse_data_options("convert", kUsage, args, visible, hidden, positional, vm)) return 0;

  check_options(o);
  if (o.in != "-") check_input("IN.jsonl", o.in);
  if (!o.tokenizer_path.empty()) check_input("--tokenizer", o.tokenizer_path);
  const Tokenize tokenize = make_tokenizer(o);
  check_output(o);
  if (!o.text_field.empty()) o.schema.text_field = o.text_field;

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
  attributes.created_by = command_line(args);

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
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_summary(o, reader, c, with_mask, seconds);
  return 0;
}

}  // namespace headroom
