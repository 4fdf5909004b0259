#include "logging/structured_log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <sstream>
#include <string>

// Every allocation of this test binary is counted, so a test can prove that a disabled line
// allocates nothing.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace logging {
namespace {

struct Meta {
  std::string namespace_;
  std::string name;
};
enum class Kind { kConfigMap };
const char* ObjectKindName(Kind) { return "configmap"; }
struct Ref {
  Kind kind = Kind::kConfigMap;
  std::string namespace_;
  std::string name;
};

// spdlog's default logger writing into a string while the test runs.
class CaptureDefaultLogger {
 public:
  explicit CaptureDefaultLogger(spdlog::level::level_enum level)
      : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "t", std::make_shared<spdlog::sinks::ostream_sink_st>(out_));
    logger->set_pattern("%v");
    logger->set_level(level);
    spdlog::set_default_logger(logger);
  }
  ~CaptureDefaultLogger() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(StructuredLogTest, TextFormIsKlogs) {
  const Meta pod{"default", "web"};
  const Ref ref{Kind::kConfigMap, "default", "app-config"};
  EXPECT_EQ(FormatStructuredLine("MountVolume.SetUp succeeded", {{"pod", KObj(pod)},
                                                                 {"podUID", std::string("u-1")},
                                                                 {"volume", "cfg"},
                                                                 {"object", KRef(ref)},
                                                                 {"count", 3},
                                                                 {"bytes", size_t{10}},
                                                                 {"delta", -2},
                                                                 {"fresh", true}}),
            R"("MountVolume.SetUp succeeded" pod="default/web" podUID="u-1" volume="cfg" )"
            R"(object="configmap/default/app-config" count=3 bytes=10 delta=-2 fresh=true)");
  // A cluster-scoped object has no namespace part.
  EXPECT_EQ(FormatStructuredLine("m", {{"object", KRef("node", "", "n1")}}),
            R"("m" object="node/n1")");
  EXPECT_EQ(FormatStructuredLine("m", {}), R"("m")");
  // A name that is not known is left out rather than written empty.
  EXPECT_EQ(FormatStructuredLine("m", {{"pod", Value::IfSet("")}, {"volume", Value::IfSet("v")}}),
            R"("m" volume="v")");
  // An object that may be missing (KObjOf): its name, or nothing.
  struct Object {
    Meta metadata;
  };
  const auto object = std::make_shared<const Object>(Object{pod});
  EXPECT_EQ(FormatStructuredLine("m", {{"pod", KObjOf(object)}}), R"("m" pod="default/web")");
  EXPECT_EQ(FormatStructuredLine("m", {{"pod", KObjOf(std::shared_ptr<const Object>())}}),
            R"("m")");
  EXPECT_EQ(FormatStructuredLine("m", {{"pod", KObjOf(object.get())}}), R"("m" pod="default/web")");
  // An API Kind is written in lower case, as kubectl names objects; names are kept as they are.
  EXPECT_EQ(FormatStructuredLine("m", {{"object", KRef("ConfigMap", "NS", "App")}}),
            R"("m" object="configmap/NS/App")");
}

// Values are quoted as klog's text format does (GoQuote; go_quote_test.cc has its own table).
TEST(StructuredLogTest, ValuesQuotedAsGoStrconvQuote) {
  struct Case {
    const char* name;
    std::string in;
    std::string quoted;
  };
  const Case cases[] = {
      {"plain", "abc", R"("abc")"},
      {"quote and backslash", "a\"b\\c", R"("a\"b\\c")"},
      {"newline tab cr", "a\nb\tc\rd", R"("a\nb\tc\rd")"},
      {"other controls", std::string("\a\b\f\v\x01\x1f\x7f", 7), R"("\a\b\f\v\x01\x1f\x7f")"},
      {"nul", std::string("a\0b", 3), R"("a\x00b")"},
      {"valid UTF-8 kept", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
       "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
      {"invalid bytes", "bad \xff\xfe end", R"("bad \xff\xfe end")"},
      {"truncated sequence", "x\xe2\x82", R"("x\xe2\x82")"},
      {"overlong", "\xc0\xaf", R"("\xc0\xaf")"},
      {"surrogate", "\xed\xa0\x80", R"("\xed\xa0\x80")"},
      {"C1 control", "\xc2\x85", R"("\u0085")"},
      {"line separator", "a\xe2\x80\xa8z", R"("a\u2028z")"},
      {"byte order mark", "\xef\xbb\xbfx", R"("\ufeffx")"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatStructuredLine("m", {{"v", c.in}}), "\"m\" v=" + c.quoted) << c.name;
    EXPECT_EQ(FormatStructuredLine(c.in, {}), c.quoted) << c.name;
  }
}

TEST(StructuredLogTest, KeyRules) {
  EXPECT_TRUE(Key::Valid("pod"));
  EXPECT_TRUE(Key::Valid("podUID"));
  EXPECT_TRUE(Key::Valid("retryInMs2"));
  EXPECT_FALSE(Key::Valid(""));
  EXPECT_FALSE(Key::Valid("Pod"));
  EXPECT_FALSE(Key::Valid("pod uid"));
  EXPECT_FALSE(Key::Valid("pod=x"));
  EXPECT_FALSE(Key::Valid("msg"));
  EXPECT_FALSE(Key::Valid("ts"));
  EXPECT_FALSE(Key::Valid("level"));
}

TEST(StructuredLogTest, EmitWritesOneLineAtItsLevel) {
  CaptureDefaultLogger capture(spdlog::level::info);
  const Meta pod{"shop", "web-0"};
  Debug("not written", {{"pod", KObj(pod)}});
  Warn("volume failed", {{"pod", KObj(pod)}, {"err", base::Status::Error("bad\nthing")}});
  EXPECT_EQ(capture.text(), "\"volume failed\" pod=\"shop/web-0\" err=\"bad\\nthing\"\n");
}

TEST(StructuredLogTest, DisabledLineAllocatesNothing) {
  CaptureDefaultLogger capture(spdlog::level::warn);
  const Meta pod{"a-namespace-name-longer-than-sso", "a-pod-name-longer-than-small-strings"};
  const std::string volume = "a-volume-name-longer-than-small-strings";
  const base::Status err = base::Status::Error("an error message longer than small strings");
  const long before = g_allocations.load();
  for (int i = 0; i < 100; ++i) {
    Info(
        "MountVolume.SetUp succeeded",
        {{"pod", KObj(pod)}, {"podUID", pod.name}, {"volume", volume}, {"err", err}, {"count", i}});
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_EQ(capture.text(), "");
  // The same line at an enabled level is written (so the count above measured a real call).
  Warn("MountVolume.SetUp failed", {{"pod", KObj(pod)}, {"volume", volume}});
  EXPECT_NE(capture.text().find("volume=\"a-volume-name"), std::string::npos);
}

}  // namespace
}  // namespace logging
