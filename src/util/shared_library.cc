#include "util/shared_library.h"

#include <dlfcn.h>

#include <utility>

#include "util/error.h"

namespace headroom {

SharedLibrary::SharedLibrary(std::string file, std::string_view user, std::string_view remedy)
    : file_(std::move(file)) {
  handle_ = dlopen(file_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr)
    throw UsageError(std::string(user) + ": cannot load " + file_ + " (" + dlerror() + "); " +
                     std::string(remedy));
}

void* SharedLibrary::symbol(const char* name, std::string_view too_old) const {
  void* found = dlsym(handle_, name);
  if (found == nullptr)
    throw UsageError(file_ + ": no entry point " + name + " (" + dlerror() +
                     "): " + std::string(too_old));
  return found;
}

void* SharedLibrary::symbol_if_present(const char* name) const {
  return dlsym(handle_, name);
}

}  // namespace headroom
