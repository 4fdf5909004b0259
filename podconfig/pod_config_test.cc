#include "podconfig/pod_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/log_capture.h"

namespace podconfig {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

kube::Pod MakePod(const std::string& uid, const std::string& name,
                  std::function<void(kube::Pod*)> mutate = nullptr) {
  kube::Pod pod;
  pod.metadata.uid = uid;
  pod.metadata.name = name;
  pod.metadata.namespace_ = "default";
  pod.spec.node_name = "node-1";
  kube::Volume v;
  v.name = "config";
  pod.spec.volumes.push_back(v);
  pod.status.phase = "Running";
  if (mutate) mutate(&pod);
  return pod;
}

// One update as the tests compare it: operation and the UIDs in order.
struct Seen {
  PodOp op;
  std::vector<std::string> uids;
  bool operator==(const Seen&) const = default;
};

void PrintTo(const Seen& s, std::ostream* os) {
  *os << PodOpName(s.op) << "[";
  for (const auto& u : s.uids) *os << u << " ";
  *os << "]";
}

// The pods as a source delivers them.
std::vector<PodPtr> Shared(std::vector<kube::Pod> pods) {
  std::vector<PodPtr> out;
  for (kube::Pod& pod : pods) out.push_back(std::make_shared<const kube::Pod>(std::move(pod)));
  return out;
}

struct MergeCase {
  const char* name;
  std::optional<std::vector<kube::Pod>> before;  // the source's earlier state, if any
  std::vector<kube::Pod> after;
  std::vector<Seen> want;  // updates caused by `after`
};

void PrintTo(const MergeCase& c, std::ostream* os) { *os << c.name; }

class MergeTest : public ::testing::TestWithParam<MergeCase> {};

TEST_P(MergeTest, EmitsTheKubeletsUpdates) {
  const MergeCase& c = GetParam();
  std::vector<Seen> seen;
  PodConfig config([&](const PodUpdate& u) {
    EXPECT_EQ(u.source, "file");
    Seen s{u.op, {}};
    for (const auto& p : u.pods) s.uids.push_back(p->metadata.uid);
    seen.push_back(s);
  });
  auto sink = config.RegisterSource("file");
  if (c.before) sink(Shared(*c.before));
  seen.clear();
  sink(Shared(c.after));
  EXPECT_EQ(seen, c.want);
}

std::vector<MergeCase> MergeCases() {
  auto a = [](auto... m) { return MakePod("uid-a", "a", m...); };
  auto b = [](auto... m) { return MakePod("uid-b", "b", m...); };
  auto c = [](auto... m) { return MakePod("uid-c", "c", m...); };
  using P = std::vector<kube::Pod>;
  return {
      {"first_empty_delivery_is_an_empty_add", std::nullopt, {}, {{PodOp::kAdd, {}}}},
      {"first_delivery_adds_pods", std::nullopt, {a(), b()}, {{PodOp::kAdd, {"uid-a", "uid-b"}}}},
      {"unchanged_emits_nothing", P{a(), b()}, {a(), b()}, {}},
      {"new_uid_is_an_add", P{a()}, {a(), b()}, {{PodOp::kAdd, {"uid-b"}}}},
      {"missing_uid_is_a_remove", P{a(), b()}, {b()}, {{PodOp::kRemove, {"uid-a"}}}},
      {"empty_delivery_removes_all", P{a(), b()}, {}, {{PodOp::kRemove, {"uid-a", "uid-b"}}}},
      {"spec_change_is_an_update",
       P{a()},
       {a([](kube::Pod* p) { p->spec.volumes[0].name = "other"; })},
       {{PodOp::kUpdate, {"uid-a"}}}},
      {"label_change_is_an_update",
       P{a()},
       {a([](kube::Pod* p) { p->metadata.labels["k"] = "v"; })},
       {{PodOp::kUpdate, {"uid-a"}}}},
      {"annotation_change_is_an_update",
       P{a()},
       {a([](kube::Pod* p) { p->metadata.annotations["k"] = "v"; })},
       {{PodOp::kUpdate, {"uid-a"}}}},
      {"grace_period_change_is_an_update",
       P{a()},
       {a([](kube::Pod* p) { p->metadata.deletion_grace_period_seconds = 30; })},
       {{PodOp::kUpdate, {"uid-a"}}}},
      {"deletion_timestamp_set_is_a_delete",
       P{a()},
       {a([](kube::Pod* p) { p->metadata.deletion_timestamp = "2024-01-01T00:00:00Z"; })},
       {{PodOp::kDelete, {"uid-a"}}}},
      {"deletion_timestamp_unchanged_emits_nothing",
       P{a([](kube::Pod* p) { p->metadata.deletion_timestamp = "2024-01-01T00:00:00Z"; })},
       {a([](kube::Pod* p) { p->metadata.deletion_timestamp = "2024-01-01T00:00:00Z"; })},
       {}},
      {"status_only_change_is_a_reconcile",
       P{a()},
       {a([](kube::Pod* p) { p->status.phase = "Succeeded"; })},
       {{PodOp::kReconcile, {"uid-a"}}}},
      {"resource_version_only_change_emits_nothing",
       P{a()},
       {a([](kube::Pod* p) { p->metadata.resource_version = "42"; })},
       {}},
      {"spec_and_status_change_is_one_update",
       P{a()},
       {a([](kube::Pod* p) {
         p->spec.node_name = "node-2";
         p->status.phase = "Failed";
       })},
       {{PodOp::kUpdate, {"uid-a"}}}},
      {"duplicate_full_name_keeps_the_first",
       P{},
       {a(), MakePod("uid-a2", "a"), b()},
       {{PodOp::kAdd, {"uid-a", "uid-b"}}}},
      {"same_name_other_namespace_is_no_duplicate",
       P{},
       {a(), MakePod("uid-a2", "a", [](kube::Pod* p) { p->metadata.namespace_ = "shop"; })},
       {{PodOp::kAdd, {"uid-a", "uid-a2"}}}},
      {"duplicate_uid_keeps_the_first",
       P{},
       {a(), MakePod("uid-a", "z")},
       {{PodOp::kAdd, {"uid-a"}}}},
      {"pod_without_uid_is_dropped", P{}, {MakePod("", "x"), a()}, {{PodOp::kAdd, {"uid-a"}}}},
      {"all_kinds_in_kubelet_order",
       P{a(), b(), c(), MakePod("uid-d", "d")},
       {b([](kube::Pod* p) { p->metadata.labels["x"] = "y"; }),
        c([](kube::Pod* p) { p->metadata.deletion_timestamp = "2024-01-01T00:00:00Z"; }),
        MakePod("uid-d", "d", [](kube::Pod* p) { p->status.phase = "Failed"; }),
        MakePod("uid-e", "e")},
       {{PodOp::kRemove, {"uid-a"}},
        {PodOp::kAdd, {"uid-e"}},
        {PodOp::kUpdate, {"uid-b"}},
        {PodOp::kDelete, {"uid-c"}},
        {PodOp::kReconcile, {"uid-d"}}}},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, MergeTest, ::testing::ValuesIn(MergeCases()),
                         [](const auto& p) { return std::string(p.param.name); });

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Each pod added, updated or removed is one info line naming it; a large batch is one line.
TEST(PodConfigTest, LogsEachPodChangeOnceAtInfoAndABatchAsOneLine) {
  vmtest::LogCapture logs;
  spdlog::default_logger()->set_level(spdlog::level::info);
  PodConfig config([](const PodUpdate&) {});
  auto sink = config.RegisterSource("file");
  sink(Shared({MakePod("u1", "a")}));
  sink(Shared({MakePod("u1", "a", [](kube::Pod* p) { p->metadata.labels["v"] = "2"; })}));
  sink({});
  const std::string text = logs.text();
  EXPECT_EQ(Count(text, "Pod added"), 1u) << text;
  EXPECT_EQ(Count(text, "Pod updated"), 1u) << text;
  EXPECT_EQ(Count(text, "Pod removed"), 1u) << text;
  EXPECT_EQ(Count(text, "pod=\"default/a\" podUID=\"u1\" source=\"file\""), 3u) << text;

  std::vector<kube::Pod> many;
  for (int i = 0; i < 11; ++i) many.push_back(MakePod("m" + std::to_string(i), "p"));
  for (int i = 0; i < 11; ++i) many[i].metadata.name += std::to_string(i);
  sink(Shared(many));
  const std::string after = logs.text().substr(text.size());
  EXPECT_EQ(Count(after, "Pods added"), 1u) << after;
  EXPECT_NE(after.find("count=11"), std::string::npos) << after;
  EXPECT_EQ(Count(after, "Pod added"), 0u) << "each pod of a batch only at debug";
}

// The lines of `text` that name `pod` ("namespace/name").
std::vector<std::string> LinesOf(const std::string& text, const std::string& pod) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (line.find("pod=\"" + pod + "\"") != std::string::npos) out.push_back(std::move(line));
    start = end + 1;
  }
  return out;
}

