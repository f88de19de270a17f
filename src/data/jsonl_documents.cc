#include "data/jsonl_documents.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "util/bytes.h"
#include "util/error.h"
#include "util/json_error.h"

namespace headroom {

namespace {

using json = nlohmann::json;

// Bytes per read, and zlib's own buffer: large enough that a plain file is
// read with few system calls, small enough not to matter next to the writer.
constexpr unsigned kReadBytes = 1u << 20;
// The longest line (one record) held in memory: a document of about 170M
// token ids, far past any context length; past it the input is not JSONL.
constexpr size_t kMaxLineBytes = size_t{1} << 30;
// Fields of a record listed in a "missing field" message.
constexpr size_t kListedFields = 8;

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

std::string in_quotes(std::string_view text) {
  constexpr size_t kShown = 40;
  if (text.size() <= kShown) return "\"" + std::string(text) + "\"";
  return "\"" + std::string(text.substr(0, kShown)) + "...\"";
}

enum class Field { kOther, kIds, kMask, kLabels, kText };

// nlohmann's SAX interface, filling a JsonlRecord as the line is parsed. A
// callback that meets something the schema does not allow records why in
// `error` and returns false, which stops the parse.
//
// depth counts the open objects and arrays: 1 inside the line's object. A
// value at depth 1 belongs to the last key; while `in_array`, values at depth
// 2 are elements of the array of `field` (ids, mask or labels), which may hold
// only scalars, so the parse never goes deeper inside one.
class RecordSax {
 public:
  explicit RecordSax(const JsonlSchema& schema) : schema_(schema) {}

  // Ready for a new line that fills `record`.
  void start(JsonlRecord& record) {
    record_ = &record;
    record.ids.clear();
    record.mask.clear();
    record.has_mask = false;
    record.text.clear();
    labels_.clear();
    error.clear();
    depth_ = 0;
    field_ = Field::kOther;
    in_array_ = false;
    num_keys_ = 0;
    seen_ids_ = seen_mask_ = seen_labels_ = seen_text_ = false;
    keys_.clear();
  }

  // What the line held, checked once it parsed: fields present, lengths
  // equal, labels consistent with the ids. Returns false with `error` set.
  bool finish() {
    JsonlRecord& r = *record_;
    if (!schema_.text_field.empty()) {
      if (!seen_text_) return missing(schema_.text_field);
      return true;
    }
    if (!seen_ids_) return missing(schema_.ids_field);
    if (seen_mask_ && seen_labels_)
      return fail("has both " + schema_.mask_field + " and " + schema_.labels_field +
                  ": give one of them");
    if (seen_mask_) {
      if (r.mask.size() != r.ids.size())
        return fail(schema_.mask_field + " has " + std::to_string(r.mask.size()) + " entries but " +
                    schema_.ids_field + " has " + std::to_string(r.ids.size()) +
                    ": they must align one to one");
      r.has_mask = true;
    }
    if (seen_labels_) {
      if (labels_.size() != r.ids.size())
        return fail(schema_.labels_field + " has " + std::to_string(labels_.size()) +
                    " entries but " + schema_.ids_field + " has " + std::to_string(r.ids.size()) +
                    ": they must align one to one");
      r.mask.resize(r.ids.size());
      for (size_t i = 0; i < labels_.size(); ++i) {
        if (labels_[i] == -100) {
          r.mask[i] = 0;
        } else if (labels_[i] == r.ids[i]) {
          r.mask[i] = 1;
        } else {
          const std::string at = "[" + std::to_string(i) + "]";
          return fail(schema_.labels_field + at + " = " + std::to_string(labels_[i]) + " but " +
                      schema_.ids_field + at + " = " + std::to_string(r.ids[i]) +
                      ": a label must be -100 (not a target) or the token id itself "
                      "(labels shifted by one already?)");
        }
      }
      r.has_mask = true;
    }
    return true;
  }

  std::string error;

