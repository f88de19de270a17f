#include "comm/nccl_library.h"

#include <string>

#include "util/error.h"
#include "util/shared_library.h"

namespace headroom {

namespace {

NcclLibrary load_nccl() {
  const SharedLibrary library(
      "libnccl.so." + std::to_string(NCCL_MAJOR), "run.backend = \"cuda\" under an MPI launcher",
      "install NCCL or add its lib folder (PyTorch's nvidia/nccl/lib has one) to LD_LIBRARY_PATH");
  constexpr std::string_view too_old = "an NCCL older than the one headroom was built with?";
  NcclLibrary lib{};
#define HEADROOM_NCCL_FIND(name) library.find(lib.name, #name, too_old);
  HEADROOM_NCCL_ENTRY_POINTS(HEADROOM_NCCL_FIND)
#undef HEADROOM_NCCL_FIND
  library.find_if_present(lib.ncclCommSplit, "ncclCommSplit");
  lib.file = library.file();
  return lib;
}

}  // namespace

const NcclLibrary& nccl_library() {
  // Loaded once, immutable afterwards (C++ guarantees one initialization).
  static const NcclLibrary library = load_nccl();
  return library;
}

}  // namespace headroom