// Issue 42, item 6a: a DELETE is a pod marked for deletion (deletionTimestamp set), still in its
// source; it is graceful only with a grace period. With deletionGracePeriodSeconds 0 (a forced
// delete, or the kubelet's final delete of a pod whose containers stopped) the API object goes at
// once: it was logged "Pod deleted (graceful)".
TEST(PodConfigTest, APodMarkedForDeletionIsGracefulOnlyWithAGracePeriod) {
  vmtest::LogCapture logs;
  spdlog::default_logger()->set_level(spdlog::level::info);
  PodConfig config([](const PodUpdate&) {});
  auto sink = config.RegisterSource("api");
  auto marked = [](int64_t grace) {
    return [grace](kube::Pod* p) {
      p->metadata.deletion_timestamp = "2024-01-01T00:00:30Z";
      p->metadata.deletion_grace_period_seconds = grace;
    };
  };
  sink(Shared({MakePod("u1", "graceful"), MakePod("u2", "forced")}));
  sink(Shared({MakePod("u1", "graceful", marked(30)), MakePod("u2", "forced", marked(0))}));
  // The graceful one's kubelet stops its containers, then deletes it with grace 0: the API server
  // lowers the grace period (an update the watch shows) before it removes the object.
  sink(Shared({MakePod("u1", "graceful", marked(0))}));
  sink({});
  const std::string text = logs.text();

  const std::vector<std::string> graceful = LinesOf(text, "default/graceful");
  ASSERT_EQ(graceful.size(), 4u) << text;
  EXPECT_NE(graceful[1].find("\"Pod marked for deletion (graceful)\""), std::string::npos)
      << graceful[1];
  EXPECT_NE(graceful[1].find("gracePeriodSeconds=30"), std::string::npos) << graceful[1];
  EXPECT_NE(graceful[2].find("\"Pod marked for deletion with no grace period\""), std::string::npos)
      << graceful[2];
  EXPECT_NE(graceful[3].find("\"Pod removed\""), std::string::npos) << graceful[3];

  const std::vector<std::string> forced = LinesOf(text, "default/forced");
  ASSERT_EQ(forced.size(), 3u) << text;
  EXPECT_NE(forced[1].find("\"Pod marked for deletion with no grace period\""), std::string::npos)
      << forced[1];
  EXPECT_NE(forced[1].find("gracePeriodSeconds=0"), std::string::npos) << forced[1];
  for (const std::string& line : forced) {
    EXPECT_EQ(line.find("graceful"), std::string::npos)
        << "grace period 0 is not graceful: " << line;
  }
  EXPECT_EQ(graceful[2].find("graceful)"), std::string::npos) << graceful[2];
}