  // --- nlohmann::json SAX callbacks ---
  bool null() { return unexpected_scalar("null", "null"); }
  bool boolean(bool value) {
    if (in_element() && field_ == Field::kMask) {
      record_->mask.push_back(value ? 1 : 0);
      return true;
    }
    return unexpected_scalar("a boolean", value ? "true" : "false");
  }
  bool number_integer(json::number_integer_t value) {  // negative integers
    if (in_element()) {
      if (field_ == Field::kLabels) {
        labels_.push_back(value);
        return true;
      }
      if (field_ == Field::kIds) return id_out_of_range(std::to_string(value));
    }
    return unexpected_scalar("a number", std::to_string(value));
  }
  bool number_unsigned(json::number_unsigned_t value) {  // non-negative integers
    if (in_element()) {
      switch (field_) {
        case Field::kIds:
          // The hot path: one call per token of the corpus.
          if (value >= static_cast<uint64_t>(schema_.vocab_size))
            return id_out_of_range(std::to_string(value));
          record_->ids.push_back(static_cast<int32_t>(value));
          return true;
        case Field::kMask:
          if (value > 1) break;
          record_->mask.push_back(static_cast<uint8_t>(value));
          return true;
        case Field::kLabels:
          if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) break;
          labels_.push_back(static_cast<int64_t>(value));
          return true;
        default:
          break;
      }
    }
    return unexpected_scalar("a number", std::to_string(value));
  }
  bool number_float(json::number_float_t, const json::string_t& text) {
    return unexpected_scalar("a number", text);
  }
  bool string(json::string_t& value) {
    if (depth_ == 1 && field_ == Field::kText) {
      record_->text = std::move(value);
      return true;
    }
    return unexpected_scalar("a string", in_quotes(value));
  }
  bool binary(json::binary_t&) { return true; }  // JSON text has no binary values
  bool start_object(std::size_t) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (in_element()) return element_is("an object");
    if (depth_ == 1 && field_ != Field::kOther) return field_is("an object");
    ++depth_;
    return true;
  }
  bool key(json::string_t& name) {
    if (depth_ != 1) return true;
    if (++num_keys_ <= kListedFields) keys_.push_back(name);
    field_ = field_of(name);
    bool* seen = field_ == Field::kIds      ? &seen_ids_
                 : field_ == Field::kMask   ? &seen_mask_
                 : field_ == Field::kLabels ? &seen_labels_
                 : field_ == Field::kText   ? &seen_text_
                                            : nullptr;
    if (seen == nullptr) return true;
    if (*seen) return fail("field " + in_quotes(name) + " appears twice");
    *seen = true;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) return fail("expected one JSON object per line; this line holds an array");
    if (in_element()) return element_is("an array");
    if (depth_ == 1 && field_ == Field::kText) return field_is("an array");
    if (depth_ == 1 && field_ != Field::kOther) {
      in_array_ = true;
      depth_ = 2;
      return true;
    }
    ++depth_;
    return true;
  }
  bool end_array() {
    in_array_ = false;  // arrays inside our fields' arrays are refused, so this closes it
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const json::exception& e) {
    error = "invalid JSON at byte " + std::to_string(position) + ": " +
            split_json_error(e.what()).detail;
    return false;
  }

 private:
  bool in_element() const { return in_array_ && depth_ == 2; }

  Field field_of(const std::string& name) const {
    if (!schema_.text_field.empty())
      return name == schema_.text_field ? Field::kText : Field::kOther;
    if (name == schema_.ids_field) return Field::kIds;
    if (!schema_.mask_field.empty() && name == schema_.mask_field) return Field::kMask;
    if (!schema_.labels_field.empty() && name == schema_.labels_field) return Field::kLabels;
    return Field::kOther;
  }
  const std::string& field_name() const {
    switch (field_) {
      case Field::kIds:
        return schema_.ids_field;
      case Field::kMask:
        return schema_.mask_field;
      case Field::kLabels:
        return schema_.labels_field;
      default:
        return schema_.text_field;
    }
  }
  size_t element_index() const {
    switch (field_) {
      case Field::kIds:
        return record_->ids.size();
      case Field::kMask:
        return record_->mask.size();
      default:
        return labels_.size();
    }
  }
  std::string element_name() const {
    return field_name() + "[" + std::to_string(element_index()) + "]";
  }
  std::string expected_field() const {
    switch (field_) {
      case Field::kIds:
        return "an array of token ids";
      case Field::kMask:
        return "an array of 0/1, one per token";
      case Field::kLabels:
        return "an array of labels, one per token (-100 = not a target)";
      default:
        return "a string";
    }
  }
  std::string expected_element() const {
    switch (field_) {
      case Field::kIds:
        return "an integer token id in [0, vocab_size = " + std::to_string(schema_.vocab_size) +
               ")";
      case Field::kMask:
        return "0 or 1 (or false/true)";
      default:
        return "an integer: -100 (not a target) or the token id";
    }
  }

  bool fail(std::string why) {
    error = std::move(why);
    return false;
  }
  bool missing(const std::string& name) {
    std::string listed;
    for (const std::string& k : keys_)
      listed += (listed.empty() ? "" : ", ") + in_quotes(k);
    if (num_keys_ > keys_.size()) listed += ", ...";
    return fail("missing field " + in_quotes(name) + " (the record has " +
                (listed.empty() ? std::string("no fields") : listed) + ")");
  }
  bool id_out_of_range(const std::string& shown) {
    return fail(element_name() + " = " + shown +
                " is outside [0, vocab_size = " + std::to_string(schema_.vocab_size) + ")");
  }
  bool field_is(const std::string& kind) {
    return fail(in_quotes(field_name()) + " is " + kind + "; expected " + expected_field());
  }
  bool element_is(const std::string& kind) {
    return fail(element_name() + " is " + kind + "; expected " + expected_element());
  }
  // A scalar no rule above accepted: fine inside ignored fields, an error
  // where the schema expects something else.
  bool unexpected_scalar(const std::string& kind, const std::string& shown) {
    if (depth_ == 0)
      return fail("expected one JSON object per line; this line holds " + kind + " (" + shown +
                  ")");
    if (in_element())
      return fail(element_name() + " = " + shown + ": expected " + expected_element());
    if (depth_ == 1 && field_ != Field::kOther) return field_is(kind + " (" + shown + ")");
    return true;
  }

  const JsonlSchema& schema_;
  JsonlRecord* record_ = nullptr;
  std::vector<int64_t> labels_;
  int depth_ = 0;
  Field field_ = Field::kOther;
  bool in_array_ = false;
  bool seen_ids_ = false, seen_mask_ = false, seen_labels_ = false, seen_text_ = false;
  std::vector<std::string> keys_;  // the first kListedFields of the line's object
  size_t num_keys_ = 0;
};

}  // namespace

