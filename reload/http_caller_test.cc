#include "reload/http_caller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/http_listener.h"
#include "tests/support/test_loop.h"

namespace reload {
namespace {

using ::testing::HasSubstr;
using vmtest::Listener;

struct Outcome {
  bool done = false;
  HttpCallResult result;
};

class HttpCallerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (caller_) {
      bool closed = false;
      caller_->Close([&] { closed = true; });
      EXPECT_TRUE(loop_.RunUntil([&] { return closed; }));
      caller_.reset();
    }
    EXPECT_TRUE(loop_.Close()) << "a handle was left open";
  }
  HttpCaller& Caller(HttpCallerOptions o = {}) {
    caller_ = std::make_unique<HttpCaller>(loop_.get(), o);
    return *caller_;
  }
  Outcome Run(HttpCallRequest r) {
    Outcome out;
    caller_->Call(std::move(r), [&](const HttpCallResult& res) {
      out.done = true;
      out.result = res;
    });
    EXPECT_TRUE(loop_.RunUntil([&] { return out.done; }));
    return out;
  }

  vmtest::TestLoop loop_;
  std::unique_ptr<HttpCaller> caller_;
};

TEST_F(HttpCallerTest, SendsOneBodylessRequestToThePodAndReadsTheStatus) {
  Listener l("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret");
  Caller();
  Outcome o = Run({"127.0.0.1", l.port(), "POST", "/-/reload?x=1", ""});
  ASSERT_TRUE(o.result.ok()) << o.result.Describe();
  EXPECT_EQ(o.result.status, 200);
  EXPECT_EQ(o.result.Describe(), "HTTP 200");
  ASSERT_EQ(l.requests().size(), 1u);
  const std::string head = l.requests()[0];
  EXPECT_EQ(head.substr(0, head.find("\r\n")), "POST /-/reload?x=1 HTTP/1.1");
  EXPECT_THAT(head, HasSubstr("\r\nHost: 127.0.0.1:" + std::to_string(l.port()) + "\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nContent-Length: 0\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nUser-Agent: volumemanager/"));
  EXPECT_THAT(head, ::testing::Not(HasSubstr("Authorization")));
  EXPECT_EQ(head.size(), head.find("\r\n\r\n") + 4) << "no body";
}

TEST_F(HttpCallerTest, GetHasNoContentLength) {
  Listener l("HTTP/1.0 204 No Content\r\n\r\n");
  Caller();
  Outcome o = Run({"127.0.0.1", l.port(), "GET", "/reload", ""});
  ASSERT_TRUE(o.result.ok());
  EXPECT_EQ(o.result.status, 204);
  EXPECT_THAT(l.requests()[0], ::testing::Not(HasSubstr("Content-Length")));
}

TEST_F(HttpCallerTest, ErrorsAndRedirectsAreNotSuccess) {
  Listener unavailable("HTTP/1.1 503 Service Unavailable\r\n\r\nbody");
  Listener redirect("HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\n\r\n");
  Listener garbage("SSH-2.0-OpenSSH\r\n\r\n");
  Caller();
  Outcome o = Run({"127.0.0.1", unavailable.port(), "POST", "/", ""});
  EXPECT_FALSE(o.result.ok());
  EXPECT_EQ(o.result.Describe(), "HTTP 503");
  Outcome r = Run({"127.0.0.1", redirect.port(), "POST", "/", ""});
  EXPECT_FALSE(r.result.ok());
  EXPECT_EQ(r.result.status, 302);
  EXPECT_EQ(redirect.connections(), 1) << "a redirect is never followed";
  Outcome g = Run({"127.0.0.1", garbage.port(), "POST", "/", ""});
  EXPECT_FALSE(g.result.ok());
  EXPECT_THAT(g.result.Describe(), HasSubstr("not HTTP/1.x"));
}

TEST_F(HttpCallerTest, RefusedAndSilentListenersFailInBoundedTime) {
  uint16_t closed_port = 0;
  {
    Listener gone("HTTP/1.1 200 OK\r\n\r\n");
    closed_port = gone.port();
  }
  Listener silent("");
  HttpCallerOptions options;
  options.timeout = std::chrono::milliseconds(300);
  Caller(options);
  Outcome refused = Run({"127.0.0.1", closed_port, "POST", "/", ""});
  EXPECT_FALSE(refused.result.ok());
  EXPECT_THAT(refused.result.Describe(), HasSubstr("connect"));
  Outcome hung = Run({"127.0.0.1", silent.port(), "POST", "/", ""});
  EXPECT_FALSE(hung.result.ok());
  EXPECT_THAT(hung.result.Describe(), HasSubstr("no answer within 300ms"));
  silent.Release();
}

