#include "tokenizer/bpe_model.h"

#include <queue>

namespace headroom {

BpeModel::BpeModel(const std::array<int32_t, 256>& byte_ids, const std::vector<Merge>& merges,
                   TokenIds whole_tokens, bool ignore_merges)
    : byte_ids_(byte_ids), whole_tokens_(std::move(whole_tokens)), ignore_merges_(ignore_merges) {
  rules_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    rules_.insert_or_assign(key(m.left, m.right), Rule{static_cast<uint32_t>(rank), m.result});
  }
}

void BpeModel::encode(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (ignore_merges_) {
    auto it = whole_tokens_.find(bytes);
    if (it != whole_tokens_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (bytes.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(bytes[0])]);
    return;
  }
  if (bytes.size() <= kShortWord)
    encode_short(bytes, out);
  else
    encode_long(bytes, out);
}

// Repeatedly merges the lowest-ranked pair, the leftmost on a tie: the
// textbook loop, O(n^2) but allocation-free, for the short pre-tokens that
// make up nearly all text. It merges exactly what encode_long (HF's heap)
// does: a heap entry is only acted on while its pair is still there.
void BpeModel::encode_short(std::string_view bytes, std::vector<int32_t>& out) const {
  constexpr uint32_t kNone = UINT32_MAX;
  std::array<int32_t, kShortWord> ids;
  std::array<uint32_t, kShortWord> ranks;   // ranks[i]: pair (ids[i], ids[i + 1])
  std::array<int32_t, kShortWord> results;  // what that pair merges into
  size_t n = bytes.size();
  for (size_t i = 0; i < n; ++i)
    ids[i] = byte_ids_[static_cast<uint8_t>(bytes[i])];
  auto update = [&](size_t i) {
    const Rule* r = rule(ids[i], ids[i + 1]);
    ranks[i] = r ? r->rank : kNone;
    results[i] = r ? r->result : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i)
    update(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (ranks[i] < ranks[best]) best = i;
    if (ranks[best] == kNone) break;
    ids[best] = results[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --n;
    if (best + 1 < n) update(best);
    if (best > 0) update(best - 1);
  }
  out.insert(out.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

void BpeModel::encode_long(std::string_view bytes, std::vector<int32_t>& out) const {
  const auto n = static_cast<int32_t>(bytes.size());

  // The symbols form a doubly linked list over this array; a merged-away
  // symbol is marked dead and never unlinked from the array.
  struct Symbol {
    int32_t id;
    int32_t prev;  // -1 = none
    int32_t next;  // n = none
    bool alive;
  };
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    symbols[static_cast<size_t>(i)] = {
        byte_ids_[static_cast<uint8_t>(bytes[static_cast<size_t>(i)])], i - 1, i + 1, true};

  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t result;
    // std::priority_queue pops the largest: invert so the lowest rank, then
    // the leftmost position, comes first.
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Candidate> storage;
  storage.reserve(bytes.size());
  for (int32_t i = 0; i + 1 < n; ++i)
    if (const Rule* r =
            rule(symbols[static_cast<size_t>(i)].id, symbols[static_cast<size_t>(i) + 1].id))
      storage.push_back({r->rank, i, r->result});
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next == n) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    const Rule* now = rule(left.id, right.id);
    if (now == nullptr || now->result != top.result) continue;  // stale entry

    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next < n) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0)
      if (const Rule* r = rule(symbols[static_cast<size_t>(left.prev)].id, left.id))
        queue.push({r->rank, left.prev, r->result});
    if (left.next < n)
      if (const Rule* r = rule(left.id, symbols[static_cast<size_t>(left.next)].id))
        queue.push({r->rank, top.pos, r->result});
  }
  for (int32_t i = 0; i < n; i = symbols[static_cast<size_t>(i)].next)
    out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace headroom
