// The payload side meets the disk side: payloads built by the plugins, written by the atomic
// writer, show what docs/kubelet-behavior.md §4.7 says a container sees.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/volume_inspector.h"
#include "plugins/fake_object_lookup.h"
#include "plugins/plugin_registry.h"

namespace plugins {
namespace {

class PluginWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/plugin_writer_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    host_.objects = &objects_;
    pod_.metadata.name = "web-0";
    pod_.metadata.namespace_ = "ns";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  base::Result<atomicwriter::Payload> Build(const kube::Volume& v) {
    const VolumePlugin* plugin = registry_->FindPlugin(v);
    if (plugin == nullptr) return base::Status::Error("no plugin");
    return plugin->BuildPayload(pod_, v, host_);
  }

  std::unique_ptr<PluginRegistry> registry_ = PluginRegistry::NewDefault();
  FakeObjectLookup objects_;
  VolumeHost host_;
  kube::Pod pod_;
  std::string dir_;
};

TEST_F(PluginWriterTest, OptionalMissingObjectIsAnEmptyPublishedVolume) {
  auto payload = Build({"cfg", kube::ConfigMapVolumeSource{"absent", {}, 0644, true}});
  ASSERT_TRUE(payload.ok()) << payload.status().message();
  auto writer = atomicwriter::AtomicWriter::Open(dir_);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  auto written = (*writer)->Write(*payload);
  ASSERT_TRUE(written.ok()) << written.status().message();
  // Only ..data and an empty timestamp dir.
  EXPECT_EQ(atomicwriter::DescribeDebris(dir_, *payload), "");
  EXPECT_TRUE(atomicwriter::VisibleContent(dir_).empty());
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ + "/..data").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST_F(PluginWriterTest, SecretWithModesAsSeenByAContainer) {
  kube::Secret s;
  s.metadata.name = "db";
  s.metadata.namespace_ = "ns";
  s.data = {{"user", "admin"}, {"password", std::string("p\0w", 3)}};
  objects_.Add(s);
  auto payload = Build(
      {"sec",
       kube::SecretVolumeSource{
           "db", {{"password", "creds/pw", 0400}, {"user", "user", {}}}, 0440, std::nullopt}});
  ASSERT_TRUE(payload.ok()) << payload.status().message();
  auto writer = atomicwriter::AtomicWriter::Open(dir_);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Write(*payload).ok());
  const auto files = atomicwriter::ReadVisibleFiles(dir_);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.at("creds/pw").mode, 0400u);
  EXPECT_EQ(files.at("user").data, "admin");
  EXPECT_EQ(files.at("user").mode, 0440u);
}

}  // namespace
}  // namespace plugins
