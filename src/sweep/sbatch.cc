#include "sweep/sbatch.h"

#include <map>

#include "embedded_sbatch.h"
#include "sweep/resolve.h"
#include "util/error.h"

namespace headroom {

namespace {

// #SBATCH lines are not shell: a value cannot be quoted there.
void check_plain(const std::string& what, const std::string& value) {
  if (value.find_first_of(" \t\r\n'\"\\$`") != std::string::npos)
    throw UsageError(what + " \"" + value +
                     "\": an sbatch script line cannot hold whitespace, quotes, '$' or '\\' in "
                     "it; use a path without them");
}

}  // namespace

std::string array_spec(const std::vector<int>& tasks, int parallel) {
  std::string out;
  for (size_t i = 0; i < tasks.size();) {
    size_t j = i;
    while (j + 1 < tasks.size() && tasks[j + 1] == tasks[j] + 1)
      ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(tasks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(tasks[j]);
    i = j + 1;
  }
  if (parallel > 0 && !out.empty()) out += "%" + std::to_string(parallel);
  return out;
}

std::string render_sbatch(std::string_view template_text, const SbatchParams& p) {
  check_plain("the sweep folder", p.dir);
  check_plain("the working directory", p.workdir);
  check_plain("the headroom binary", p.headroom);
  check_plain("the job name", p.job_name);
  for (const std::string* value : {&p.shape.time, &p.shape.partition, &p.shape.account})
    check_plain("the sbatch value", *value);
  for (const std::string& option : p.shape.options) {
    if (option.find_first_of("\r\n") != std::string::npos)
      throw UsageError("sweep.slurm.options \"" + option + "\": one line per option");
  }
  std::string resources;
  const int gpus = p.shape.gpus_per_task >= 0 ? p.shape.gpus_per_task : (p.cuda ? 1 : 0);
  if (gpus > 0) resources += "#SBATCH --gpus-per-task=" + std::to_string(gpus) + "\n";
  if (p.shape.cpus_per_task > 0)
    resources += "#SBATCH --cpus-per-task=" + std::to_string(p.shape.cpus_per_task) + "\n";
  if (!p.shape.time.empty()) resources += "#SBATCH --time=" + p.shape.time + "\n";
  if (!p.shape.partition.empty()) resources += "#SBATCH --partition=" + p.shape.partition + "\n";
  if (!p.shape.account.empty()) resources += "#SBATCH --account=" + p.shape.account + "\n";
  std::string options;
  for (const std::string& option : p.shape.options)
    options += "#SBATCH " + option + "\n";
  std::string environment;
  if (p.shape.cpus_per_task > 0)
    environment = "# One thread per CPU Slurm gave the task.\nexport OMP_NUM_THREADS=" +
                  std::to_string(p.shape.cpus_per_task) + "\n";
  std::string train_options;
  for (const std::string& o : p.train_options) {
    check_plain("the train option", o);
    train_options += " " + o;
  }
  std::string array_tasks;
  for (int t : p.tasks)
    array_tasks += (array_tasks.empty() ? "" : " ") + task_number(t);

  const std::map<std::string, std::string, std::less<>> values = {
      {"dir", p.dir},
      {"workdir", p.workdir},
      {"job_name", p.job_name},
      {"headroom", p.headroom},
      {"array", array_spec(p.tasks, p.parallel)},
      {"array_tasks", array_tasks},
      {"nodes", std::to_string(p.shape.nodes)},
      {"tasks_per_node", std::to_string(p.shape.tasks_per_node)},
      {"resources", resources},
      {"options", options},
      {"environment", environment},
      {"signal_lead", std::to_string(p.signal_lead)},
      {"max_requeues", std::to_string(p.max_requeues)},
      {"train_options", train_options},
  };
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = template_text.find("{{", pos);
    if (open == std::string_view::npos) break;
    const size_t close = template_text.find("}}", open);
    if (close == std::string_view::npos)
      throw InternalError("sbatch template: \"{{\" without \"}}\"");
    out += template_text.substr(pos, open - pos);
    const std::string_view name = template_text.substr(open + 2, close - open - 2);
    auto it = values.find(name);
    if (it == values.end())
      throw InternalError("sbatch template: unknown placeholder {{" + std::string(name) + "}}");
    out += it->second;
    pos = close + 2;
  }
  out += template_text.substr(pos);
  return out;
}

std::string_view embedded_sbatch_template() {
  return kSweepSbatchTemplate;
}

}  // namespace headroom