TEST(PodConfigTest, AllSourcesSeenAfterEachDeliveredOnce) {
  PodConfig config([](const PodUpdate&) {});
  EXPECT_TRUE(config.AllSourcesSeen());
  auto file = config.RegisterSource("file");
  auto http = config.RegisterSource("http");
  EXPECT_FALSE(config.AllSourcesSeen());
  file(Shared({MakePod("u1", "a")}));
  EXPECT_TRUE(config.SourceSeen("file"));
  EXPECT_FALSE(config.AllSourcesSeen());
  http({});
  EXPECT_TRUE(config.AllSourcesSeen());
}

TEST(PodConfigTest, SourcesAreIndependent) {
  std::vector<std::pair<std::string, Seen>> seen;
  PodConfig config([&](const PodUpdate& u) {
    Seen s{u.op, {}};
    for (const auto& p : u.pods) s.uids.push_back(p->metadata.uid);
    seen.emplace_back(u.source, s);
  });
  auto file = config.RegisterSource("file");
  auto http = config.RegisterSource("http");
  file(Shared({MakePod("u1", "a")}));
  http(Shared({MakePod("u2", "b")}));
  file({});  // removes u1 only
  EXPECT_THAT(seen, ElementsAre(std::pair<std::string, Seen>{"file", {PodOp::kAdd, {"u1"}}},
                                std::pair<std::string, Seen>{"http", {PodOp::kAdd, {"u2"}}},
                                std::pair<std::string, Seen>{"file", {PodOp::kRemove, {"u1"}}}));
  EXPECT_THAT(config.PodsOf("file"), IsEmpty());
  EXPECT_EQ(config.PodsOf("http").size(), 1u);
}

