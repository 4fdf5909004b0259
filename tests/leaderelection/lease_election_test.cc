// Leader election on a Lease against kube-test-apiserver: two electors (each with its own HTTP
// and API client, as two daemons on a node), short durations (lease 3 s, renew deadline 2 s,
// retry period 250 ms; the deadline leaves a loaded test server time to answer). Every transition
// goes on one timeline that fails the test if two ever lead at once; safety is asserted as an order
// on one clock (the wall clock of this host, which also stamps renewTime), never as a time limit.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "base/rfc3339.h"
#include "kubeclient/api_client.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/transport/http_client.h"
#include "leaderelection/leader_elector.h"
#include "leaderelection/lease_lock.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/election_timeline.h"
#include "tests/support/test_loop.h"

namespace leaderelection {
namespace {

using kube_testing::TestApiServerProcess;
using std::chrono::milliseconds;
using vmtest::ElectionTimeline;
using vmtest::TestLoop;

const std::string kLeases = "/apis/coordination.k8s.io/v1/namespaces/vm-system/leases";
const std::string kLease = kLeases + "/volumemanager-node-1";
constexpr auto kLeaseDuration = std::chrono::seconds(3);

// A MicroTime ("2025-03-01T10:00:00.123456Z") as a time point; epoch when unparsable.
std::chrono::system_clock::time_point ParseMicroTime(const std::string& text) {
  return base::ParseRfc3339(text).value_or(std::chrono::system_clock::time_point{});
}

struct Contender {
  std::unique_ptr<kubeclient::HttpClient> http;
  std::unique_ptr<kubeclient::ApiClient> api;
  std::unique_ptr<LeaderElector> elector;
};

class LeaseElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    auto creds = kubeclient::LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok());
    creds_ = *creds;
  }

  void TearDown() override {
    for (auto& [name, c] : contenders_) Vanish(name);
    EXPECT_LE(timeline_.max_leaders(), 1u) << timeline_.Dump();
  }

  LeaderElector* AddElector(const std::string& identity) {
    Contender c;
    auto http = kubeclient::HttpClient::Create(loop_.get(), creds_);
    EXPECT_TRUE(http.ok());
    c.http = std::move(*http);
    c.api = std::make_unique<kubeclient::ApiClient>(c.http.get());
    LeaderElectorOptions options;
    options.identity = identity;
    options.timing = {kLeaseDuration, milliseconds(2000), milliseconds(250)};
    auto elector = LeaderElector::Create(
        loop_.get(), std::make_unique<LeaseLock>(c.api.get(), "vm-system", "volumemanager-node-1"),
        options, timeline_.CallbacksFor(identity));
    EXPECT_TRUE(elector.ok()) << elector.status().message();
    c.elector = std::move(*elector);
    LeaderElector* out = c.elector.get();
    contenders_[identity] = std::move(c);
    return out;
  }

  // The process is gone: no release, nothing more from it (kill -9).
  void Vanish(const std::string& identity) {
    Contender& c = contenders_[identity];
    if (c.elector) timeline_.Vanished(identity);
    c.elector.reset();
    c.api.reset();
    c.http.reset();
  }

  void StopAndWait(LeaderElector* e) {
    bool done = false;
    e->Stop([&] { done = true; });
    ASSERT_TRUE(loop_.RunUntil([&] { return done; }));
  }

  nlohmann::json LeaseSpec() { return server_.Api("GET", kLease).body["spec"]; }

  // Runs until one of `a`, `b` leads; that one.
  LeaderElector* RunUntilOneLeads(LeaderElector* a, LeaderElector* b) {
    EXPECT_TRUE(loop_.RunUntil([&] { return a->IsLeader() || b->IsLeader(); }));
    return a->IsLeader() ? a : b;
  }

  // Attempts made by `e` when it became leader.
  uint64_t RunUntilLeads(LeaderElector* e) {
    uint64_t at = 0;
    EXPECT_TRUE(loop_.RunUntil([&] {
      if (e->IsLeader() && at == 0) at = e->attempts();
      return e->IsLeader();
    }));
    return at;
  }

  std::chrono::system_clock::time_point StartedAt(const std::string& identity) {
    auto i = timeline_.Find(identity, "started");
    EXPECT_TRUE(i.has_value()) << identity << " never led\n" << timeline_.Dump();
    return i ? timeline_.events()[*i].wall : std::chrono::system_clock::time_point{};
  }

  TestApiServerProcess server_;
  kubeclient::Credentials creds_;
  TestLoop loop_;
  ElectionTimeline timeline_;
  std::map<std::string, Contender> contenders_;
};

