// ElectionTimeline: one shared record of every leader-election transition of the electors in a
// test (who started or stopped leading, who was seen as leader, when on the steady and the wall
// clock), and the invariant of every election test: never two leaders at once.
#ifndef VOLUMEMANAGER_TESTS_SUPPORT_ELECTION_TIMELINE_H_
#define VOLUMEMANAGER_TESTS_SUPPORT_ELECTION_TIMELINE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "leaderelection/leader_elector.h"

namespace vmtest {

struct ElectionEvent {
  std::chrono::steady_clock::time_point at;
  std::chrono::system_clock::time_point wall;
  std::string identity;  // whose callback
  std::string what;      // "started", "stopped", "sees:<leader>"
};

class ElectionTimeline {
 public:
  leaderelection::LeaderCallbacks CallbacksFor(const std::string& identity) {
    leaderelection::LeaderCallbacks callbacks;
    callbacks.on_started_leading = [this, identity] {
      EXPECT_TRUE(leaders_.empty())
          << identity << " started leading while " << *leaders_.begin() << " leads\n"
          << Dump();
      leaders_.insert(identity);
      max_leaders_ = std::max(max_leaders_, leaders_.size());
      Add(identity, "started");
    };
    callbacks.on_stopped_leading = [this, identity] {
      EXPECT_EQ(leaders_.erase(identity), 1u) << identity << " stopped without leading";
      Add(identity, "stopped");
    };
    callbacks.on_new_leader = [this, identity](const std::string& leader) {
      Add(identity, "sees:" + leader);
    };
    return callbacks;
  }

  // The process of `identity` is gone (killed): it leads no more, and no callback says so.
  void Vanished(const std::string& identity) {
    leaders_.erase(identity);
    Add(identity, "vanished");
  }

  // The index of the first event of `identity` with `what` at or after `from`.
  std::optional<size_t> Find(const std::string& identity, const std::string& what,
                             size_t from = 0) const {
    for (size_t i = from; i < events_.size(); ++i) {
      if (events_[i].identity == identity && events_[i].what == what) return i;
    }
    return std::nullopt;
  }
  size_t Count(const std::string& identity, const std::string& what) const {
    return static_cast<size_t>(std::count_if(events_.begin(), events_.end(), [&](const auto& e) {
      return e.identity == identity && e.what == what;
    }));
  }

  const std::vector<ElectionEvent>& events() const { return events_; }
  const std::set<std::string>& leaders() const { return leaders_; }
  size_t max_leaders() const { return max_leaders_; }

  std::string Dump() const {
    std::string out;
    for (const auto& e : events_) {
      out += std::to_string(
                 std::chrono::duration_cast<std::chrono::milliseconds>(e.at - events_.front().at)
                     .count()) +
             " ms " + e.identity + " " + e.what + "\n";
    }
    return out;
  }

 private:
  void Add(const std::string& identity, const std::string& what) {
    events_.push_back(
        {std::chrono::steady_clock::now(), std::chrono::system_clock::now(), identity, what});
  }

  std::vector<ElectionEvent> events_;
  std::set<std::string> leaders_;
  size_t max_leaders_ = 0;
};

}  // namespace vmtest

#endif  // VOLUMEMANAGER_TESTS_SUPPORT_ELECTION_TIMELINE_H_