TEST(PodConfigTest, AnnotatesPodsWithTheirSource) {
  std::vector<PodPtr> added;
  PodConfig config([&](const PodUpdate& u) {
    if (u.op == PodOp::kAdd) added = u.pods;
  });
  const std::vector<PodPtr> delivered = Shared({MakePod("u1", "a")});
  config.RegisterSource("api")(delivered);
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0]->metadata.annotations.at(kConfigSourceAnnotation), "api");
  // A copy was annotated: the source's object, shared and immutable, is left as it was.
  EXPECT_EQ(delivered[0]->metadata.annotations.count(kConfigSourceAnnotation), 0u);
  EXPECT_EQ(config.PodsOf("api").at("u1"), added[0]);
}

// A pod that already names its source (the file source annotates its own) is passed on and kept
// as the very object the source holds: one copy of each pod in the daemon, not one per stage.
TEST(PodConfigTest, APodAlreadyAnnotatedWithItsSourceIsSharedNotCopied) {
  std::vector<PodUpdate> seen;
  PodConfig config([&](const PodUpdate& u) { seen.push_back(u); });
  auto sink = config.RegisterSource("file");
  auto pod = std::make_shared<const kube::Pod>(MakePod(
      "u1", "a", [](kube::Pod* p) { p->metadata.annotations[kConfigSourceAnnotation] = "file"; }));
  sink({pod});
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_EQ(seen[0].pods.size(), 1u);
  EXPECT_EQ(seen[0].pods[0], pod);
  EXPECT_EQ(config.PodsOf("file").at("u1"), pod);
  // Annotated for another source, it is copied (and the copy annotated).
  auto http = config.RegisterSource("http");
  http({std::make_shared<const kube::Pod>(MakePod("u2", "b", [](kube::Pod* p) {
    p->metadata.annotations[kConfigSourceAnnotation] = "file";
  }))});
  EXPECT_EQ(config.PodsOf("http").at("u2")->metadata.annotations.at(kConfigSourceAnnotation),
            "http");
}

TEST(PodConfigTest, UpdateCarriesTheNewPod) {
  std::vector<PodUpdate> seen;
  PodConfig config([&](const PodUpdate& u) { seen.push_back(u); });
  auto sink = config.RegisterSource("file");
  sink(Shared({MakePod("u1", "a")}));
  sink(Shared({MakePod("u1", "a", [](kube::Pod* p) { p->metadata.labels["tier"] = "web"; })}));
  ASSERT_EQ(seen.size(), 2u);
  ASSERT_EQ(seen[1].op, PodOp::kUpdate);
  EXPECT_EQ(seen[1].pods.at(0)->metadata.labels.at("tier"), "web");
  EXPECT_EQ(config.PodsOf("file").at("u1")->metadata.labels.at("tier"), "web");
}

}  // namespace
}  // namespace podconfig