TEST_F(LeaseElectionTest, OneOfTwoLeadsAndAGracefulStopHandsOverAtTheNextAttempt) {
  LeaderElector* a = AddElector("a");
  LeaderElector* b = AddElector("b");
  a->Start();
  b->Start();
  LeaderElector* holder = RunUntilOneLeads(a, b);
  LeaderElector* waiter = holder == a ? b : a;
  const uint64_t before = waiter->attempts();
  ASSERT_TRUE(loop_.RunUntil([&] { return waiter->attempts() >= before + 4; }));
  EXPECT_TRUE(holder->IsLeader());
  EXPECT_FALSE(waiter->IsLeader());
  EXPECT_EQ(waiter->leader(), holder->identity());
  nlohmann::json spec = LeaseSpec();
  EXPECT_EQ(spec["holderIdentity"], holder->identity());
  EXPECT_EQ(spec["leaseDurationSeconds"], 3);
  EXPECT_EQ(spec["leaseTransitions"], 0);

  uint64_t attempts_at_release = 0;
  bool stopped = false;
  holder->Stop([&] {
    stopped = true;
    attempts_at_release = waiter->attempts();
  });
  ASSERT_TRUE(loop_.RunUntil([&] { return stopped; }));
  // An attempt in flight at the release may have read the old record; the next one takes over.
  EXPECT_LE(RunUntilLeads(waiter), attempts_at_release + 1) << timeline_.Dump();
  spec = LeaseSpec();
  EXPECT_EQ(spec["holderIdentity"], waiter->identity());
  EXPECT_EQ(spec["leaseTransitions"], 1);
  EXPECT_LT(*timeline_.Find(holder->identity(), "stopped"),
            *timeline_.Find(waiter->identity(), "started"));
}

// The holder vanishes without releasing (kill -9): the other takes over only once the Lease as
// last renewed has gone unrenewed for its duration, as seen on its own clock.
TEST_F(LeaseElectionTest, AVanishedHolderIsReplacedOnlyAfterTheLeaseExpires) {
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  LeaderElector* b = AddElector("b");
  b->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return b->leader() == "a"; }));
  Vanish("a");
  const auto last_renewal = ParseMicroTime(LeaseSpec()["renewTime"].get<std::string>());
  RunUntilLeads(b);
  EXPECT_GE(StartedAt("b"), last_renewal + kLeaseDuration) << timeline_.Dump();
  EXPECT_EQ(LeaseSpec()["holderIdentity"], "b");
  EXPECT_EQ(LeaseSpec()["leaseTransitions"], 1);
  const auto waited = std::chrono::duration_cast<milliseconds>(StartedAt("b") - last_renewal);
  std::printf("takeover %lld ms after the last renewal (lease 3000 ms, retry 250-550 ms)\n",
              static_cast<long long>(waited.count()));
}

