#include "volumemanager/journal/owned_paths.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace volumemanager {
namespace {

using Owned = OwnedPaths::Owned;

std::vector<std::pair<std::string, uint64_t>> All(const OwnedPaths& paths) {
  std::vector<std::pair<std::string, uint64_t>> out;
  paths.ForEach([&](const std::string& path, const Owned& o) { out.emplace_back(path, o.inode); });
  return out;
}

std::vector<std::string> OfPod(const OwnedPaths& paths, const std::string& uid) {
  std::vector<std::string> out;
  paths.ForEachOfPod(uid, [&](const std::string& path, const Owned&) { out.push_back(path); });
  return out;
}

TEST(OwnedPathsTest, FindsWhatWasPutAndNothingElse) {
  OwnedPaths p;
  EXPECT_TRUE(p.Emplace("pods/u1", {OwnedKind::kDir, 0}).second);
  EXPECT_TRUE(
      p.Emplace("pods/u1/volumes/kubernetes.io~secret/tls", {OwnedKind::kVolume, 7}).second);
  ASSERT_NE(p.Find("pods/u1"), nullptr);
  EXPECT_EQ(p.Find("pods/u1")->kind, OwnedKind::kDir);
  ASSERT_NE(p.Find("pods/u1/volumes/kubernetes.io~secret/tls"), nullptr);
  EXPECT_EQ(p.Find("pods/u1/volumes/kubernetes.io~secret/tls")->inode, 7u);
  for (const char* other : {"pods/u1/volumes", "pods/u1/volumes/kubernetes.io~secret",
                            "pods/u1/volumes/kubernetes.io~secret/tl", "pods/u2", "pods/u",
                            "pods/u1/", "pods/", "pods", "other/u1", ""}) {
    EXPECT_EQ(p.Find(other), nullptr) << other;
  }
  EXPECT_EQ(p.size(), 2u);
}

TEST(OwnedPathsTest, APathPutTwiceKeepsItsFirstEntry) {
  OwnedPaths p;
  EXPECT_TRUE(p.Emplace("pods/u1/volumes", {OwnedKind::kDir, 3}).second);
  auto [entry, inserted] = p.Emplace("pods/u1/volumes", {OwnedKind::kVolume, 9});
  EXPECT_FALSE(inserted);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->kind, OwnedKind::kDir);
  EXPECT_EQ(entry->inode, 3u);
  entry->inode = 4;  // an entry returned is the one kept
  EXPECT_EQ(p.Find("pods/u1/volumes")->inode, 4u);
  EXPECT_EQ(p.size(), 1u);
}

TEST(OwnedPathsTest, PathsNotBelowAPodAreRefused) {
  OwnedPaths p;
  for (const char* bad : {"", "pods", "pods/", "pods//x", "pods/u1/", "x/u1"}) {
    EXPECT_EQ(p.Emplace(bad, {OwnedKind::kDir, 0}).first, nullptr) << bad;
  }
  EXPECT_EQ(p.size(), 0u);
  EXPECT_TRUE(All(p).empty());
}

TEST(OwnedPathsTest, ListsEachPodsEntriesInPathOrderAndErasesThem) {
  OwnedPaths p;
  // Put out of order, across two pods whose UIDs share a prefix.
  p.Emplace("pods/u1/volumes/kubernetes.io~configmap/b", {OwnedKind::kVolume, 2});
  p.Emplace("pods/u1-x", {OwnedKind::kDir, 0});
  p.Emplace("pods/u1/volumes", {OwnedKind::kDir, 0});
  p.Emplace("pods/u1", {OwnedKind::kDir, 0});
  p.Emplace("pods/u1/volumes/kubernetes.io~configmap/a", {OwnedKind::kVolume, 1});
  EXPECT_EQ(OfPod(p, "u1"),
            (std::vector<std::string>{"pods/u1", "pods/u1/volumes",
                                      "pods/u1/volumes/kubernetes.io~configmap/a",
                                      "pods/u1/volumes/kubernetes.io~configmap/b"}));
  EXPECT_EQ(OfPod(p, "u1-x"), std::vector<std::string>{"pods/u1-x"});
  EXPECT_TRUE(OfPod(p, "u").empty());
  EXPECT_EQ(All(p).size(), 5u);

  EXPECT_TRUE(p.Erase("pods/u1/volumes/kubernetes.io~configmap/a"));
  EXPECT_FALSE(p.Erase("pods/u1/volumes/kubernetes.io~configmap/a"));
  EXPECT_FALSE(p.Erase("pods/u2"));
  EXPECT_EQ(OfPod(p, "u1"),
            (std::vector<std::string>{"pods/u1", "pods/u1/volumes",
                                      "pods/u1/volumes/kubernetes.io~configmap/b"}));
  for (const char* path :
       {"pods/u1", "pods/u1/volumes", "pods/u1/volumes/kubernetes.io~configmap/b", "pods/u1-x"}) {
    EXPECT_TRUE(p.Erase(path)) << path;
  }
  EXPECT_EQ(p.size(), 0u);
  EXPECT_TRUE(All(p).empty());
  EXPECT_TRUE(OfPod(p, "u1").empty());
}

TEST(OwnedPathsTest, TheSameRestUnderManyPodsSurvivesTheirComingAndGoing) {
  // The rest of a path is one string shared by the pods that have it: erasing it from one pod
  // must leave it intact for the others, and putting it back must find it again.
  OwnedPaths p;
  const std::string rest = "/volumes/kubernetes.io~configmap/config";
  for (int i = 0; i < 100; ++i) {
    p.Emplace("pods/p" + std::to_string(i) + rest, {OwnedKind::kVolume, uint64_t(i + 1)});
  }
  for (int i = 0; i < 100; i += 2) EXPECT_TRUE(p.Erase("pods/p" + std::to_string(i) + rest));
  for (int i = 0; i < 100; ++i) {
    const Owned* o = p.Find("pods/p" + std::to_string(i) + rest);
    if (i % 2 == 0) {
      EXPECT_EQ(o, nullptr) << i;
    } else {
      ASSERT_NE(o, nullptr) << i;
      EXPECT_EQ(o->inode, uint64_t(i + 1));
    }
  }
  for (int i = 0; i < 100; i += 2) {
    EXPECT_TRUE(p.Emplace("pods/p" + std::to_string(i) + rest, {OwnedKind::kVolume, 0}).second);
  }
  EXPECT_EQ(p.size(), 100u);
  for (const auto& [path, inode] : All(p)) EXPECT_TRUE(path.ends_with(rest)) << path;
}

}  // namespace
}  // namespace volumemanager
