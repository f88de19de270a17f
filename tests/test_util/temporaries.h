// The temporaries util/atomic_file.h leaves beside a file while it is being
// written ("<name>.tmp-<pid>-<n>"): what the "no temporary left behind"
// checks of every writer look for.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace headroom::testing {

// Names of the files beside `path` whose name is path's name + ".tmp-",
// sorted; empty when the folder does not exist.
inline std::vector<std::string> temporaries_of(const std::filesystem::path& path) {
  const std::string prefix = path.filename().string() + ".tmp-";
  std::filesystem::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace headroom::testing