struct JsonlDocumentReader::State {
  std::string path;
  std::string display;
  JsonlSchema schema;
  gzFile gz = nullptr;
  // Read buffer: the bytes [begin, end) are not yet consumed. A line that
  // crosses the end of the buffer is assembled in `carry`.
  std::vector<char> buffer;
  size_t begin = 0;
  size_t end = 0;
  bool eof = false;
  std::string carry;
  int64_t bytes = 0;
  int64_t lines = 0;
  int64_t blank_lines = 0;
  int64_t line = 0;
  std::unique_ptr<RecordSax> sax;

  ~State() {
    if (gz != nullptr) gzclose(gz);
  }

  void refill() {
    const int n = gzread(gz, buffer.data(), kReadBytes);
    int code = Z_OK;
    const char* message = gzerror(gz, &code);
    // zlib reports a truncated gzip stream as Z_BUF_ERROR with a short (even
    // zero-length) read rather than as -1.
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      std::string why = code == Z_ERRNO ? std::string(std::strerror(errno)) : std::string(message);
      if (why.rfind("<fd:", 0) == 0 && why.find(": ") != std::string::npos)
        why = why.substr(why.find(": ") + 2);  // zlib names the descriptor; we name the file
      if (code == Z_BUF_ERROR) why += " (a truncated gzip file?)";
      throw UsageError(display + ":" + std::to_string(lines + 1) + ": cannot read: " + why);
    }
    begin = 0;
    end = static_cast<size_t>(n);
    eof = n == 0;
  }

  // Refuses a NUL byte in `chunk`, which holds the bytes [at, at + size) of
  // the line being read: JSON text never holds one (nlohmann's parser would
  // take it for the end of the input and accept what came before), and
  // /dev/zero, named by mistake, is nothing but them.
  void check_chunk(const char* chunk, size_t size, size_t at) const {
    const void* nul = std::memchr(chunk, '\0', size);
    if (nul != nullptr)
      throw UsageError(
          display + ":" + std::to_string(lines + 1) + ": NUL byte at byte " +
          std::to_string(at + static_cast<size_t>(static_cast<const char*>(nul) - chunk)) +
          " of the line: expected JSON text (is this a binary file?)");
  }

  // The next line without its '\n'; false at the end of the input. The view
  // lives until the next call.
  bool read_line(std::string_view& out) {
    carry.clear();
    bool partial = false;
    for (;;) {
      if (begin < end) {
        const char* start = buffer.data() + begin;
        const size_t available = end - begin;
        const void* newline = std::memchr(start, '\n', available);
        if (newline != nullptr) {
          const size_t n = static_cast<size_t>(static_cast<const char*>(newline) - start);
          check_chunk(start, n, carry.size());
          begin += n + 1;
          bytes += static_cast<int64_t>(n + 1);
          if (!partial) {
            out = std::string_view(start, n);
          } else {
            carry.append(start, n);
            out = carry;
          }
          return true;
        }
        check_chunk(start, available, carry.size());
        if (carry.size() + available > kMaxLineBytes)
          throw UsageError(display + ":" + std::to_string(lines + 1) + ": line longer than " +
                           format_bytes_exact(kMaxLineBytes) +
                           ": a JSONL record is one line (is this a JSONL file?)");
        carry.append(start, available);
        bytes += static_cast<int64_t>(available);
        begin = end;
        partial = true;
      }
      if (eof) break;
      refill();
    }
    if (!partial) return false;
    out = carry;  // a last line without '\n'
    return true;
  }
};

