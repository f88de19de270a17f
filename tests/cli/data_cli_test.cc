// `headroom data synth | inspect | batches` end to end: the real binary in a
// scratch folder, its numbers checked against each other and the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_harness.h"
#include "data/token_dataset.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace headroom {
namespace {

using testing::Result;
using testing::slurp;

class DataCli : public testing::ScratchFolder {
 protected:
  Result run(const std::string& args) { return run_headroom("data " + args); }
  // A corpus the quickstart's tiny model (vocab 512) can embed.
  void synth(const std::string& name, const std::string& extra = "") {
    Result r = run("synth " + name +
                   " --vocab 512 --documents 120 --lengths histogram:60-80:3,220-260:1 " + extra);
    ASSERT_EQ(r.code, 0) << r.err;
  }
};

TEST_F(DataCli, SynthThenInspectAgree) {
  Result s = run("synth a.h5 --vocab 512 --documents 120 --lengths histogram:60-80:3,220-260:1");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("120 documents"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("entropy rate"), std::string::npos) << s.out;

  const TokenDataset dataset = TokenDataset::open((dir_ / "a.h5").string(), 0);
  ASSERT_EQ(dataset.num_documents(), 120);
  EXPECT_NE(s.out.find(std::to_string(dataset.num_tokens()) + " tokens"), std::string::npos)
      << s.out;

  Result r = run("inspect a.h5 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["documents"], 120);
  EXPECT_EQ(j["tokens"], dataset.num_tokens());
  EXPECT_DOUBLE_EQ(j["attributes"]["source_entropy_nats"].get<double>(),
                   *dataset.attributes().source_entropy_nats);
  EXPECT_EQ(j["attributes"]["vocab_size"], 512);
  EXPECT_GE(j["lengths"]["p0"].get<int64_t>(), 60);
  EXPECT_LE(j["lengths"]["p100"].get<int64_t>(), 260);
  EXPECT_LE(j["lengths"]["p50"].get<int64_t>(), j["lengths"]["p90"].get<int64_t>());
  int64_t histogram_documents = 0;
  for (const json& b : j["length_histogram"])
    histogram_documents += b["documents"].get<int64_t>();
  EXPECT_EQ(histogram_documents, 120);
  EXPECT_GT(j["vocab"]["distinct"].get<int64_t>(), 0);
  EXPECT_LE(j["vocab"]["distinct"].get<int64_t>(), 512);
  EXPECT_FALSE(j["loss_mask"]["present"].get<bool>());  // order 1 writes no mask

  Result text = run("inspect a.h5");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("documents  120"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("source_entropy_nats"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("p99"), std::string::npos) << text.out;
}

TEST_F(DataCli, InspectReportsTheLossMaskOfHigherOrders) {
  ASSERT_EQ(run("synth b.h5 --vocab 64 --order 2 --documents 10 --lengths fixed:50").code, 0);
  Result r = run("inspect b.h5 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["loss_mask"]["present"].get<bool>());
  // The first k = 2 tokens of each document are context, not targets.
  EXPECT_EQ(j["loss_mask"]["targets_kept"], 10 * 48);
  EXPECT_EQ(j["lengths"]["p0"], 50);
  EXPECT_EQ(j["lengths"]["p100"], 50);
}

TEST_F(DataCli, EveryLengthSpecParses) {
  for (const char* spec :
       {"fixed:40", "uniform:10-30", "lognormal:50,0.5,10-200", "histogram:10-20:3,40-50:1"}) {
    SCOPED_TRACE(spec);
    Result r =
        run(std::string("synth x.h5 --overwrite --vocab 100 --documents 5 --lengths ") + spec);
    EXPECT_EQ(r.code, 0) << r.err;
  }
}

TEST_F(DataCli, BadInputIsAUsageErrorNamingIt) {
  for (const char* spec : {"fixed", "fixed:x", "uniform:5-3", "uniform:5", "lognormal:1,2",
                           "histogram:10-20", "histogram:10-20:w", "zipf:3"}) {
    SCOPED_TRACE(spec);
    Result r = run(std::string("synth x.h5 --vocab 100 --lengths ") + spec);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--lengths"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "x.h5"));
  }
  Result r = run("synth x.h5 --vocab 100 --bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bogus"), std::string::npos) << r.err;
  r = run("synth x.h5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--vocab"), std::string::npos) << r.err;
  r = run("inspect missing.h5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.h5"), std::string::npos) << r.err;
  r = run("inspect a.h5 --frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
  r = run("batches --set data.path=missing.h5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.h5: no such file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "missing.h5")) << "batches never synthesizes";
  r = run("batches missing.toml");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.toml"), std::string::npos) << r.err;
  r = run("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
  EXPECT_EQ(run("").code, 2);
}

TEST_F(DataCli, SynthNeverReplacesAFileWithoutOverwrite) {
  synth("a.h5", "--seed 1");
  const std::string before = slurp(dir_ / "a.h5");
  Result r = run("synth a.h5 --vocab 512 --seed 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("a.h5: exists"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir_ / "a.h5"), before);
  ASSERT_EQ(run("synth a.h5 --vocab 512 --documents 7 --seed 2 --overwrite").code, 0);
  EXPECT_EQ(TokenDataset::open((dir_ / "a.h5").string(), 0).num_documents(), 7);
}

TEST_F(DataCli, BatchesStayWithinTheBudgetExceptOversizeDocuments) {
  synth("a.h5");
  const int64_t budget = 200;  // below the 220-260 bucket: those documents get bins of their own
  Result r =
      run("batches --set data.path=a.h5 --set batch.max_tokens_per_micro_batch=200 "
          "--set batch.grad_accum=2 --steps 12 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["steps"].size(), 12u);
  const TokenDataset dataset = TokenDataset::open((dir_ / "a.h5").string(), 0);
  int oversize = 0;
  for (const json& step : j["steps"]) {
    ASSERT_EQ(step["ranks"].size(), 1u);
    ASSERT_EQ(step["ranks"][0]["micro_batches"].size(), 2u);
    for (const json& b : step["ranks"][0]["micro_batches"]) {
      const int64_t tokens = b["tokens"].get<int64_t>();
      // The documents by index: their lengths and the padding make the tokens.
      ASSERT_EQ(b["document_indices"].size(), b["documents"].get<size_t>());
      int64_t lengths = 0;
      for (const json& d : b["document_indices"])
        lengths += dataset.document_length(d.get<int64_t>());
      EXPECT_EQ(lengths + b["padding"].get<int64_t>(), tokens);
      // The quickstart pads a bin to a multiple of 64, never past the
      // budget nor a lone oversize document.
      const int64_t real = tokens - b["padding"].get<int64_t>();
      EXPECT_EQ(tokens, std::min((real + 63) / 64 * 64, std::max(real, budget)));
      EXPECT_LE(b["longest"].get<int64_t>(), tokens);
      if (tokens > budget) {
        ++oversize;
        EXPECT_EQ(b["documents"], 1) << "only a lone document may exceed the budget";
      }
    }
  }
  EXPECT_GT(oversize, 0) << "a quarter of the documents are over the budget";

  // Truncation caps samples, so no bin exceeds the budget.
  r =
      run("batches --set data.path=a.h5 --set batch.max_tokens_per_micro_batch=200 "
          "--set data.max_sample_tokens=150 --steps 20 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  int64_t truncated = 0;
  const json truncating = json::parse(r.out);
  for (const json& step : truncating["steps"])
    for (const json& b : step["ranks"][0]["micro_batches"]) {
      EXPECT_LE(b["tokens"].get<int64_t>(), budget);
      truncated += b["truncated"].get<int64_t>();
    }
  EXPECT_GT(truncated, 0);
}

TEST_F(DataCli, BatchesDealsEachStepToEveryRankAndBalancesTheTokens) {
  synth("a.h5");
  Result one = run("batches --set data.path=a.h5 --set batch.grad_accum=4 --steps 5 --json");
  Result four = run("batches --set data.path=a.h5 --world-size 4 --steps 5 --json");
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(four.code, 0) << four.err;
  const json a = json::parse(one.out);
  const json b = json::parse(four.out);
  EXPECT_EQ(b["world_size"], 4);
  ASSERT_EQ(b["steps"].size(), 5u);
  for (size_t s = 0; s < 5; ++s) {
    const json& step = b["steps"][s];
    ASSERT_EQ(step["ranks"].size(), 4u);
    int64_t most = 0, least = INT64_MAX, total = 0, largest = 0;
    for (const json& rank : step["ranks"]) {
      ASSERT_EQ(rank["micro_batches"].size(), 1u) << "grad_accum micro-batches per rank";
      const int64_t tokens = rank["tokens"].get<int64_t>();
      most = std::max(most, tokens);
      least = std::min(least, tokens);
      total += tokens;
      largest = std::max(largest, rank["micro_batches"][0]["tokens"].get<int64_t>());
    }
    EXPECT_EQ(step["max_rank_tokens"], most);
    EXPECT_LE(most - least, largest);
    // The same bins as one rank accumulating four micro-batches.
    EXPECT_EQ(a["steps"][s]["ranks"][0]["tokens"], total) << "step " << s + 1;
  }
  EXPECT_GT(b["total"]["rank_balance"].get<double>(), 0.5);
  EXPECT_LE(b["total"]["rank_balance"].get<double>(), 1.0);

  Result text = run("batches --set data.path=a.h5 --world-size 2 --steps 2");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("rank 1 micro-batch 0"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("rank balance"), std::string::npos) << text.out;
  EXPECT_EQ(run("batches --set data.path=a.h5 --world-size 0").code, 2);
}

TEST_F(DataCli, BatchesShowsThePaddingOfPaddedMode) {
  synth("a.h5");
  Result r =
      run("batches --set data.path=a.h5 --set batch.mode=padded --set batch.micro_batch_size=4 "
          "--steps 6 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["mode"], "padded");
  int64_t padding = 0;
  for (const json& step : j["steps"])
    for (const json& b : step["ranks"][0]["micro_batches"]) {
      EXPECT_EQ(b["documents"], 4);
      // The quickstart's batch.pad_to_multiple_of = 64 rounds rows up.
      const int64_t longest = b["longest"].get<int64_t>();
      EXPECT_EQ(b["tokens"].get<int64_t>(), 4 * ((longest + 63) / 64 * 64));
      padding += b["padding"].get<int64_t>();
    }
  EXPECT_GT(padding, 0) << "lengths 60-80 and 220-260 mixed: rows need padding";
  EXPECT_EQ(j["total"]["padding"], padding);
  EXPECT_EQ(j["pad_to_multiple_of"], 64);

  for (const auto& [multiple, tokens] : {std::pair{0, 200}, std::pair{64, 256}}) {
    r =
        run("batches --set data.path=a.h5 --set batch.mode=padded --set batch.micro_batch_size=2 "
            "--set batch.seq_len=100 --set batch.pad_to_multiple_of=" +
            std::to_string(multiple) + " --steps 3 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json fixed = json::parse(r.out);  // named: a range-for over a temporary's member dangles
    ASSERT_EQ(fixed["steps"].size(), 3u);
    for (const json& step : fixed["steps"])
      for (const json& b : step["ranks"][0]["micro_batches"])
        EXPECT_EQ(b["tokens"], tokens) << "two rows of seq_len, rounded up to " << multiple;
  }
  r =
      run("batches --set data.path=a.h5 --set batch.mode=padded --set batch.micro_batch_size=2 "
          "--steps 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 padded rows per micro-batch, as long as the longest, padded to a "
                       "multiple of 64 tokens"),
            std::string::npos)
      << r.out;
}

// Two length groups, 60-80 and 220-260: the suggested boundaries separate
// them, and padding each row to its bucket wastes far less than padding all
// to the longest.
TEST_F(DataCli, InspectSuggestsBucketBoundaries) {
  synth("a.h5");
  Result r = run("inspect a.h5 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& s = j["suggested_buckets"];
  const std::vector<int64_t> boundaries = s["boundaries"].get<std::vector<int64_t>>();
  ASSERT_FALSE(boundaries.empty());
  EXPECT_TRUE(std::is_sorted(boundaries.begin(), boundaries.end()));
  EXPECT_EQ(boundaries.back(), j["lengths"]["p100"].get<int64_t>());
  EXPECT_LE(boundaries.front(), 80) << "the short group's own bucket";
  int64_t documents = 0;
  for (const json& d : s["documents"])
    documents += d.get<int64_t>();
  EXPECT_EQ(documents, 120);
  EXPECT_LT(s["padding_fraction"].get<double>(), s["padding_fraction_unbucketed"].get<double>());
  EXPECT_GT(s["padding_fraction_unbucketed"].get<double>(), 0.3);
  r = run("inspect a.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("batch.buckets = ["), std::string::npos) << r.out;
}

// Lengths 60-80 and 220-260 (synth): with buckets [128, 512] each
// micro-batch holds one bucket's documents, as many rows as fit 1024 tokens.
TEST_F(DataCli, BatchesShowsTheBucketOfEachMicroBatch) {
  synth("a.h5");
  const std::string set =
      "batches --set data.path=a.h5 --set batch.mode=padded --set 'batch.buckets=[128, 512]'"
      " --set batch.max_tokens_per_micro_batch=1024 --steps 8";
  Result r = run(set + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["buckets"], json::array({128, 512}));
  EXPECT_EQ(j["pad_to"], "bucket");
  std::set<int64_t> seen;
  for (const json& step : j["steps"])
    for (const json& b : step["ranks"][0]["micro_batches"]) {
      const int64_t bucket = b["bucket"].get<int64_t>();
      seen.insert(bucket);
      const int64_t width = bucket == 0 ? 128 : 512;
      EXPECT_EQ(b["width"], width);
      EXPECT_EQ(b["tokens"].get<int64_t>(), b["documents"].get<int64_t>() * width);
      EXPECT_LE(b["tokens"].get<int64_t>(), 1024);
      EXPECT_LE(b["longest"].get<int64_t>(), width);
    }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1})) << "both buckets within 8 steps";

  r = run(set);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 length buckets (128, 512 tokens) under 1024 tokens"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(bucket 1: <= 512 tokens, rows of 512)"), std::string::npos) << r.out;
}

TEST_F(DataCli, BatchesDefaultsToRunStepsCappedAtTwenty) {
  synth("a.h5");
  Result r = run("batches --set data.path=a.h5 --json");  // quickstart: run.steps = 150
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["steps"].size(), 20u);
  r = run("batches --set data.path=a.h5 --set run.steps=3 --set schedule.warmup_steps=1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["steps"].size(), 3u);
  std::ofstream(dir_ / "exp.toml")
      << "[data]\npath = \"a.h5\"\n[run]\nsteps = 2\n[schedule]\nwarmup_steps = 1\n";
  r = run("batches exp.toml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step 2 (epoch 0)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step 3 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("padding 0"), std::string::npos) << r.out;
}

TEST_F(DataCli, EveryToolHasHelp) {
  for (const char* args : {"--help", "synth --help", "inspect --help", "batches --help"}) {
    SCOPED_TRACE(args);
    Result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("usage: headroom data"), std::string::npos) << r.out;
  }
}

// --- hostile input (issue 11): every refusal is exit 2 naming the place ------

// Every file under `dir`, with its bytes: "nothing already written changed".
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != "out.txt" &&
        entry.path().filename() != "err.txt")
      files[entry.path().string()] = slurp(entry.path());
  return files;
}

TEST_F(DataCli, BatchesFlagsAreBounded) {
  synth("a.h5");
  for (const char* flags : {"--steps 99999999999", "--steps 100001", "--steps 0", "--steps=-3"}) {
    SCOPED_TRACE(flags);
    Result r = run(std::string("batches --set data.path=a.h5 ") + flags);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--steps"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("1..100000"), std::string::npos) << r.err;
  }
  Result over = run("batches --set data.path=a.h5 --steps 999999999999999999999");
  EXPECT_EQ(over.code, 2) << over.err;
  EXPECT_NE(over.err.find("--steps"), std::string::npos) << over.err;
  for (const char* flags : {"--world-size 100000", "--world-size 0", "--world-size=-1"}) {
    SCOPED_TRACE(flags);
    Result r = run(std::string("batches --set data.path=a.h5 ") + flags);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--world-size"), std::string::npos) << r.err;
  }
  Result help = run("batches --help");
  EXPECT_NE(help.out.find("1..100000"), std::string::npos) << help.out;
  EXPECT_EQ(run("batches --set data.path=a.h5 --steps 100000 --set run.steps=1 "
                "--set schedule.warmup_steps=0 --json")
                .code,
            0);
}

TEST_F(DataCli, BatchesRefuseADatasetWithNothingToLearn) {
  ASSERT_EQ(run("synth one.h5 --vocab 512 --documents 5 --lengths fixed:1").code, 0);
  Result r = run("batches --set data.path=one.h5");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("one.h5: no document has 2 or more tokens"), std::string::npos) << r.err;
}

TEST_F(DataCli, SynthFlagsAreBoundedAndNamed) {
  for (const auto& [flags, named] : std::vector<std::pair<std::string, std::string>>{
           {"--vocab 0", "--vocab 0"},
           {"--vocab 99999999999", "--vocab 99999999999"},
           {"--vocab 100 --branching 101", "--branching 101"},
           {"--vocab 100 --order 0", "--order 0"},
           {"--vocab 100 --concentration inf", "--concentration"},
           {"--vocab 100 --concentration nan", "--concentration"},
           {"--vocab 100 --documents 0", "--documents 0"},
           {"--vocab 100 --documents 99999999999", "--documents 99999999999"},
           {"--vocab 100 --lengths fixed:99999999999", "--lengths \"fixed:99999999999\""},
           {"--vocab 100 --lengths uniform:1-99999999999999999999", "--lengths"},
       }) {
    SCOPED_TRACE(flags);
    Result r = run("synth x.h5 " + flags);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "x.h5"));
  }
}

TEST_F(DataCli, SynthRefusesAFolderAsOutputAndKeepsIt) {
  fs::create_directories(dir_ / "out.h5");
  write("out.h5/keep.txt", "precious");
  const auto before = snapshot(dir_);
  for (const char* extra : {"", " --overwrite"}) {
    Result r = run(std::string("synth out.h5 --vocab 100 --documents 3") + extra);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("out.h5: is a folder"), std::string::npos) << r.err;
  }
  EXPECT_EQ(snapshot(dir_), before);
}

