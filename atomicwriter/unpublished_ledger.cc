#include "atomicwriter/unpublished_ledger.h"

namespace atomicwriter {

bool UnpublishedLedger::Observe(const std::string& name, const struct stat& st,
                                Clock::time_point now, Clock::duration grace) {
  auto [it, inserted] = seen_.try_emplace(name, Seen{now, st.st_dev, st.st_ino, st.st_ctim});
  Seen& s = it->second;
  if (!inserted && (s.dev != st.st_dev || s.ino != st.st_ino ||
                    s.ctime.tv_sec != st.st_ctim.tv_sec || s.ctime.tv_nsec != st.st_ctim.tv_nsec)) {
    s = Seen{now, st.st_dev, st.st_ino, st.st_ctim};  // another entry, or still being written
  }
  return now - s.since >= grace;
}

void UnpublishedLedger::ForgetAllBut(const std::set<std::string>& present) {
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = present.count(it->first) != 0 ? std::next(it) : seen_.erase(it);
  }
}

}  // namespace atomicwriter