JsonlDocumentReader::JsonlDocumentReader(const std::string& path, JsonlSchema schema)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.path = path;
  s.display = path == "-" ? "<stdin>" : path;
  s.schema = std::move(schema);
  if (s.schema.vocab_size < 1)
    throw UsageError(s.display + ": vocab_size = " + std::to_string(s.schema.vocab_size) +
                     ": must be at least 1");
  if (s.schema.text_field.empty() && s.schema.ids_field.empty())
    throw UsageError(s.display + ": no field to read: name the token-id field or the text field");
  if (!s.schema.mask_field.empty() && s.schema.mask_field == s.schema.labels_field)
    throw UsageError(s.display + ": the mask and labels fields are both \"" + s.schema.mask_field +
                     "\"");

  int fd = -1;
  if (path == "-") {
    fd = dup(STDIN_FILENO);  // gzclose closes it; standard input stays open
    if (fd < 0) throw_system_error("cannot read standard input");
  } else {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw UsageError(path + ": cannot open: " + std::strerror(errno));
    struct stat info {};
    if (fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
      close(fd);
      throw UsageError(path + ": is a folder; expected a JSONL file");
    }
  }
  s.gz = gzdopen(fd, "rb");
  if (s.gz == nullptr) {
    close(fd);
    throw InternalError(s.display + ": cannot start reading (zlib: out of memory)");
  }
  gzbuffer(s.gz, kReadBytes);
  s.buffer.resize(kReadBytes);
  s.sax = std::make_unique<RecordSax>(s.schema);
}

JsonlDocumentReader::~JsonlDocumentReader() = default;

bool JsonlDocumentReader::next(JsonlRecord& record) {
  State& s = *state_;
  std::string_view line;
  while (s.read_line(line)) {
    ++s.lines;
    if (is_blank(line)) {
      ++s.blank_lines;
      continue;
    }
    s.line = s.lines;
    RecordSax& sax = *s.sax;
    sax.start(record);
    if (!json::sax_parse(line.begin(), line.end(), &sax) || !sax.finish())
      throw UsageError(where() + ": " + (sax.error.empty() ? "invalid JSON" : sax.error));
    return true;
  }
  return false;
}

std::string JsonlDocumentReader::where() const {
  return state_->display + ":" + std::to_string(state_->line);
}
const std::string& JsonlDocumentReader::display_path() const {
  return state_->display;
}
int64_t JsonlDocumentReader::line() const {
  return state_->line;
}
int64_t JsonlDocumentReader::lines() const {
  return state_->lines;
}
int64_t JsonlDocumentReader::blank_lines() const {
  return state_->blank_lines;
}
int64_t JsonlDocumentReader::bytes() const {
  return state_->bytes;
}

}  // namespace headroom