TEST_F(DataCli, SynthMakesAMissingOutputFolder) {
  Result r = run("synth results/data/x.h5 --vocab 100 --documents 3 --lengths fixed:8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(dir_ / "results/data/x.h5"));
  write("file", "not a folder");
  const auto before = snapshot(dir_);
  Result blocked = run("synth file/x.h5 --vocab 100 --documents 3");
  EXPECT_EQ(blocked.code, 2) << blocked.err;
  EXPECT_NE(blocked.err.find("file/x.h5: Not a directory"), std::string::npos) << blocked.err;
  EXPECT_EQ(snapshot(dir_), before);
}

TEST_F(DataCli, ReportNamesALoopOrAnOverlongArgument) {
  fs::create_symlink("loop", dir_ / "loop");
  Result loop = run_headroom("report loop");
  EXPECT_EQ(loop.code, 2) << loop.err;
  EXPECT_NE(loop.err.find("loop: Too many levels of symbolic links"), std::string::npos)
      << loop.err;
  const std::string long_name(5000, 'n');
  Result overlong = run_headroom("report " + long_name);
  EXPECT_EQ(overlong.code, 2) << overlong.err;
  EXPECT_NE(overlong.err.find(long_name.substr(0, 200) + "... (5000 characters)"),
            std::string::npos)
      << overlong.err.substr(0, 400);
  EXPECT_NE(overlong.err.find("File name too long"), std::string::npos) << overlong.err.size();
  EXPECT_LT(overlong.err.size(), 1000u) << "the whole name is not echoed";
}

TEST_F(DataCli, BatchesNamesADataPathLoop) {
  fs::create_symlink("loop.h5", dir_ / "loop.h5");
  Result r = run("batches --set data.path=loop.h5");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("data.path = loop.h5: Too many levels of symbolic links"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace headroom