TEST_F(HttpCallerTest, NotANumericAddressFailsFromTheLoop) {
  Caller();
  bool done = false;
  HttpCallResult result;
  caller_->Call({"localhost", 80, "POST", "/", ""}, [&](const HttpCallResult& r) {
    done = true;
    result = r;
  });
  EXPECT_FALSE(done) << "never inside Call()";
  ASSERT_TRUE(loop_.RunUntil([&] { return done; }));
  EXPECT_THAT(result.Describe(), HasSubstr("not a numeric IP address"));
}

TEST_F(HttpCallerTest, ConcurrencyIsLimitedNodeWide) {
  Listener held("");
  HttpCallerOptions options;
  options.max_concurrent = 2;
  Caller(options);
  int done = 0;
  for (int i = 0; i < 6; ++i) {
    caller_->Call({"127.0.0.1", held.port(), "POST", "/", ""}, [&](const HttpCallResult&) { ++done; });
  }
  ASSERT_TRUE(loop_.RunUntil([&] { return held.requests().size() == 2; }));
  EXPECT_EQ(caller_->in_flight(), 2u);
  EXPECT_EQ(caller_->queued(), 4u);
  held.Release();
  ASSERT_TRUE(loop_.RunUntil([&] { return done == 6; }));
  EXPECT_LE(held.max_open(), 2);
}

// Issue 42: the queue was first come, first served, so a retry of a pod whose listener had just
// timed out waited ahead of a pod that answers. One slot: each call's callback runs before the
// next one starts, so the order of the callbacks is the order the calls were made.
TEST_F(HttpCallerTest, APodThatTimedOutWaitsBehindPodsThatDidNot) {
  Listener hung("");
  Listener quick("HTTP/1.1 200 OK\r\n\r\n");
  HttpCallerOptions options;
  options.max_concurrent = 1;
  options.timeout = std::chrono::milliseconds(200);
  Caller(options);
  std::vector<std::string> order;
  std::function<void(const std::string&, uint16_t, const std::string&)> call;
  call = [&](const std::string& pod, uint16_t port, const std::string& name) {
    caller_->Call({"127.0.0.1", port, "POST", "/" + name, pod}, [&, pod, port, name](
                                                                     const HttpCallResult& r) {
      order.push_back(name);
      if (name == "a1") {
        // a's retry (its first attempt timed out: b's call starts now, in the one slot), then
        // the healthy pod's call, made after the retry.
        EXPECT_THAT(r.Describe(), HasSubstr("no answer within"));
        call("a", port, "a2");
        call("p", quick.port(), "p1");
      } else if (name == "b1") {
        call("b", port, "b2");
      }
    });
  };
  call("a", hung.port(), "a1");
  call("b", hung.port(), "b1");
  ASSERT_TRUE(loop_.RunUntil([&] { return order.size() == 5; }));
  EXPECT_THAT(order, ::testing::ElementsAre("a1", "b1", "p1", "a2", "b2"))
      << "the healthy pod's call is made before any hung pod's second attempt";
  hung.Release();
}

TEST_F(HttpCallerTest, PodsTakeTurnsWhateverTheOrderOfTheirCalls) {
  Listener quick("HTTP/1.1 200 OK\r\n\r\n");
  HttpCallerOptions options;
  options.max_concurrent = 1;
  Caller(options);
  std::vector<std::string> order;
  auto call = [&](const std::string& pod, const std::string& name) {
    caller_->Call({"127.0.0.1", quick.port(), "POST", "/", pod},
                  [&order, name](const HttpCallResult&) { order.push_back(name); });
  };
  call("x", "x1");  // starts at once
  call("x", "x2");
  call("x", "x3");
  call("y", "y1");
  call("z", "z1");
  call("", "anonymous");  // no pod: a pod of its own
  ASSERT_TRUE(loop_.RunUntil([&] { return order.size() == 6; }));
  EXPECT_THAT(order, ::testing::ElementsAre("x1", "x2", "y1", "z1", "anonymous", "x3"));
}

