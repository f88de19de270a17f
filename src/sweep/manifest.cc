#include "sweep/manifest.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_error.h"
#include "util/read_file.h"

namespace headroom {

namespace {

using nlohmann::json;

json to_json(const SlurmShape& s) {
  return json{{"nodes", s.nodes},
              {"tasks_per_node", s.tasks_per_node},
              {"gpus_per_task", s.gpus_per_task},
              {"cpus_per_task", s.cpus_per_task},
              {"time", s.time},
              {"partition", s.partition},
              {"account", s.account},
              {"options", s.options}};
}

SlurmShape slurm_from_json(const json& j) {
  SlurmShape s;
  s.nodes = j.at("nodes").get<int>();
  s.tasks_per_node = j.at("tasks_per_node").get<int>();
  s.gpus_per_task = j.at("gpus_per_task").get<int>();
  s.cpus_per_task = j.at("cpus_per_task").get<int>();
  s.time = j.at("time").get<std::string>();
  s.partition = j.at("partition").get<std::string>();
  s.account = j.at("account").get<std::string>();
  s.options = j.at("options").get<std::vector<std::string>>();
  return s;
}

json to_json(const TaskPlan& p) {
  json ranks = json::array();
  for (const RankPlan& r : p.ranks) {
    json rank{{"rank", r.rank},
              {"peak_allocated_bytes", r.peak_allocated},
              {"peak_reserved_bytes", r.peak_reserved},
              {"out_of_memory", r.out_of_memory}};
    if (r.out_of_memory) {
      rank["oom_tag"] = r.oom_tag;
      rank["oom_phase"] = r.oom_phase;
      rank["oom_step"] = r.oom_step;
      rank["oom_requested_bytes"] = r.oom_requested;
    }
    ranks.push_back(std::move(rank));
  }
  return json{{"fits", p.fits},
              {"verdict", p.verdict},
              {"capacity_bytes", p.capacity},
              {"ranks", std::move(ranks)}};
}

TaskPlan plan_from_json(const json& j) {
  TaskPlan p;
  p.fits = j.at("fits").get<bool>();
  p.verdict = j.at("verdict").get<std::string>();
  p.capacity = j.at("capacity_bytes").get<uint64_t>();
  for (const json& rank : j.at("ranks")) {
    RankPlan r;
    r.rank = rank.at("rank").get<int>();
    r.peak_allocated = rank.at("peak_allocated_bytes").get<uint64_t>();
    r.peak_reserved = rank.at("peak_reserved_bytes").get<uint64_t>();
    r.out_of_memory = rank.at("out_of_memory").get<bool>();
    if (r.out_of_memory) {
      r.oom_tag = rank.at("oom_tag").get<std::string>();
      r.oom_phase = rank.at("oom_phase").get<std::string>();
      r.oom_step = rank.at("oom_step").get<int64_t>();
      r.oom_requested = rank.at("oom_requested_bytes").get<uint64_t>();
    }
    p.ranks.push_back(std::move(r));
  }
  return p;
}

}  // namespace

void write_manifest(const std::string& dir, const SweepManifest& m) {
  json tasks = json::array();
  for (const ManifestTask& t : m.tasks) {
    json values = json::array();
    for (const auto& [key, value] : t.values)
      values.push_back(json{{"key", key}, {"value", value}});
    tasks.push_back(json{{"index", t.index},
                         {"file", t.file},
                         {"run_name", t.run_name},
                         {"run_dir", t.run_dir},
                         {"steps", t.steps},
                         {"values", std::move(values)},
                         {"in_array", t.in_array},
                         {"plan", to_json(t.plan)}});
  }
  const json j{{"manifest_version", SweepManifest::kVersion},
               {"headroom_version", m.headroom_version},
               {"created_at", m.created_at},
               {"source", m.source},
               {"dir", m.dir},
               {"workdir", m.workdir},
               {"keys", m.keys},
               {"target", m.target},
               {"slurm", to_json(m.slurm)},
               {"world_size", m.world_size},
               {"parallel", m.parallel},
               {"max_requeues", m.max_requeues},
               {"signal_lead_seconds", m.signal_lead},
               {"array", m.array},
               {"sbatch", m.sbatch},
               {"job_id", m.job_id},
               {"tasks", std::move(tasks)}};
  write_file_atomically((std::filesystem::path(dir) / "manifest.json").string(), j.dump(2) + "\n");
}

SweepManifest read_manifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  if (!std::filesystem::exists(path))
    throw UsageError(path + ": no such file: " + dir +
                     " is not a sweep folder (headroom sweep exp.toml --out DIR makes one)");
  const std::string text = read_regular_file(path, 64 << 20, "sweep manifest");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    const JsonErrorText error = split_json_error(e.what());
    throw UsageError(path + ": JSON syntax error" +
                     (error.position.empty() ? "" : " at " + error.position) + ": " + error.detail);
  } catch (const json::out_of_range& e) {
    throw_json_number_error(path, e.what());
  }
  SweepManifest m;
  try {
    if (j.at("manifest_version").get<int>() > SweepManifest::kVersion)
      throw UsageError(
          path + ": manifest_version " + std::to_string(j.at("manifest_version").get<int>()) +
          " is newer than this headroom reads (" + std::to_string(SweepManifest::kVersion) + ")");
    m.headroom_version = j.at("headroom_version").get<std::string>();
    m.created_at = j.at("created_at").get<std::string>();
    m.source = j.at("source").get<std::string>();
    m.dir = j.at("dir").get<std::string>();
    m.workdir = j.at("workdir").get<std::string>();
    m.keys = j.at("keys").get<std::vector<std::string>>();
    m.target = j.at("target").get<std::string>();
    m.slurm = slurm_from_json(j.at("slurm"));
    m.world_size = j.at("world_size").get<int>();
    m.parallel = j.at("parallel").get<int>();
    m.max_requeues = j.at("max_requeues").get<int>();
    m.signal_lead = j.at("signal_lead_seconds").get<int>();
    m.array = j.at("array").get<std::string>();
    m.sbatch = j.at("sbatch").get<std::string>();
    m.job_id = j.at("job_id").get<std::string>();
    for (const json& t : j.at("tasks")) {
      ManifestTask task;
      task.index = t.at("index").get<int>();
      task.file = t.at("file").get<std::string>();
      task.run_name = t.at("run_name").get<std::string>();
      task.run_dir = t.at("run_dir").get<std::string>();
      task.steps = t.at("steps").get<int64_t>();
      for (const json& v : t.at("values"))
        task.values.emplace_back(v.at("key").get<std::string>(), v.at("value").get<std::string>());
      task.in_array = t.at("in_array").get<bool>();
      task.plan = plan_from_json(t.at("plan"));
      m.tasks.push_back(std::move(task));
    }
  } catch (const json::exception& e) {
    throw UsageError(
        path + ": not a sweep manifest this headroom reads: " + split_json_error(e.what()).detail);
  }
  return m;
}

}  // namespace headroom
