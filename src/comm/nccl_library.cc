#include "comm/nccl_library.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "util/error.h"

namespace headroom {

namespace {

NcclLibrary load_nccl() {
  const std::string file = "libnccl.so." + std::to_string(NCCL_MAJOR);
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw UsageError("run.backend = \"cuda\" under an MPI launcher: cannot load " + file + " (" +
                     dlerror() +
                     "); install NCCL or add its lib folder (PyTorch's nvidia/nccl/lib has one) "
                     "to LD_LIBRARY_PATH");
  NcclLibrary lib{};
  auto find = [&](auto& entry, const char* name) {
    void* symbol = dlsym(handle, name);
    if (symbol == nullptr)
      throw UsageError(file + ": no entry point " + name + " (" + dlerror() +
                       "): an NCCL older than the one headroom was built with?");
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(symbol);
  };
#define HEADROOM_NCCL_FIND(name) find(lib.name, #name);
  HEADROOM_NCCL_ENTRY_POINTS(HEADROOM_NCCL_FIND)
#undef HEADROOM_NCCL_FIND
  return lib;
}

}  // namespace

const NcclLibrary& nccl_library() {
  // Loaded once, immutable afterwards (C++ guarantees one initialization).
  static const NcclLibrary library = load_nccl();
  return library;
}

}  // namespace headroom
