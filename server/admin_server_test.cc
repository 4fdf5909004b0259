#include "server/admin_server.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace server {
namespace {

struct Reply {
  long status = 0;
  std::string body;
  std::string content_type;
};

Reply Fetch(const std::string& url, const char* method = "GET") {
  Reply r;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t size, size_t n, void* out) {
        static_cast<std::string*>(out)->append(p, size * n);
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  if (curl_easy_perform(curl) == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    char* ct = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
    if (ct != nullptr) r.content_type = ct;
  }
  curl_easy_cleanup(curl);
  return r;
}

// A fake steady clock the test moves.
struct FakeClock {
  std::atomic<int64_t> ns{1'000'000'000};
  std::chrono::steady_clock::time_point now() const {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns.load()));
  }
  void Advance(std::chrono::milliseconds d) { ns += std::chrono::nanoseconds(d).count(); }
};

class AdminServerTest : public ::testing::Test {
 protected:
  // A server on free loopback ports whose "loop" answers every refresh request at once with
  // `next_` (unless `answer_` is false), as the loop thread's publisher does.
  void StartServer(bool beat_on_request = false) {
    AdminServerOptions o;
    if (beat_on_request) {
      o.beat_wait = std::chrono::milliseconds(100);
      o.request_beat = [this] {
        ++beat_requests_;
        if (answer_) server_->Beat();  // as the loop's callback would, moments later
      };
    }
    o.healthz_address = "127.0.0.1:0";
    o.debug_address = "127.0.0.1:0";
    o.clock = [this] { return clock_.now(); };
    o.refresh_wait = std::chrono::milliseconds(200);
    o.request_refresh = [this] {
      ++refreshes_;
      if (!answer_) return;
      auto s = std::make_shared<Snapshot>(next_);
      const AdminServer::Requests r = server_->requests();
      s->seq = r.seq;
      s->debug_seq = r.debug_seq;
      server_->Publish(s);
    };
    auto started = AdminServer::Start(std::move(o));
    ASSERT_TRUE(started.ok()) << started.status().message();
    server_ = std::move(started).value();
    probe_ = "http://" + server_->healthz_address();
    debug_ = "http://" + server_->debug_address();
  }

  FakeClock clock_;
  Snapshot next_;
  std::atomic<bool> answer_{true};
  std::atomic<int> refreshes_{0};
  std::atomic<int> beat_requests_{0};
  std::unique_ptr<AdminServer> server_;
  std::string probe_, debug_;
};

TEST_F(AdminServerTest, PortZeroBindsAFreePortPerListener) {
  StartServer();
  EXPECT_TRUE(server_->healthz_address().starts_with("127.0.0.1:"));
  EXPECT_NE(server_->healthz_address(), "127.0.0.1:0");
  EXPECT_NE(server_->debug_address(), "127.0.0.1:0");
  EXPECT_NE(server_->healthz_address(), server_->debug_address());
}

TEST_F(AdminServerTest, HealthzFollowsTheHeartbeatAge) {
  StartServer();
  Reply r = Fetch(probe_ + "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  clock_.Advance(std::chrono::milliseconds(1999));
  EXPECT_EQ(Fetch(probe_ + "/healthz").status, 200);
  clock_.Advance(std::chrono::milliseconds(1));
  r = Fetch(probe_ + "/healthz");
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("the event loop has not answered for 2.0s (limit 2.0s)"), std::string::npos)
      << r.body;
  server_->Beat();
  EXPECT_EQ(Fetch(probe_ + "/healthz").status, 200);
  // Liveness never waits for a snapshot.
  EXPECT_EQ(refreshes_.load(), 0);
}

// With no timer beating, a probe that finds the last beat old asks the loop for one: an answering
// loop is alive however long it was quiet; one that does not answer within beat_wait is not.
TEST_F(AdminServerTest, HealthzAsksTheLoopForABeatWhenTheLastIsOld) {
  StartServer(/*beat_on_request=*/true);
  EXPECT_EQ(Fetch(probe_ + "/healthz").status, 200);
  EXPECT_EQ(beat_requests_.load(), 0) << "a recent beat needs no question";
  clock_.Advance(std::chrono::hours(1));
  EXPECT_EQ(Fetch(probe_ + "/healthz").status, 200);
  EXPECT_EQ(beat_requests_.load(), 1);
  EXPECT_EQ(Fetch(probe_ + "/healthz").status, 200);
  EXPECT_EQ(beat_requests_.load(), 1) << "the beat it got is recent";
  answer_ = false;  // the loop is stuck
  clock_.Advance(std::chrono::seconds(3));
  const Reply r = Fetch(probe_ + "/healthz");
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("the event loop has not answered for 3.0s"), std::string::npos) << r.body;
  EXPECT_EQ(beat_requests_.load(), 2);
}

