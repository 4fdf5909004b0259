#include "reload/reload_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>

namespace reload {
namespace {

using ::testing::HasSubstr;

base::Result<std::optional<ReloadSpec>> Parse(std::map<std::string, std::string> a) {
  return ParseReloadAnnotations(a);
}

std::string ErrorOf(const std::string& reload) {
  auto r = Parse({{kReloadAnnotation, reload}});
  EXPECT_FALSE(r.ok()) << reload;
  return r.ok() ? "" : r.status().message();
}

TEST(ReloadSpecTest, NoAnnotationIsNoSpec) {
  auto r = Parse({{"other", "x"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(ReloadSpecTest, HttpActionDefaultsToPostAndRoot) {
  auto r = Parse({{kReloadAnnotation, "http://:9090"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)->actions.size(), 1u);
  const Action& a = (*r)->actions[0];
  EXPECT_EQ(a.kind, Action::Kind::kHttp);
  EXPECT_EQ(a.http.method, "POST");
  EXPECT_EQ(a.http.port, 9090);
  EXPECT_EQ(a.http.path, "/");
  EXPECT_EQ(a.Text(), "POST http://:9090/");
  EXPECT_EQ((*r)->delay, kDefaultReloadDelay);
  EXPECT_FALSE((*r)->volumes.has_value());
}

TEST(ReloadSpecTest, SeveralActionsMethodsQueriesAndSignals) {
  auto r = Parse({{kReloadAnnotation,
                   " POST http://:9090/-/reload , PUT http://:8080/a/b?x=1&y=%2F ,"
                   "GET http://:1/,signal:SIGHUP, signal:SIGUSR2@nginx-1"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& actions = (*r)->actions;
  ASSERT_EQ(actions.size(), 5u);
  EXPECT_EQ(actions[0].Text(), "POST http://:9090/-/reload");
  EXPECT_EQ(actions[1].http.method, "PUT");
  EXPECT_EQ(actions[1].http.path, "/a/b?x=1&y=%2F");
  EXPECT_EQ(actions[2].http.method, "GET");
  EXPECT_EQ(actions[3].kind, Action::Kind::kSignal);
  EXPECT_EQ(actions[3].signal.signal, SIGHUP);
  EXPECT_EQ(actions[3].signal.container, "");
  EXPECT_EQ(actions[4].signal.signal, SIGUSR2);
  EXPECT_EQ(actions[4].signal.container, "nginx-1");
  EXPECT_EQ(actions[4].Text(), "signal:SIGUSR2@nginx-1");
}

TEST(ReloadSpecTest, AnyHostIsRefused) {
  for (const char* url : {"http://10.0.0.1:80/x", "http://localhost:80/", "http://[::1]:80/",
                          "http://169.254.169.254:80/latest", "http://metadata/x"}) {
    EXPECT_THAT(ErrorOf(url), HasSubstr("the host must be empty")) << url;
  }
  EXPECT_THAT(ErrorOf("http://user@:80/"), HasSubstr("user info"));
  EXPECT_THAT(ErrorOf("http://:80@evil:81/"), HasSubstr("user info"));
}

TEST(ReloadSpecTest, OnlyPlainHttpAndKnownMethods) {
  EXPECT_THAT(ErrorOf("https://:443/"), HasSubstr("no TLS to pods"));
  EXPECT_THAT(ErrorOf("ftp://:21/"), HasSubstr("expected http://:PORT/PATH"));
  EXPECT_THAT(ErrorOf("DELETE http://:80/"), HasSubstr("not one of POST, PUT, GET"));
  EXPECT_THAT(ErrorOf("post http://:80/"), HasSubstr("not one of POST, PUT, GET"));
  EXPECT_THAT(ErrorOf("exec:/bin/sh"), HasSubstr("expected http://:PORT/PATH"));
}

TEST(ReloadSpecTest, PortsAreChecked) {
  for (const char* url : {"http://:/", "http://:0/", "http://:65536/", "http://:+80/",
                          "http://:80a/", "http://:123456/"}) {
    EXPECT_THAT(ErrorOf(url), HasSubstr("port must be 1-65535")) << url;
  }
  auto r = Parse({{kReloadAnnotation, "http://:65535/"}});
  ASSERT_TRUE(r.ok());
}

TEST(ReloadSpecTest, PathsCarryNothingButAPath) {
  const std::string injected = ErrorOf("http://:80/a\r\nHost: evil");
  EXPECT_THAT(injected, HasSubstr("control character"));
  EXPECT_EQ(injected.find_first_of("\r\n"), std::string::npos) << "errors are quoted";
  EXPECT_THAT(ErrorOf("http://:80/a\nb"), HasSubstr("control character"));
  EXPECT_THAT(ErrorOf(std::string("http://:80/a") + '\0' + "b"), HasSubstr("control character"));
  EXPECT_THAT(ErrorOf("http://:80/a b"), HasSubstr("' ' is not allowed"));
  EXPECT_THAT(ErrorOf("http://:80/a#frag"), HasSubstr("fragment"));
  EXPECT_THAT(ErrorOf("http://:80/a\\b"), HasSubstr("'\\' is not allowed"));
  EXPECT_THAT(ErrorOf("http://:80/%zz"), HasSubstr("%HH"));
  EXPECT_THAT(ErrorOf("http://:80/%4"), HasSubstr("%HH"));
  EXPECT_THAT(ErrorOf("http://:80/\xc3\xa9"), HasSubstr("non-ASCII"));
  EXPECT_THAT(ErrorOf("http://:80/" + std::string(kMaxPathBytes, 'a')), HasSubstr("longer than"));
  auto r = Parse({{kReloadAnnotation, "http://:80?reload=1"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->actions[0].http.path, "/?reload=1");
}

TEST(ReloadSpecTest, SignalsAreLimited) {
  EXPECT_THAT(ErrorOf("signal:SIGKILL"), HasSubstr("not one of SIGHUP, SIGUSR1, SIGUSR2"));
  EXPECT_THAT(ErrorOf("signal:9"), HasSubstr("not one of"));
  EXPECT_THAT(ErrorOf("signal:HUP"), HasSubstr("not one of"));
  EXPECT_THAT(ErrorOf("signal:SIGHUP@"), HasSubstr("not a valid container name"));
  EXPECT_THAT(ErrorOf("signal:SIGHUP@../x"), HasSubstr("not a valid container name"));
  EXPECT_THAT(ErrorOf("signal:SIGHUP@Web"), HasSubstr("not a valid container name"));
}

TEST(ReloadSpecTest, ErrorsNameTheAnnotationAndTheItem) {
  const std::string e = ErrorOf("http://:80/, https://:1/x");
  EXPECT_THAT(e, HasSubstr("annotation volumemanager.io/reload: action 2 \"https://:1/x\""));
  EXPECT_THAT(ErrorOf("http://:80/,"), HasSubstr("action 2 \"\": empty action"));
  EXPECT_THAT(ErrorOf("http://:80/x, http://:80/x"), HasSubstr("listed twice"));
  std::string many;
  for (size_t i = 0; i <= kMaxActions; ++i) many += "http://:" + std::to_string(i + 1) + "/,";
  many.pop_back();
  EXPECT_THAT(ErrorOf(many), HasSubstr("more than 8 actions"));
  EXPECT_THAT(ErrorOf(std::string(kMaxAnnotationBytes + 1, 'x')), HasSubstr("longer than"));
}

TEST(ReloadSpecTest, VolumesAndDelay) {
  auto r = Parse({{kReloadAnnotation, "http://:80/"},
                  {kReloadVolumesAnnotation, "config, certs"},
                  {kReloadDelayAnnotation, "2.5s"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE((*r)->volumes.has_value());
  EXPECT_EQ(*(*r)->volumes, (std::vector<std::string>{"config", "certs"}));
  EXPECT_EQ((*r)->delay, std::chrono::milliseconds(2500));

  auto zero = Parse({{kReloadAnnotation, "http://:80/"}, {kReloadDelayAnnotation, "0"}});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)->delay, std::chrono::milliseconds(0));

  for (const char* bad : {"soon", "-1s", "11m", "1"}) {
    auto e = Parse({{kReloadAnnotation, "http://:80/"}, {kReloadDelayAnnotation, bad}});
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_THAT(e.status().message(), HasSubstr("volumemanager.io/reload-delay")) << bad;
  }
  auto empty = Parse({{kReloadAnnotation, "http://:80/"}, {kReloadVolumesAnnotation, "a,,b"}});
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("empty volume name"));
}

TEST(ReloadSpecTest, CompanionsWithoutActionsAreAnError) {
  auto r = Parse({{kReloadDelayAnnotation, "1s"}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("without volumemanager.io/reload"));
  auto v = Parse({{kReloadVolumesAnnotation, "a"}});
  ASSERT_FALSE(v.ok());
}

}  // namespace
}  // namespace reload
