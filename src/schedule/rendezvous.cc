#include "src/schedule/rendezvous.h"

#include "gnomon/status.h"

namespace gnomon::internal {
namespace {

// FNV-1a over the bytes, then the splitmix64 finaliser (FNV alone mixes its last bytes poorly).
uint64_t Mix(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

void Feed(uint64_t& h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h ^= 0xff;  // separator: ("ab","c") and ("a","bc") differ
  h *= 0x100000001b3ULL;
}

// Whether `a` ranks before `b`.
bool Before(uint64_t wa, std::string_view a, uint64_t wb, std::string_view b) {
  return wa != wb ? wa > wb : a < b;
}

}  // namespace

uint64_t RendezvousWeight(std::string_view node_id, std::string_view job_id, int shard) {
  uint64_t h = 0xcbf29ce484222325ULL;
  Feed(h, node_id);
  Feed(h, job_id);
  const uint32_t s = static_cast<uint32_t>(shard);
  const char bytes[4] = {static_cast<char>(s), static_cast<char>(s >> 8),
                         static_cast<char>(s >> 16), static_cast<char>(s >> 24)};
  Feed(h, std::string_view(bytes, 4));
  return Mix(h);
}

int RendezvousRank(const std::vector<std::string>& nodes, std::string_view self,
                   std::string_view job_id, int shard) {
  const uint64_t mine = RendezvousWeight(self, job_id, shard);
  int rank = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string& n = nodes[i];
    if (n == self) continue;
    bool duplicate = false;
    for (size_t j = 0; j < i && !duplicate; ++j) duplicate = nodes[j] == n;
    if (duplicate) continue;
    if (Before(RendezvousWeight(n, job_id, shard), n, mine, self)) ++rank;
  }
  return rank;
}

const std::string& RendezvousOwner(const std::vector<std::string>& nodes, std::string_view job_id,
                                   int shard) {
  GNOMON_CHECK(!nodes.empty());
  const std::string* best = &nodes[0];
  uint64_t best_w = RendezvousWeight(*best, job_id, shard);
  for (const std::string& n : nodes) {
    const uint64_t w = RendezvousWeight(n, job_id, shard);
    if (Before(w, n, best_w, *best)) {
      best = &n;
      best_w = w;
    }
  }
  return *best;
}

}  // namespace gnomon::internal
