// `headroom data convert IN.jsonl OUT.h5 --vocab N`: the options of
// convert_jsonl_to_dataset() (data/convert.h: JSONL of token ids, or of text
// through the byte-level BPE tokenizer, into a token dataset, streaming, all
// or nothing); this file parses them and prints the summary.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "data/convert.h"
#include "data_tools.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/process_memory.h"

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

// `headroom data convert ...` as typed, for the created_by attribute.
std::string command_line(const std::vector<std::string>& args) {
  std::string line = std::string("headroom ") + HEADROOM_VERSION + " data convert";
  for (const std::string& a : args)
    line += a.find_first_of(" \t'\"") == std::string::npos ? " " + a : " '" + a + "'";
  return line;
}

void print_summary(const ConvertOptions& o, bool json, const ConvertSummary& c) {
  const bool with_mask = c.with_mask;
  const double seconds = c.seconds;
  const double megabytes = static_cast<double>(c.bytes) / 1e6;
  const double mb_per_s = seconds > 0 ? megabytes / seconds : 0;
  const double tokens_per_s = seconds > 0 ? static_cast<double>(c.tokens) / seconds : 0;
  const double coverage =
      c.tokens > 0 ? static_cast<double>(c.mask_ones) / static_cast<double>(c.tokens) : 0;
  const uint64_t peak_rss = peak_resident_bytes();
  if (json) {
    nlohmann::ordered_json j;
    j["input"] = c.input;
    j["output"] = c.output;
    j["lines"] = c.lines;
    j["blank_lines"] = c.blank_lines;
    j["bytes"] = c.bytes;
    j["documents"] = c.documents;
    j["tokens"] = c.tokens;
    j["skipped_empty"] = c.skipped_empty;
    j["dropped_short"] = c.dropped_short;
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
  std::printf("wrote %s: %lld documents, %lld tokens, vocab %lld\n", c.output.c_str(),
              static_cast<long long>(c.documents), static_cast<long long>(c.tokens),
              static_cast<long long>(o.schema.vocab_size));
  std::printf(
      "  read       %s: %lld lines, %.1f MB; skipped %lld blank lines, %lld empty "
      "documents; dropped %lld shorter than --min-tokens %lld\n",
      c.input.c_str(), static_cast<long long>(c.lines), megabytes,
      static_cast<long long>(c.blank_lines), static_cast<long long>(c.skipped_empty),
      static_cast<long long>(c.dropped_short), static_cast<long long>(o.min_tokens));
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

}  // namespace

int data_convert(const std::vector<std::string>& args) {
  ConvertOptions o;
  bool json = false;
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
      "text-field", po::value<std::string>(&o.schema.text_field),
      "tokenize this text field instead of reading ids; needs --tokenizer")(
      "tokenizer", po::value<std::string>(&o.tokenizer_path),
      "HuggingFace tokenizer.json (or its folder) for --text-field")(
      "overwrite", po::bool_switch(&o.overwrite), "replace an existing OUT.h5 (only on success)")(
      "json", po::bool_switch(&json), "print the summary as one JSON object");
  po::options_description hidden;
  hidden.add_options()("in", po::value<std::string>(&o.in))("out", po::value<std::string>(&o.out));
  po::positional_options_description positional;
  positional.add("in", 1).add("out", 1);
  po::variables_map vm;
  if (!parse_data_options("convert", kUsage, args, visible, hidden, positional, vm)) return 0;

  o.created_by = command_line(args);
  const ConvertSummary summary = convert_jsonl_to_dataset(o);
  print_summary(o, json, summary);
  return 0;
}

}  // namespace headroom
