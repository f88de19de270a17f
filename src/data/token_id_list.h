// Token ids written as text: what `headroom data tokenize --decode` reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headroom {

// Ids separated by white space, or by commas (one between two ids, white
// space around it allowed), or a JSON array of them; nothing else, so that a
// cut list ("[72, 101,") is an error, not the ids before the cut. Each id is
// in [0, 2^31 - 1]. Otherwise throws UsageError
//   <where>: byte <offset>: expected ..., got "..."   or
//   <where>: byte <offset>: "x1" is not a token id
// with `where` naming the input (a file name, "<stdin>").
std::vector<int32_t> parse_token_id_list(const std::string& text, const std::string& where);

}  // namespace headroom
