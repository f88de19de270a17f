// A shared library loaded at run time (dlopen), for the parts of CUDA that a
// headroom binary must not need at load time: cuBLASLt and NCCL are opened
// only by a cuda run, so the same binary starts on a machine without them.
// Opened once and never closed: its entry points live in process-long tables.
#pragma once

#include <string>
#include <string_view>

namespace headroom {

class SharedLibrary {
 public:
  // dlopen(file, RTLD_NOW | RTLD_LOCAL). Throws UsageError
  // "<user>: cannot load <file> (<dlerror>); <remedy>".
  SharedLibrary(std::string file, std::string_view user, std::string_view remedy);

  // Sets `entry` to the symbol `name`. Throws UsageError "<file>: no entry
  // point <name> (<dlerror>): <too_old>" when the library lacks it.
  template <typename Function>
  void find(Function& entry, const char* name, std::string_view too_old) const {
    entry = reinterpret_cast<Function>(symbol(name, too_old));
  }

  // Sets `entry` to the symbol `name`, or to null when the library lacks it:
  // an entry point only one feature needs (the caller refuses that feature
  // by name instead of every use of the library).
  template <typename Function>
  void find_if_present(Function& entry, const char* name) const {
    entry = reinterpret_cast<Function>(symbol_if_present(name));
  }

  const std::string& file() const { return file_; }

 private:
  void* symbol(const char* name, std::string_view too_old) const;
  void* symbol_if_present(const char* name) const;

  std::string file_;
  void* handle_ = nullptr;
};

}  // namespace headroom
