// `headroom sweep exp.toml [--grid k=a,b] [--zip k=a,b] --out DIR [--submit]`,
// `headroom sweep status DIR`, `headroom sweep collect DIR [--csv]`
// (docs/cli.md "sweep"): tasks written and planned before any is queued,
// the job array of those that fit, and the results read back.
#include <sys/stat.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "commands.h"
#include "config/config.h"
#include "config/schema.h"
#include "parse_options.h"
#include "sweep/collect.h"
#include "sweep/manifest.h"
#include "sweep/plan_tasks.h"
#include "sweep/resolve.h"
#include "sweep/sbatch.h"
#include "sweep/sweep_spec.h"
#include "trace/records.h"
#include "util/atomic_file.h"
#include "util/bytes.h"
#include "util/error.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace headroom {

namespace {

constexpr const char* kSweepUsage =
    "usage: headroom sweep exp.toml [--grid key=v1,v2 ...] [--zip key=v1,v2 ...] [--out DIR]\n"
    "                      [--submit] [options]\n"
    "       headroom sweep status DIR\n"
    "       headroom sweep collect DIR [--csv]\n\n"
    "Writes one resolved config per task (DIR/tasks/NNN.toml), plans every task\n"
    "on the meta backend (each rank, against its device), and writes the sbatch\n"
    "job array of the tasks that fit (DIR/sweep.sbatch) and DIR/manifest.json.\n";

struct SweepOptions {
  std::string config_path;
  std::string out;
  std::vector<std::string> grid, zip, overrides;
  bool keep_unfit = false;
  bool submit = false;
  bool overwrite = false;
  int parallel = 0;
  int signal_lead = 120;
  int max_requeues = 3;
  int nodes = 0, tasks_per_node = 0, gpus_per_task = -2, cpus_per_task = 0;
  std::string time, partition, account;
};

// Output of `command` (stderr discarded) and whether it exited 0.
bool run_capture(const std::string& command, std::string& output) {
  output.clear();
  std::FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return false;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    output.append(buf, n);
  const int status = pclose(pipe);
  return status == 0;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// sacct's view of every array task; squeue's for those still queued or
// running (sacct needs Slurm's accounting database, which a small cluster
// may not run). Empty without a job id or a Slurm to ask.
std::map<int, SlurmTaskState> query_slurm(const std::string& job_id, std::string& source) {
  std::map<int, SlurmTaskState> states;
  if (job_id.empty()) return states;
  std::string text;
  if (run_capture("sacct -X -n -P -j " + shell_quote(job_id) + " -o JobID,State,ExitCode", text)) {
    states = parse_slurm_states(text, job_id);
    if (!states.empty()) source = "sacct";
  }
  if (run_capture("squeue -h -r -j " + shell_quote(job_id) + " -o '%i|%T'", text)) {
    const std::map<int, SlurmTaskState> queued = parse_slurm_states(text, job_id);
    for (const auto& [index, state] : queued)
      states[index] = state;
    if (source.empty() && !queued.empty()) source = "squeue";
  }
  return states;
}

// A column of the plan table: at least as wide as its header.
struct Column {
  std::string header;
  size_t width;
};

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string display(const std::string& toml_text) {
  if (toml_text.size() >= 2 && toml_text.front() == '"' && toml_text.back() == '"' &&
      toml_text.find_first_of("\\ ", 1) == std::string::npos)
    return toml_text.substr(1, toml_text.size() - 2);
  return toml_text;
}

// Removes what an earlier `headroom sweep` wrote into `dir` (--overwrite):
// its tasks, runs, logs and records, never files it did not make.
void clear_sweep_folder(const fs::path& dir) {
  for (const char* name : {"tasks", "runs", "status", "logs"})
    fs::remove_all(dir / name);
  for (const char* name : {"manifest.json", "sweep.sbatch"})
    fs::remove(dir / name);
}

int make_sweep(const SweepOptions& o) {
  if (o.config_path.empty())
    throw UsageError("headroom sweep: name the experiment file (headroom sweep exp.toml ...)");
  const std::string text = read_config_text(o.config_path);
  // The base first: its syntax and keys are reported as train would.
  const ExperimentConfig base =
      load_config_string(text, o.config_path, o.overrides, SweepTable::kSkip);
  SweepSpec spec = parse_sweep_table(text, o.config_path);
  add_sweep_arguments(spec, o.grid, o.zip);
  if (o.nodes) spec.slurm.nodes = o.nodes;
  if (o.tasks_per_node) spec.slurm.tasks_per_node = o.tasks_per_node;
  if (o.gpus_per_task != -2) spec.slurm.gpus_per_task = o.gpus_per_task;
  if (o.cpus_per_task) spec.slurm.cpus_per_task = o.cpus_per_task;
  if (!o.time.empty()) spec.slurm.time = o.time;
  if (!o.partition.empty()) spec.slurm.partition = o.partition;
  if (!o.account.empty()) spec.slurm.account = o.account;
  const int world_size = spec.slurm.ranks();
  if (world_size < 1 || world_size > 1024)
    throw UsageError("sweep.slurm: nodes x tasks_per_node = " + std::to_string(world_size) +
                     " ranks: expected 1..1024 (each is planned)");
  if (o.parallel < 0)
    throw UsageError("--parallel " + std::to_string(o.parallel) + ": expected >= 0");
  if (o.signal_lead < 1 || o.signal_lead > 65535)
    throw UsageError("--signal-lead " + std::to_string(o.signal_lead) +
                     ": expected 1..65535 seconds (Slurm's --signal limit)");
  if (o.max_requeues < 0 || o.max_requeues > 1000)
    throw UsageError("--max-requeues " + std::to_string(o.max_requeues) + ": expected 0..1000");

  const fs::path dir =
      fs::absolute(o.out.empty() ? fs::path("sweeps") / base.run.name : fs::path(o.out))
          .lexically_normal();
  std::error_code ec;
  if (fs::exists(dir / "manifest.json", ec) && !o.overwrite)
    throw UsageError(dir.string() +
                     ": holds a sweep already (manifest.json); --overwrite replaces it (its "
                     "tasks, runs, logs), or choose another --out");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError(dir.string() + ": --out: not a folder");

  // A requeued task resumes from its newest complete checkpoint when this
  // build knows checkpoint.resume; the value is validated with the rest.
  std::vector<std::string> train_options, extra;
  if (find_config_key("checkpoint.resume")) {
    train_options = {"--set", "checkpoint.resume=auto"};
    extra = {"checkpoint.resume=auto"};
  }
  const std::vector<SweepTask> tasks = expand_sweep(spec);
  const std::vector<ResolvedTask> resolved =
      resolve_sweep_tasks(text, o.config_path, o.overrides, tasks, (dir / "runs").string(), extra);

  if (o.overwrite) clear_sweep_folder(dir);
  fs::create_directories(dir / "tasks");
  fs::create_directories(dir / "logs");  // sbatch's --output goes there: it must exist
  fs::create_directories(dir / "status");

  SweepManifest manifest;
  manifest.headroom_version = HEADROOM_VERSION;
  manifest.created_at = utc_now_iso8601();
  manifest.source = o.config_path;
  manifest.dir = dir.string();
  manifest.workdir = fs::current_path().string();
  for (const SweepKey& k : spec.grid)
    manifest.keys.push_back(k.name);
  for (const SweepKey& k : spec.zip)
    manifest.keys.push_back(k.name);
  manifest.target = std::string(name_of(base.run.backend));
  manifest.slurm = spec.slurm;
  manifest.world_size = world_size;
  manifest.parallel = o.parallel;
  manifest.max_requeues = o.max_requeues;
  manifest.signal_lead = o.signal_lead;

  // The table: task, one column per varied key, the peak per rank, the verdict.
  std::vector<Column> columns{{"task", 4}};
  for (size_t k = 0; k < manifest.keys.size(); ++k) {
    Column c{manifest.keys[k], manifest.keys[k].size()};
    for (const ResolvedTask& r : resolved)
      c.width = std::max(c.width, display(r.task.values[k].text).size());
    columns.push_back(c);
  }
  columns.push_back({world_size > 1 ? "peak/rank (max)" : "planned peak", 15});
  std::printf(
      "headroom sweep: %zu task%s of %s%s, %d rank%s each (%d node%s x %d), planned on "
      "meta for run.backend = \"%s\"\n",
      resolved.size(), resolved.size() == 1 ? "" : "s", o.config_path.c_str(),
      spec.empty() ? " (no key varies)" : "", world_size, world_size == 1 ? "" : "s",
      spec.slurm.nodes, spec.slurm.nodes == 1 ? "" : "s", spec.slurm.tasks_per_node,
      manifest.target.c_str());
  std::string header = " ";
  for (const Column& c : columns)
    header += " " + pad(c.header, c.width);
  std::printf("%s  fits\n", header.c_str());
  std::fflush(stdout);

  std::vector<int> array_tasks;
  for (const ResolvedTask& r : resolved) {
    const std::string number = task_number(r.task.index);
    ManifestTask t;
    t.index = r.task.index;
    t.file = "tasks/" + number + ".toml";
    t.run_name = r.config.run.name;
    t.run_dir = (fs::path(r.config.run.out_dir) / r.config.run.name).string();
    t.steps = r.config.run.steps;
    for (size_t k = 0; k < r.task.keys.size(); ++k)
      t.values.emplace_back(r.task.keys[k], r.task.values[k].text);
    write_file_atomically((dir / t.file).string(),
                          "# Task " + number + " of the sweep " + dir.string() + " (from " +
                              o.config_path + "): " + r.task.describe() +
                              "\n# Resolved by `headroom sweep`; train it with `headroom train " +
                              (dir / t.file).string() + "`.\n\n" + to_toml(r.config));
    try {
      t.plan = plan_task(r.config, world_size, /*overwrite=*/true);
    } catch (const Error& e) {
      throw UsageError("task " + number + " (" + r.task.describe() + "): plan: " + e.what());
    }
    t.in_array = t.plan.fits || o.keep_unfit;
    if (t.in_array) array_tasks.push_back(t.index);
    std::string row = " ";
    row += " " + pad(number, columns[0].width);
    for (size_t k = 0; k < r.task.values.size(); ++k)
      row += " " + pad(display(r.task.values[k].text), columns[k + 1].width);
    row += " " + pad(format_bytes(t.plan.max_peak_reserved()), columns.back().width);
    row += "  " + std::string(t.plan.fits ? "yes: " : "NO: ") + t.plan.verdict;
    if (!t.plan.fits) row += o.keep_unfit ? " (kept: --keep-unfit)" : " (left out)";
    std::printf("%s\n", row.c_str());
    std::fflush(stdout);
    manifest.tasks.push_back(std::move(t));
  }

  if (!array_tasks.empty()) {
    SbatchParams p;
    p.dir = dir.string();
    p.workdir = manifest.workdir;
    p.job_name = "headroom-" + dir.filename().string();
    p.headroom = fs::read_symlink("/proc/self/exe").string();
    p.tasks = array_tasks;
    p.parallel = o.parallel;
    p.shape = spec.slurm;
    p.cuda = base.run.backend == RunSection::Backend::kCuda;
    p.signal_lead = o.signal_lead;
    p.max_requeues = o.max_requeues;
    p.train_options = train_options;
    manifest.array = array_spec(array_tasks, o.parallel);
    manifest.sbatch = (dir / "sweep.sbatch").string();
    write_file_atomically(manifest.sbatch, render_sbatch(embedded_sbatch_template(), p));
    ::chmod(manifest.sbatch.c_str(), 0755);
  }
  write_manifest(dir.string(), manifest);

  const size_t unfit = resolved.size() - array_tasks.size();
  std::printf("\nwrote %s/tasks/000..%s.toml and manifest.json", dir.string().c_str(),
              task_number(static_cast<int>(resolved.size()) - 1).c_str());
  if (array_tasks.empty()) {
    std::printf("\nno task fits: no sbatch script written (--keep-unfit queues them anyway)\n");
    return static_cast<int>(ExitCode::kOutOfMemory);
  }
  std::printf("; %s: --array=%s (%zu task%s%s)\n", manifest.sbatch.c_str(), manifest.array.c_str(),
              array_tasks.size(), array_tasks.size() == 1 ? "" : "s",
              unfit ? (", " + std::to_string(unfit) + " left out: they do not fit").c_str() : "");
  if (!o.submit) {
    std::printf("submit with: sbatch %s   (or headroom sweep ... --submit)\n",
                manifest.sbatch.c_str());
    return 0;
  }
  std::string output;
  if (!run_capture("sbatch --parsable " + shell_quote(manifest.sbatch), output))
    throw UsageError("sbatch " + manifest.sbatch +
                     " failed (is Slurm running? run it by hand to see why); the sweep is "
                     "written, submit it with sbatch");
  // --parsable prints "<job id>[;<cluster>]".
  manifest.job_id = output.substr(0, output.find_first_of(";\n"));
  write_manifest(dir.string(), manifest);
  std::printf("submitted: job %s; headroom sweep status %s\n", manifest.job_id.c_str(),
              dir.string().c_str());
  return 0;
}

int sweep_status(const std::string& dir) {
  const SweepManifest manifest = read_manifest(dir);
  std::string source;
  const std::map<int, SlurmTaskState> slurm = query_slurm(manifest.job_id, source);
  const std::vector<TaskResult> results = collect_sweep(manifest, slurm);
  std::map<std::string, int> counts;
  for (const TaskResult& r : results)
    ++counts[r.outcome];
  std::printf(
      "sweep %s: %zu tasks, %s", manifest.dir.c_str(), results.size(),
      manifest.job_id.empty()
          ? "not submitted"
          : ("job " + manifest.job_id + " (--array=" + manifest.array + "), Slurm states from " +
             (source.empty() ? "nowhere (not queued; sacct keeps no record without accounting)"
                             : source))
                .c_str());
  std::string summary;
  for (const auto& [outcome, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + outcome;
  std::printf("\n  %s\n", summary.c_str());
  for (const TaskResult& r : results) {
    std::printf("  %s  %-24s %-12s step %lld/%lld", task_number(r.index).c_str(), r.outcome.c_str(),
                r.slurm_state.empty() ? "-" : r.slurm_state.c_str(),
                static_cast<long long>(r.steps_done), static_cast<long long>(r.steps));
    if (r.attempts > 1) std::printf("  (%d attempts)", r.attempts);
    if (!r.note.empty()) std::printf("  %s", r.note.c_str());
    std::printf("\n");
  }
  return 0;
}

int sweep_collect(const std::string& dir, bool csv) {
  const SweepManifest manifest = read_manifest(dir);
  std::string source;
  const std::vector<TaskResult> results =
      collect_sweep(manifest, query_slurm(manifest.job_id, source));
  if (csv) {
    std::fputs(format_results_csv(manifest, results).c_str(), stdout);
    return 0;
  }
  std::printf("sweep %s (%s): %zu tasks\n", manifest.dir.c_str(), manifest.source.c_str(),
              results.size());
  std::fputs(format_results_table(manifest, results).c_str(), stdout);
  for (const TaskResult& r : results)
    if (!r.note.empty())
      std::printf("  task %s: %s\n", task_number(r.index).c_str(), r.note.c_str());
  return 0;
}

}  // namespace

int sweep_command(const std::vector<std::string>& args) {
  if (!args.empty() && (args.front() == "status" || args.front() == "collect")) {
    const std::string sub = args.front();
    std::string dir;
    bool csv = false;
    po::options_description visible("options");
    visible.add_options()("help,h", "print this help");
    if (sub == "collect") visible.add_options()("csv", po::bool_switch(&csv), "print CSV");
    po::options_description hidden;
    hidden.add_options()("dir", po::value<std::string>(&dir));
    po::positional_options_description positional;
    positional.add("dir", 1);
    const po::variables_map vm =
        parse_command_line(std::vector<std::string>(args.begin() + 1, args.end()), visible, hidden,
                           positional, "sweep " + sub);
    if (vm.count("help")) {
      std::cout << "usage: headroom sweep " << sub << " DIR\n\n"
                << (sub == "status"
                        ? "Each task's state: Slurm's (sacct, else squeue) and its run folder's.\n"
                        : "One row per task: varied keys, outcome by exit code, steps, final "
                          "loss,\ntokens/s, planned and measured peak.\n")
                << "\n"
                << visible << "\n";
      return 0;
    }
    if (dir.empty()) throw UsageError("headroom sweep " + sub + ": name the sweep folder");
    return sub == "status" ? sweep_status(dir) : sweep_collect(dir, csv);
  }

  SweepOptions o;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "grid", po::value<std::vector<std::string>>(&o.grid)->composing(),
      "vary a key over values, every combination with the other grid keys: "
      "--grid zero.stage=2,3 (repeatable; replaces the file's list for that key)")(
      "zip", po::value<std::vector<std::string>>(&o.zip)->composing(),
      "vary keys together, value i with value i: --zip optimizer.lr=1e-3,3e-4 --zip "
      "schedule.warmup_steps=10,20 (equal lengths; replaces the file's [sweep.zip])")(
      "set", po::value<std::vector<std::string>>(&o.overrides)->composing(),
      "override a key of the base experiment for every task (as train --set)")(
      "out", po::value<std::string>(&o.out), "the sweep folder (default sweeps/<run.name>)")(
      "keep-unfit", po::bool_switch(&o.keep_unfit),
      "put tasks whose plan does not fit into the job array too")(
      "parallel", po::value<int>(&o.parallel)->default_value(0),
      "at most this many array tasks at once (--array=...%P); 0 = no cap")(
      "signal-lead", po::value<int>(&o.signal_lead)->default_value(120),
      "seconds before the time limit at which Slurm sends SIGUSR2 (--signal=USR2@S)")(
      "max-requeues", po::value<int>(&o.max_requeues)->default_value(3),
      "times a task stopped by the signal requeues itself")("nodes", po::value<int>(&o.nodes),
                                                            "nodes per task (sweep.slurm.nodes)")(
      "tasks-per-node", po::value<int>(&o.tasks_per_node),
      "ranks per node (sweep.slurm.tasks_per_node)")(
      "gpus-per-task", po::value<int>(&o.gpus_per_task),
      "GPUs per rank (sweep.slurm.gpus_per_task; default 1 for run.backend = \"cuda\")")(
      "cpus-per-task", po::value<int>(&o.cpus_per_task),
      "CPUs per rank (sweep.slurm.cpus_per_task)")("time", po::value<std::string>(&o.time),
                                                   "time limit per task (sweep.slurm.time)")(
      "partition", po::value<std::string>(&o.partition), "sweep.slurm.partition")(
      "account", po::value<std::string>(&o.account), "sweep.slurm.account")(
      "submit", po::bool_switch(&o.submit), "run sbatch and record the job id in the manifest")(
      "overwrite", po::bool_switch(&o.overwrite),
      "replace an earlier sweep in the folder (its tasks, runs, logs)");
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(&o.config_path));
  po::positional_options_description positional;
  positional.add("config", 1);
  const po::variables_map vm = parse_command_line(args, visible, hidden, positional, "sweep");
  if (vm.count("help")) {
    std::cout << kSweepUsage << "\n" << visible << "\n";
    return 0;
  }
  if (vm.count("nodes") && o.nodes < 1) throw UsageError("--nodes: expected >= 1");
  if (vm.count("tasks-per-node") && o.tasks_per_node < 1)
    throw UsageError("--tasks-per-node: expected >= 1");
  if (vm.count("gpus-per-task") && o.gpus_per_task < 0)
    throw UsageError("--gpus-per-task: expected >= 0");
  if (vm.count("cpus-per-task") && o.cpus_per_task < 1)
    throw UsageError("--cpus-per-task: expected >= 1");
  return make_sweep(o);
}

}  // namespace headroom
