// NCCL, loaded when the first NcclComm is made rather than linked: every
// `headroom` process links the cli's NcclComm, and a binary that needs
// libnccl (218 MB, not part of the CUDA toolkit's runtime) to start would
// not run `plan`, `report` or a cpu `train` where it is missing (the device
// bundle's bare machines find it in PyTorch's wheel, at run time). The entry
// points NcclComm calls, looked up once by their names.
#pragma once

#include <nccl.h>

#include <string>

namespace headroom {

// X(name) for every entry point: the struct's members and their lookup are
// written from this one list.
#define HEADROOM_NCCL_ENTRY_POINTS(X) \
  X(ncclGetUniqueId)                  \
  X(ncclCommInitRank)                 \
  X(ncclCommDestroy)                  \
  X(ncclAllReduce)                    \
  X(ncclBroadcast)                    \
  X(ncclReduce)                       \
  X(ncclGroupStart)                   \
  X(ncclGroupEnd)                     \
  X(ncclGetErrorString)               \
  X(ncclGetLastError)

struct NcclLibrary {
#define HEADROOM_NCCL_MEMBER(name) decltype(&::name) name;
  HEADROOM_NCCL_ENTRY_POINTS(HEADROOM_NCCL_MEMBER)
#undef HEADROOM_NCCL_MEMBER
  // NCCL >= 2.18 only (parallel.tensor's groups); null in an older one,
  // which still runs everything else.
  decltype(&::ncclCommSplit) ncclCommSplit = nullptr;
  std::string file;  // the loaded library, for messages
};

// libnccl.so.<NCCL_MAJOR> through the loader's search path (LD_LIBRARY_PATH,
// the binary's rpath, ld.so.cache), loaded on the first call and kept for
// the process. Throws UsageError naming the file and dlerror() when it or
// an entry point is missing.
const NcclLibrary& nccl_library();

}  // namespace headroom
