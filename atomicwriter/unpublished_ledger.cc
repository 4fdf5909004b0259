#include "atomicwriter/unpublished_ledger.h"

#include <functional>
#include <string_view>

namespace atomicwriter {

bool UnpublishedLedger::Observe(const std::string& name, const struct stat& st,
                                Clock::time_point now, Clock::duration grace, uint64_t tree) {
  const Seen seen{now, st.st_dev, st.st_ino, st.st_ctim, tree};
  auto [it, inserted] = seen_.try_emplace(name, seen);
  Seen& s = it->second;
  if (!inserted &&
      (s.dev != st.st_dev || s.ino != st.st_ino || s.ctime.tv_sec != st.st_ctim.tv_sec ||
       s.ctime.tv_nsec != st.st_ctim.tv_nsec || s.tree != tree)) {
    s = seen;  // another entry, or still being written
  }
  return now - s.since >= grace;
}

uint64_t UnpublishedLedger::DirStateHash(const struct stat& st) {
  const uint64_t parts[] = {
      static_cast<uint64_t>(st.st_dev),         st.st_ino,
      static_cast<uint64_t>(st.st_nlink),       static_cast<uint64_t>(st.st_size),
      static_cast<uint64_t>(st.st_mtim.tv_sec), static_cast<uint64_t>(st.st_mtim.tv_nsec),
      static_cast<uint64_t>(st.st_ctim.tv_sec), static_cast<uint64_t>(st.st_ctim.tv_nsec)};
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(parts), sizeof(parts)));
}

uint64_t UnpublishedLedger::NameHash(const std::string& name) {
  return std::hash<std::string_view>{}(name);
}

void UnpublishedLedger::ForgetAllBut(const std::set<std::string>& present) {
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = present.count(it->first) != 0 ? std::next(it) : seen_.erase(it);
  }
}

}  // namespace atomicwriter