TEST_F(HttpCallerTest, AnAnswerClearsAPodsTimeouts) {
  Listener hung("");
  Listener quick("HTTP/1.1 200 OK\r\n\r\n");
  HttpCallerOptions options;
  options.max_concurrent = 1;
  options.timeout = std::chrono::milliseconds(200);
  Caller(options);
  Outcome timed_out = Run({"127.0.0.1", hung.port(), "POST", "/", "a"});
  ASSERT_THAT(timed_out.result.Describe(), HasSubstr("no answer within"));
  ASSERT_TRUE(Run({"127.0.0.1", quick.port(), "POST", "/", "a"}).result.ok());
  std::vector<std::string> order;
  Listener held("HTTP/1.1 200 OK\r\n\r\n", "127.0.0.1", /*hold=*/true);
  caller_->Call({"127.0.0.1", held.port(), "POST", "/", "b"},
                [&](const HttpCallResult&) { order.push_back("b"); });
  caller_->Call({"127.0.0.1", quick.port(), "POST", "/", "a"},
                [&](const HttpCallResult&) { order.push_back("a"); });
  caller_->Call({"127.0.0.1", quick.port(), "POST", "/", "c"},
                [&](const HttpCallResult&) { order.push_back("c"); });
  held.Release();
  ASSERT_TRUE(loop_.RunUntil([&] { return order.size() == 3; }));
  EXPECT_THAT(order, ::testing::ElementsAre("b", "a", "c")) << "a answered since its timeout";
  hung.Release();
}

TEST_F(HttpCallerTest, PodsThatTimedOutLeaveSlotsForPodsThatAnswer) {
  Listener hung("");
  Listener quick("HTTP/1.1 200 OK\r\n\r\n");
  HttpCallerOptions options;
  options.max_concurrent = 4;  // a quarter, one slot, kept for pods without a timeout
  options.timeout = std::chrono::milliseconds(200);
  Caller(options);
  int first_round = 0;
  for (const std::string pod : {"h1", "h2", "h3", "h4"}) {
    caller_->Call({"127.0.0.1", hung.port(), "POST", "/", pod},
                  [&, pod](const HttpCallResult&) {
                    ++first_round;
                    caller_->Call({"127.0.0.1", hung.port(), "POST", "/", pod},
                                  [](const HttpCallResult&) {});
                  });
  }
  ASSERT_TRUE(loop_.RunUntil([&] { return first_round == 4; }));
  EXPECT_EQ(caller_->in_flight(), 3u) << "retries of pods that timed out hold three slots";
  EXPECT_EQ(caller_->queued(), 1u);
  bool answered = false;
  caller_->Call({"127.0.0.1", quick.port(), "POST", "/", "p"},
                [&](const HttpCallResult& r) { answered = r.ok(); });
  EXPECT_EQ(caller_->in_flight(), 4u) << "the healthy pod's call starts at once";
  EXPECT_EQ(caller_->queued(), 1u);
  ASSERT_TRUE(loop_.RunUntil([&] { return answered; }));
  hung.Release();
}

TEST_F(HttpCallerTest, CancelledCallsNeverCallBack) {
  Listener held("");
  HttpCallerOptions options;
  options.max_concurrent = 1;
  Caller(options);
  bool first = false;
  bool second = false;
  const auto a = caller_->Call({"127.0.0.1", held.port(), "POST", "/", ""},
                               [&](const HttpCallResult&) { first = true; });
  const auto b = caller_->Call({"127.0.0.1", held.port(), "POST", "/", ""},
                               [&](const HttpCallResult&) { second = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return held.requests().size() == 1; }));
  caller_->Cancel(b);  // queued
  caller_->Cancel(a);  // in flight
  EXPECT_EQ(caller_->in_flight(), 0u);
  EXPECT_EQ(caller_->queued(), 0u);
  held.Release();
  loop_.RunUntil([] { return false; }, std::chrono::milliseconds(100));
  EXPECT_FALSE(first);
  EXPECT_FALSE(second);
}

TEST_F(HttpCallerTest, AnOversizedHeadEndsTheRead) {
  Listener big("HTTP/1.1 200 OK\r\nX: " + std::string(100000, 'a') + "\r\n\r\n");
  HttpCallerOptions options;
  options.max_response_head = 1024;
  Caller(options);
  Outcome o = Run({"127.0.0.1", big.port(), "POST", "/", ""});
  EXPECT_TRUE(o.result.ok()) << o.result.Describe();
}

TEST_F(HttpCallerTest, CloseWithCallsInFlightClosesEveryHandle) {
  Listener held("");
  Caller();
  bool called = false;
  caller_->Call({"127.0.0.1", held.port(), "POST", "/", ""},
                [&](const HttpCallResult&) { called = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return held.requests().size() == 1; }));
  bool closed = false;
  caller_->Close([&] { closed = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return closed; }));
  caller_.reset();
  EXPECT_FALSE(called);
  held.Release();
}

}  // namespace
}  // namespace reload