TEST_F(AdminServerTest, ReadyzListsChecksAndNamesWhatIsMissingOnlyWhenVerbose) {
  next_.readiness = {{"volume-reconstruction", true, ""},
                     {"pod-source-file", false, "no state delivered yet from /etc/pods"}};
  StartServer();
  Reply r = Fetch(probe_ + "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body,
            "[+]volume-reconstruction ok\n[-]pod-source-file failed: reason withheld\n"
            "readyz check failed\n");
  r = Fetch(probe_ + "/readyz?verbose");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body,
            "[+]volume-reconstruction ok\n"
            "[-]pod-source-file failed: no state delivered yet from /etc/pods\n"
            "readyz check failed\n");
  next_.readiness[1].ok = true;
  r = Fetch(probe_ + "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  r = Fetch(probe_ + "/readyz?verbose");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "[+]volume-reconstruction ok\n[+]pod-source-file ok\nreadyz check passed\n");
}

TEST_F(AdminServerTest, MetricsInTextFormatFromAFreshSnapshot) {
  MetricFamily f{"volumemanager_test_total", "Test", MetricType::kCounter, {}, {}};
  f.values.push_back({{}, 7});
  next_.metrics.push_back(f);
  StartServer();
  Reply r = Fetch(probe_ + "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("volumemanager_test_total 7\n"), std::string::npos) << r.body;
  next_.metrics[0].values[0].second = 8;
  EXPECT_NE(Fetch(probe_ + "/metrics").body.find("volumemanager_test_total 8\n"),
            std::string::npos);
}

TEST_F(AdminServerTest, AStuckLoopGetsTheLastSnapshotAfterTheWait) {
  MetricFamily f{"volumemanager_test_total", "Test", MetricType::kCounter, {}, {}};
  f.values.push_back({{}, 1});
  next_.metrics.push_back(f);
  StartServer();
  ASSERT_EQ(Fetch(probe_ + "/metrics").status, 200);
  answer_ = false;
  next_.metrics[0].values[0].second = 2;
  Reply r = Fetch(probe_ + "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("volumemanager_test_total 1\n"), std::string::npos) << r.body;
}

TEST_F(AdminServerTest, DebugEndpointsOnlyOnTheDebugListener) {
  next_.debug_state = std::make_shared<nlohmann::json>(nlohmann::json{{"volumes", 0}});
  next_.configz = std::make_shared<nlohmann::json>(nlohmann::json{{"kind", "X"}});
  StartServer();
  EXPECT_EQ(Fetch(probe_ + "/debug/state").status, 404);
  EXPECT_EQ(Fetch(probe_ + "/configz").status, 404);
  EXPECT_EQ(Fetch(debug_ + "/metrics").status, 404);
  EXPECT_EQ(Fetch(debug_ + "/healthz").status, 404);
  Reply r = Fetch(debug_ + "/debug/state");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(r.body), (nlohmann::json{{"volumes", 0}}));
  EXPECT_EQ(nlohmann::json::parse(Fetch(debug_ + "/configz").body),
            (nlohmann::json{{"kind", "X"}}));
}

TEST_F(AdminServerTest, OnlyGetAndHead) {
  StartServer();
  EXPECT_EQ(Fetch(probe_ + "/healthz", "POST").status, 405);
  EXPECT_EQ(Fetch(probe_ + "/healthz", "DELETE").status, 405);
  EXPECT_EQ(Fetch(probe_ + "/nothing").status, 404);
}

AdminServerOptions Addresses(std::string probe, std::string debug) {
  AdminServerOptions o;
  o.healthz_address = std::move(probe);
  o.debug_address = std::move(debug);
  return o;
}

TEST(AdminServerStartTest, BadOrTakenAddressesAreErrorsNamingThem) {
  auto bad = AdminServer::Start(Addresses("localhost:80", ""));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"localhost:80\""), std::string::npos);
  auto first = AdminServer::Start(Addresses("127.0.0.1:0", ""));
  ASSERT_TRUE(first.ok());
  const std::string taken = (*first)->healthz_address();
  auto second = AdminServer::Start(Addresses(taken, ""));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(taken), std::string::npos);
}

TEST(AdminServerStartTest, EmptyAddressIsNotServed) {
  auto s = AdminServer::Start(Addresses("", ""));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->healthz_address(), "");
  EXPECT_EQ((*s)->debug_address(), "");
}

}  // namespace
}  // namespace server