// The API server stalls the holder's renewal: its renew deadline ends its term while the Lease it
// last renewed is still valid for everyone else, and only later does the other take over.
TEST_F(LeaseElectionTest, AStalledRenewalEndsTheTermBeforeTheLeaseCouldExpireForOthers) {
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  LeaderElector* b = AddElector("b");
  b->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return b->leader() == "a"; }));
  // The next PUT is a's renewal (b only reads while a's Lease is valid).
  server_.Admin("POST", "faults",
                {{"verb", "update"}, {"resource", "leases"}, {"delay", 8}, {"times", 1}});
  ASSERT_TRUE(loop_.RunUntil([&] { return !a->IsLeader(); }));
  const auto a_stopped = timeline_.events()[*timeline_.Find("a", "stopped")].wall;
  // What the others see: a's last renewal, still a's, still valid.
  const nlohmann::json spec = LeaseSpec();
  EXPECT_EQ(spec["holderIdentity"], "a") << timeline_.Dump();
  EXPECT_LT(a_stopped, ParseMicroTime(spec["renewTime"].get<std::string>()) + kLeaseDuration);
  EXPECT_EQ(timeline_.Count("b", "started"), 0u);

  RunUntilLeads(b);
  EXPECT_LT(*timeline_.Find("a", "stopped"), *timeline_.Find("b", "started")) << timeline_.Dump();
  EXPECT_GE(StartedAt("b"), ParseMicroTime(spec["renewTime"].get<std::string>()) + kLeaseDuration);
}

// Someone else writes the Lease while we hold it (its resourceVersion moves): our renewal's PUT
// gets 409 Conflict, the attempt reads the Lease again and renews on the new version; the term
// goes on.
TEST_F(LeaseElectionTest, AConflictOnRenewalIsResolvedByReadingAgain) {
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  server_.Admin("DELETE", "requests");
  for (int i = 0; i < 3; ++i) {
    nlohmann::json lease = server_.Api("GET", kLease).body;
    lease["metadata"]["labels"]["touched"] = std::to_string(i);
    ASSERT_EQ(server_.Api("PUT", kLease, lease).code, 200);
    loop_.RunFor(milliseconds(600));
  }
  EXPECT_TRUE(a->IsLeader());
  EXPECT_EQ(timeline_.Count("a", "stopped"), 0u) << timeline_.Dump();
  int conflicts = 0;
  const nlohmann::json requests = server_.Admin("GET", "requests").body["requests"];
  for (const auto& r : requests) {
    if (r["method"] == "PUT" && r["code"] == 409) ++conflicts;
  }
  EXPECT_GE(conflicts, 1) << "the test made no conflict";
  EXPECT_EQ(LeaseSpec()["holderIdentity"], "a");
  EXPECT_EQ(LeaseSpec()["leaseTransitions"], 0) << "a renewal, not a new term";
}

// A Lease held by another process is respected while it is renewed, and taken only once it has
// gone unrenewed for its own leaseDurationSeconds.
TEST_F(LeaseElectionTest, ALeaseHeldBySomeoneElseIsRespectedUntilItExpires) {
  auto other_record = [](int transitions) {
    return LeaderElectionRecord{"other", 2, FormatMicroTime(std::chrono::system_clock::now()),
                                FormatMicroTime(std::chrono::system_clock::now()), transitions};
  };
  nlohmann::json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                          {"kind", "Lease"},
                          {"metadata", {{"name", "volumemanager-node-1"}}},
                          {"spec", LeaseSpecFromRecord(other_record(4))}};
  ASSERT_EQ(server_.Api("POST", kLeases, lease).code, 201);
  LeaderElector* a = AddElector("a");
  a->Start();
  std::chrono::system_clock::time_point last_renewal;
  // "other" renews every 500 ms for 3 s, longer than its 2 s lease.
  loop_.RunSteps(6, milliseconds(500), [&](int) {
    nlohmann::json current = server_.Api("GET", kLease).body;
    current["spec"]["renewTime"] = FormatMicroTime(std::chrono::system_clock::now());
    last_renewal = std::chrono::system_clock::now();
    EXPECT_EQ(server_.Api("PUT", kLease, current).code, 200);
  });
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(a->leader(), "other");
  RunUntilLeads(a);
  // The bound is the other holder's own leaseDurationSeconds (2), not ours.
  EXPECT_GE(StartedAt("a"), last_renewal + std::chrono::seconds(2)) << timeline_.Dump();
  const nlohmann::json spec = LeaseSpec();
  EXPECT_EQ(spec["holderIdentity"], "a");
  EXPECT_EQ(spec["leaseTransitions"], 5);
  EXPECT_EQ(spec["acquireTime"], spec["renewTime"]);
}

}  // namespace
}  // namespace leaderelection
