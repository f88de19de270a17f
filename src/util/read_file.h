// Reading a user-named file whole, with a bound.
//
// A path on the command line or in a config may name anything: /dev/zero or a
// FIFO would never end, a folder reads as nothing, and a 50 GB file dies in
// std::bad_alloc (exit 1). What is read whole is therefore checked first: it
// must be a regular file no larger than the caller's bound, or it is a
// UsageError naming the file, what it was meant to be and the bound.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "util/bytes.h"

namespace headroom {

// The bytes of `path`. `what` names the file in errors ("tokenizer", "text
// file"). Refused, as a UsageError: a path that cannot be opened
// ("<path>: cannot open <what>: <strerror>"), one that is not a regular file
// ("<path>: <what> is a directory / a character device ...: expected a
// regular file"), and one of more than `max_bytes` ("<path>: <what> is 20.0
// GiB (...); at most 256.0 MiB (...) is read"). A FIFO is refused without
// blocking.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what);

// All of `stream` (standard input), refusing more than `max_bytes` as
// "<name>: more than <max> of <what>" once that much has been read.
std::string read_stream(std::FILE* stream, const std::string& name, uint64_t max_bytes,
                        std::string_view what);

}  // namespace headroom
