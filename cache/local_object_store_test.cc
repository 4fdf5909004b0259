#include "cache/local_object_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "kube/manifest_decoder.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace cache {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using vmtest::ReplaceFile;
using vmtest::TempDir;
using vmtest::TestLoop;
using vmtest::WriteFile;

std::string ConfigMapYaml(const std::string& name, const std::string& value,
                          const std::string& ns = "default") {
  return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns +
         "}\ndata: {key: \"" + value + "\"}\n";
}

std::string SecretYaml(const std::string& name, const std::string& value) {
  return "apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + "}\nstringData: {password: \"" +
         value + "\"}\n";
}

kube::ObjectRef Cm(const std::string& name, const std::string& ns = "default") {
  return {kube::ObjectKind::kConfigMap, ns, name};
}
kube::ObjectRef Sec(const std::string& name) {
  return {kube::ObjectKind::kSecret, "default", name};
}

class LocalObjectStoreTest : public ::testing::Test {
 protected:
  void Start(ChangeDetectionStrategy strategy = ChangeDetectionStrategy::kWatch,
             std::chrono::milliseconds relist = std::chrono::hours(1),
             std::chrono::milliseconds debounce = LocalObjectStoreOptions().debounce,
             std::chrono::milliseconds settle = std::chrono::milliseconds(0)) {
    LocalObjectStoreOptions options;
    options.dir = dir_.path();
    options.settle = settle;  // 0 (the default here): failures and removals count at once
    options.strategy = strategy;
    options.relist_interval = relist;
    options.debounce = debounce;
    options.max_debounce = std::max(options.max_debounce, debounce * 10);
    options.cache_ttl = std::chrono::minutes(1);
    options.clock = [this] { return now_; };
    ASSERT_TRUE(store_.Start(loop_.get(), options).ok());
    store_.SetChangeHandler([this](const kube::ObjectRef& ref) { changes_.push_back(ref); });
  }

  // The value of key "key" in ConfigMap `name`, "<none>" when absent, "<error>" on failure.
  std::string Value(const std::string& name, const std::string& ns = "default") {
    auto cm = store_.GetConfigMap(ns, name);
    if (!cm.ok()) return "<error>";
    if (*cm == nullptr) return "<none>";
    auto it = (*cm)->data.find("key");
    return it == (*cm)->data.end() ? "<no key>" : it->second;
  }

  TestLoop loop_;
  TempDir dir_;
  LocalObjectStore store_;
  std::vector<kube::ObjectRef> changes_;
  std::chrono::steady_clock::time_point now_ = std::chrono::steady_clock::now();
};

TEST_F(LocalObjectStoreTest, ServesObjectsFromMultiDocumentAndListFiles) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1") + "---\n" + SecretYaml("s", "pw") +
                                     "---\n" + ConfigMapYaml("two", "2", "shop"));
  WriteFile(dir_.File("b.json"),
            R"({"apiVersion":"v1","kind":"List","items":[
                {"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"three"},
                 "data":{"key":"3"}}]})");
  WriteFile(dir_.File(".hidden.yaml"), ConfigMapYaml("hidden", "h"));
  WriteFile(dir_.File("notes.txt"), ConfigMapYaml("txt", "t"));
  Start();
  EXPECT_EQ(store_.ObjectCount(), 4u);
  store_.RegisterPod("pod-1", {Cm("one"), Cm("two", "shop"), Cm("three"), Sec("s"), Cm("hidden"),
                               Cm("txt"), Cm("missing")});
  EXPECT_EQ(Value("one"), "1");
  EXPECT_EQ(Value("two", "shop"), "2");
  EXPECT_EQ(Value("three"), "3");
  EXPECT_EQ(Value("hidden"), "<none>");
  EXPECT_EQ(Value("txt"), "<none>");
  EXPECT_EQ(Value("missing"), "<none>");
  auto secret = store_.GetSecret("default", "s");
  ASSERT_TRUE(secret.ok());
  ASSERT_NE(*secret, nullptr);
  EXPECT_EQ((*secret)->data.at("password"), "pw");
  EXPECT_EQ((*secret)->type, "Opaque") << "API defaulting applies";
}

TEST_F(LocalObjectStoreTest, GetOfAnUnregisteredObjectFailsWithTheKubeletsText) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  Start();
  auto cm = store_.GetConfigMap("default", "one");
  ASSERT_FALSE(cm.ok());
  EXPECT_EQ(cm.status().message(), "object \"default\"/\"one\" not registered");
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "1");
  EXPECT_FALSE(store_.GetSecret("default", "one").ok()) << "kind is part of the reference";
  store_.RegisterPod("pod-2", {Cm("one")});
  store_.UnregisterPod("pod-1");
  EXPECT_EQ(Value("one"), "1") << "pod-2 still references it";
  store_.RegisterPod("pod-2", {});
  EXPECT_EQ(Value("one"), "<error>");
}

TEST_F(LocalObjectStoreTest, WatchNotifiesReferencedObjectsAtOnce) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("other", "o"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one")});
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "2") + "---\n" + ConfigMapYaml("other", "p"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_THAT(changes_, ElementsAre(Cm("one"))) << "the unreferenced one is not reported";
  EXPECT_EQ(Value("one"), "2");
}

TEST_F(LocalObjectStoreTest, AnEditKeepsTheRevisionsOfTheFilesUnchangedObjects) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("two", "2") +
                                     "---\n" + SecretYaml("s", "pw"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one"), Cm("two"), Sec("s")});
  auto one = store_.GetConfigMap("default", "one");
  auto two = store_.GetConfigMap("default", "two");
  auto secret = store_.GetSecret("default", "s");
  ASSERT_TRUE(one.ok() && two.ok() && secret.ok());
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("two", "3") +
                                     "---\n" + SecretYaml("s", "pw"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_THAT(changes_, ElementsAre(Cm("two")));
  EXPECT_EQ(Value("two"), "3");
  // One copy per object revision: the objects the edit left alone are the ones already served.
  EXPECT_EQ(*store_.GetConfigMap("default", "one"), *one);
  EXPECT_EQ(*store_.GetSecret("default", "s"), *secret);
  EXPECT_NE(*store_.GetConfigMap("default", "two"), *two);
  // A metadata edit (no content change, no notification) is a new revision, served.
  WriteFile(dir_.File("a.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, labels: {a: b}}\n"
            "data: {key: \"1\"}\n---\n" +
                ConfigMapYaml("two", "3") + "---\n" + SecretYaml("s", "pw"));
  ASSERT_TRUE(loop_.RunUntil([&] {
    auto cm = store_.GetConfigMap("default", "one");
    return cm.ok() && *cm != nullptr && (*cm)->metadata.labels.count("a") == 1;
  }));
  EXPECT_THAT(changes_, ElementsAre(Cm("two")));
}

TEST_F(LocalObjectStoreTest, AnEditDecodesOnlyTheDocumentsItChanged) {
  const std::string one = ConfigMapYaml("one", "1");
  const std::string secret = SecretYaml("s", "pw");
  WriteFile(dir_.File("a.yaml"), one + "---\n" + ConfigMapYaml("two", "2") + "---\n" + secret);
  Start();
  EXPECT_EQ(store_.Decodes(), 3u) << "one per document";
  store_.RegisterPod("pod-1", {Cm("zero"), Cm("one"), Cm("two"), Sec("s")});
  auto one_before = *store_.GetConfigMap("default", "one");
  auto secret_before = *store_.GetSecret("default", "s");

  WriteFile(dir_.File("a.yaml"), one + "---\n" + ConfigMapYaml("two", "3") + "---\n" + secret);
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_THAT(changes_, ElementsAre(Cm("two")));
  EXPECT_EQ(Value("two"), "3");
  EXPECT_EQ(store_.Decodes(), 4u) << "the edited document only";
  EXPECT_EQ(*store_.GetConfigMap("default", "one"), one_before);
  EXPECT_EQ(*store_.GetSecret("default", "s"), secret_before);

  // A document put in front moves the others: they are found by their text, not decoded again.
  changes_.clear();
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("zero", "0") + "---\n" + one + "---\n" +
                                     ConfigMapYaml("two", "3") + "---\n" + secret);
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_THAT(changes_, ElementsAre(Cm("zero")));
  EXPECT_EQ(Value("zero"), "0");
  EXPECT_EQ(store_.Decodes(), 5u);
  EXPECT_EQ(*store_.GetConfigMap("default", "one"), one_before);

  // A document taken out: its object is gone, and nothing is decoded.
  changes_.clear();
  WriteFile(dir_.File("a.yaml"),
            ConfigMapYaml("zero", "0") + "---\n" + ConfigMapYaml("two", "3") + "---\n" + secret);
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_THAT(changes_, ElementsAre(Cm("one")));
  EXPECT_EQ(Value("one"), "<none>");
  EXPECT_EQ(Value("two"), "3");
  EXPECT_EQ(store_.Decodes(), 5u);
  EXPECT_EQ(store_.ObjectCount(), 3u);
}

TEST_F(LocalObjectStoreTest, AnObjectDefinedTwiceInOneFileIsServedFromItsFirstDocument) {
  const std::string other = ConfigMapYaml("other", "o");
  WriteFile(dir_.File("a.yaml"),
            ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("one", "2") + "---\n" + other);
  Start();
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "1");
  // The second definition edited: nothing served changes.
  WriteFile(dir_.File("a.yaml"),
            ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("one", "2b") + "---\n" + other);
  const uint64_t decodes = store_.Decodes();
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.Decodes() > decodes; }));
  loop_.RunFor(std::chrono::milliseconds(20));
  EXPECT_THAT(changes_, IsEmpty());
  EXPECT_EQ(Value("one"), "1");
  // The first one edited: served.
  WriteFile(dir_.File("a.yaml"),
            ConfigMapYaml("one", "1b") + "---\n" + ConfigMapYaml("one", "2b") + "---\n" + other);
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_EQ(Value("one"), "1b");
  // The first one made another object: the second is served.
  changes_.clear();
  WriteFile(dir_.File("a.yaml"),
            ConfigMapYaml("uno", "1b") + "---\n" + ConfigMapYaml("one", "2b") + "---\n" + other);
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_THAT(changes_, ElementsAre(Cm("one")));
  EXPECT_EQ(Value("one"), "2b");
}

TEST_F(LocalObjectStoreTest, ADocumentThatFailsIsReportedAsTheWholeFileSaysIt) {
  const std::string path = dir_.File("a.yaml");
  WriteFile(path, ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("two", "2") + "---\n" +
                      ConfigMapYaml("three", "3"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one"), Cm("two"), Cm("three")});
  for (const std::string& broken :
       {ConfigMapYaml("one", "1") + "---\n" +
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\ndata: {key: [1]}\n---\n" +
            ConfigMapYaml("three", "3"),
        ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("two", "2") + "---\n" +
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: three\n",
        // A quote left open before a marker: alone, the end of the document would close it.
        ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("two", "2") + "x: \"open\n---\n" +
            ConfigMapYaml("three", "3")}) {
    auto whole = kube::DecodeManifest(broken, path);
    ASSERT_FALSE(whole.ok());
    WriteFile(path, broken);
    ASSERT_TRUE(loop_.RunUntil([&] { return !store_.Rejected().empty(); }));
    // The document's number and the line in the file, as a decode of the whole file gives them.
    EXPECT_EQ(store_.Rejected()[0].reason, whole.status().message());
    EXPECT_EQ(Value("two"), "2") << "as last read";
    EXPECT_EQ(Value("three"), "3");
    WriteFile(path, ConfigMapYaml("one", "1") + "---\n" + ConfigMapYaml("two", "2") + "---\n" +
                        ConfigMapYaml("three", "3"));
    ASSERT_TRUE(loop_.RunUntil([&] { return store_.Rejected().empty(); }));
  }
  EXPECT_THAT(changes_, IsEmpty());
}

TEST_F(LocalObjectStoreTest, TheStreamsLimitsHoldOverDocumentsDecodedApart) {
  // A document of about 511,000 nodes after alias expansion: one is within the stream's limit of
  // 1,000,000 (kube/yaml_to_json.h), two are not, even when the first was decoded on an earlier
  // read.
  std::string list = "[";
  for (int i = 0; i < 1000; ++i) list += (i ? ",0" : "0");
  std::string aliases = "[";
  for (int i = 0; i < 510; ++i) aliases += (i ? ",*l" : "*l");
  auto big = [&](const std::string& name) {
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\nx: &l " + list +
           "]\ny: " + aliases + "]\ndata: {key: v}\n";
  };
  WriteFile(dir_.File("a.yaml"), big("one") + "---\n" + ConfigMapYaml("two", "2"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one"), Cm("two")});
  EXPECT_EQ(Value("one"), "v");
  WriteFile(dir_.File("a.yaml"), big("one") + "---\n" + big("two"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !store_.Rejected().empty(); }));
  EXPECT_THAT(store_.Rejected()[0].reason, HasSubstr("more than 1000000 nodes"));
  EXPECT_EQ(Value("two"), "2") << "as last read";
}

TEST_F(LocalObjectStoreTest, WatchFollowsCreateRenameIntoPlaceAndDelete) {
  Start();
  store_.RegisterPod("pod-1", {Cm("one"), Cm("two")});
  EXPECT_EQ(Value("one"), "<none>");

  WriteFile(dir_.File("one.yaml"), ConfigMapYaml("one", "1"));
  ASSERT_TRUE(loop_.RunUntil([&] { return changes_.size() == 1; }));
  EXPECT_EQ(Value("one"), "1");

  ReplaceFile(dir_.File("one.yaml"), ConfigMapYaml("one", "1b"));
  ASSERT_TRUE(loop_.RunUntil([&] { return changes_.size() == 2; }));
  EXPECT_EQ(Value("one"), "1b");

  ReplaceFile(dir_.File("two.yaml"), ConfigMapYaml("two", "2"));
  ASSERT_TRUE(loop_.RunUntil([&] { return changes_.size() == 3; }));
  EXPECT_EQ(Value("two"), "2");

  std::filesystem::remove(dir_.File("one.yaml"));
  ASSERT_TRUE(loop_.RunUntil([&] { return changes_.size() == 4; }));
  EXPECT_EQ(Value("one"), "<none>");
  EXPECT_THAT(changes_, ElementsAre(Cm("one"), Cm("one"), Cm("two"), Cm("one")));
}

// The directory may itself be a projected volume (the daemon's objects from a ConfigMap volume):
// files are links through "..data", and an update swaps "..data" alone.
TEST_F(LocalObjectStoreTest, WatchFollowsADataSymlinkSwap) {
  namespace fs = std::filesystem;
  fs::create_directory(dir_.File("..v1"));
  WriteFile(dir_.File("..v1/cm.yaml"), ConfigMapYaml("one", "1"));
  fs::create_directory_symlink("..v1", dir_.File("..data"));
  fs::create_symlink("..data/cm.yaml", dir_.File("cm.yaml"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "1");

  fs::create_directory(dir_.File("..v2"));
  WriteFile(dir_.File("..v2/cm.yaml"), ConfigMapYaml("one", "2"));
  fs::create_directory_symlink("..v2", dir_.File("..data_tmp"));
  fs::rename(dir_.File("..data_tmp"), dir_.File("..data"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_EQ(Value("one"), "2");
}

TEST_F(LocalObjectStoreTest, IdenticalRewriteChangesNothing) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one")});
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  ReplaceFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  // The same object written differently is the same object too.
  WriteFile(dir_.File("a.yaml"), "# comment\n" + ConfigMapYaml("one", "1"));
  const uint64_t reads = store_.FileReads();
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.FileReads() > reads; }));
  loop_.RunFor(std::chrono::milliseconds(50));
  EXPECT_THAT(changes_, IsEmpty());
}

TEST_F(LocalObjectStoreTest, BurstsOfEventsAreCoalesced) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "0"));
  // Rewrites 1 ms apart into the file held open while the loop runs: only the debounce (far
  // longer) makes them one read, when the file is closed.
  Start(ChangeDetectionStrategy::kWatch, std::chrono::hours(1), std::chrono::seconds(1));
  store_.RegisterPod("pod-1", {Cm("one")});
  const uint64_t reads = store_.FileReads();
  const int fd = ::open(dir_.File("a.yaml").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  loop_.RunSteps(50, std::chrono::milliseconds(1), [&](int i) {
    const std::string text = ConfigMapYaml("one", std::to_string(i + 1));
    ASSERT_EQ(::ftruncate(fd, 0), 0);
    ASSERT_EQ(::pwrite(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
  });
  ::close(fd);
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.FileReads() > reads; }));
  loop_.RunFor(std::chrono::milliseconds(20));
  EXPECT_EQ(store_.FileReads() - reads, 1u);
  EXPECT_EQ(changes_.size(), 1u);
  EXPECT_EQ(Value("one"), "50");
}

TEST_F(LocalObjectStoreTest, InvalidFileKeepsItsLastObjectsAndOthersStayServed) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  WriteFile(dir_.File("b.yaml"), ConfigMapYaml("two", "2"));
  WriteFile(dir_.File("c.yaml"), "kind: ConfigMap\nmetadata: {name: Bad_Name}\n");
  Start();
  store_.RegisterPod("pod-1", {Cm("one"), Cm("two")});
  EXPECT_EQ(store_.ObjectCount(), 2u);

  WriteFile(dir_.File("a.yaml"), "kind: ConfigMap\nmetadata: {name: one\n");  // broken YAML
  WriteFile(dir_.File("b.yaml"), ConfigMapYaml("two", "2b"));
  ASSERT_TRUE(loop_.RunUntil([&] { return changes_.size() == 1; }));
  EXPECT_EQ(Value("one"), "1") << "as last read";
  EXPECT_EQ(Value("two"), "2b");

  WriteFile(dir_.File("a.yaml"), "");  // truncated: as last read as well
  loop_.RunFor(std::chrono::milliseconds(50));
  EXPECT_EQ(Value("one"), "1");

  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "fixed"));
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("one") == "fixed"; }));
}

TEST_F(LocalObjectStoreTest, FirstFileInNameOrderWins) {
  WriteFile(dir_.File("b.yaml"), ConfigMapYaml("one", "from-b"));
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "from-a"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "from-a");
  WriteFile(dir_.File("b.yaml"), ConfigMapYaml("one", "from-b2"));
  const uint64_t reads = store_.FileReads();
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.FileReads() > reads; }));
  EXPECT_THAT(changes_, IsEmpty()) << "the shadowed definition changed nothing served";
  std::filesystem::remove(dir_.File("a.yaml"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_EQ(Value("one"), "from-b2");
}

TEST_F(LocalObjectStoreTest, PodsInTheObjectDirectoryAreIgnored) {
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"),
            "kind: Pod\nmetadata: {name: p}\n---\n" + ConfigMapYaml("one", "1"));
  Start();
  EXPECT_EQ(store_.ObjectCount(), 1u);
  // Said again on every read of the file, also when the pod's document was not decoded again.
  WriteFile(dir_.File("a.yaml"),
            "kind: Pod\nmetadata: {name: p}\n---\n" + ConfigMapYaml("one", "2"));
  store_.RegisterPod("pod-1", {Cm("one")});
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("one") == "2"; }));
  const std::string text = logs.text();
  size_t said = 0;
  for (size_t at = text.find("ignoring a pod"); at != std::string::npos;
       at = text.find("ignoring a pod", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 2u) << text;
  EXPECT_THAT(text, HasSubstr("Pod p"));
}

TEST_F(LocalObjectStoreTest, MissingDirectoryHoldsNothingUntilTheRelistFindsIt) {
  std::filesystem::remove(dir_.path());
  Start(ChangeDetectionStrategy::kWatch, std::chrono::milliseconds(20));
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "<none>");
  std::filesystem::create_directory(dir_.path());
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  EXPECT_EQ(Value("one"), "1");
  // Re-armed: the next change arrives by event as well as by relist.
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "2"));
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("one") == "2"; }));
}

TEST_F(LocalObjectStoreTest, NoNotificationAfterUnregisterOrStop) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one")});
  store_.UnregisterPod("pod-1");
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "2"));
  const uint64_t reads = store_.FileReads();
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.FileReads() > reads; }));
  EXPECT_THAT(changes_, IsEmpty());

  store_.RegisterPod("pod-1", {Cm("one")});
  store_.Stop();
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "3"));
  loop_.RunFor(std::chrono::milliseconds(50));
  EXPECT_THAT(changes_, IsEmpty());
  EXPECT_EQ(Value("one"), "2") << "gets still served after Stop";
}

TEST_F(LocalObjectStoreTest, CacheRereadsAfterTheTtlOrOnANewReference) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  Start(ChangeDetectionStrategy::kCache);
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "1");  // newly referenced: fetched
  uint64_t reads = store_.FileReads();
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "2"));
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.FileReads() > reads && !store_.Reading(); }));
  EXPECT_EQ(Value("one"), "1") << "fresh within the TTL";
  now_ += std::chrono::seconds(59);
  EXPECT_EQ(Value("one"), "1");
  now_ += std::chrono::seconds(1);
  EXPECT_EQ(Value("one"), "2") << "older than the TTL: fetched again";

  reads = store_.FileReads();
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "3"));
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.FileReads() > reads && !store_.Reading(); }));
  store_.RegisterPod("pod-1", {Cm("one")});  // re-registration: nothing new, no invalidation
  EXPECT_EQ(Value("one"), "2");
  store_.RegisterPod("pod-2", {Cm("one")});  // the kubelet invalidates on a new pod's reference
  EXPECT_EQ(Value("one"), "3");
  EXPECT_THAT(changes_, IsEmpty()) << "Cache never notifies";
}

TEST_F(LocalObjectStoreTest, CacheSeesNewObjectsAfterTheTtl) {
  Start(ChangeDetectionStrategy::kCache);
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "<none>");
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.ObjectCount() == 1; }));
  EXPECT_EQ(Value("one"), "<none>");
  now_ += std::chrono::minutes(1);
  EXPECT_EQ(Value("one"), "1");
}

TEST_F(LocalObjectStoreTest, GetServesTheWatchedStateWithoutReadingPerGet) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  Start(ChangeDetectionStrategy::kGet);
  store_.RegisterPod("pod-1", {Cm("one"), Cm("two")});
  const uint64_t reads = store_.FileReads();
  const uint64_t scans = store_.Scans();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(Value("one"), "1");
  EXPECT_EQ(store_.FileReads(), reads) << "a get reads no file";
  EXPECT_EQ(store_.Scans(), scans) << "a get lists and stats nothing";
  // Same size, and possibly the same mtime tick: the event names the file, which is read.
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "2"));
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("one") == "2"; }));
  WriteFile(dir_.File("b.yaml"), ConfigMapYaml("two", "x"));
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("two") == "x"; }));
  std::filesystem::remove(dir_.File("a.yaml"));
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("one") == "<none>"; }));
  loop_.RunFor(std::chrono::milliseconds(20));
  EXPECT_THAT(changes_, IsEmpty()) << "Get never notifies";
}

TEST_F(LocalObjectStoreTest, RevisionsCarryTheDigestOfTheirContent) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1") + "---\n" + SecretYaml("s", "pw"));
  Start();
  store_.RegisterPod("pod-1", {Cm("one"), Sec("s"), Cm("absent")});
  auto cm = store_.GetRevision(Cm("one"));
  ASSERT_TRUE(cm.ok());
  ASSERT_NE(cm->config_map, nullptr);
  EXPECT_EQ(cm->digest, ContentDigest(*cm->config_map));
  auto secret = store_.GetRevision(Sec("s"));
  ASSERT_TRUE(secret.ok());
  ASSERT_NE(secret->secret, nullptr);
  EXPECT_EQ(secret->digest, ContentDigest(*secret->secret));
  auto absent = store_.GetRevision(Cm("absent"));
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->exists());
  EXPECT_FALSE(store_.GetRevision(Cm("unregistered")).ok());
}

TEST_F(LocalObjectStoreTest, UnreadableDirectoryFailsGetsUnderGetOnly) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  Start(ChangeDetectionStrategy::kGet);
  store_.RegisterPod("pod-1", {Cm("one")});
  EXPECT_EQ(Value("one"), "1");
  // The path now names a regular file: listing fails (ENOTDIR), which is not "no objects".
  std::filesystem::remove_all(dir_.path());
  WriteFile(dir_.path(), "not a directory");
  ASSERT_TRUE(loop_.RunUntil([&] { return !store_.GetConfigMap("default", "one").ok(); }));
  auto cm = store_.GetConfigMap("default", "one");
  EXPECT_THAT(cm.status().message(), HasSubstr("failed to read object manifests in"));
  std::filesystem::remove(dir_.path());
}

TEST_F(LocalObjectStoreTest, UnreadableDirectoryKeepsServingUnderWatch) {
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("one", "1"));
  Start(ChangeDetectionStrategy::kWatch, std::chrono::milliseconds(10));
  store_.RegisterPod("pod-1", {Cm("one")});
  std::filesystem::remove_all(dir_.path());
  WriteFile(dir_.path(), "not a directory");
  loop_.RunFor(std::chrono::milliseconds(50));
  std::filesystem::remove(dir_.path());
  EXPECT_EQ(Value("one"), "1");
  EXPECT_THAT(changes_, IsEmpty());
}

// `git checkout` unlinks a manifest and creates it again: within the settle time its objects
// are never seen deleted (no "configmap not found" for the volumes that use them). The settle
// time here outlasts the test.
TEST_F(LocalObjectStoreTest, AnUnlinkAndRecreateNeverDeletesTheObjects) {
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("app", "v1"));
  Start(ChangeDetectionStrategy::kWatch, std::chrono::hours(1), LocalObjectStoreOptions().debounce,
        std::chrono::hours(1));
  store_.RegisterPod("pod-1", {Cm("app"), Cm("other")});
  std::filesystem::remove(dir_.File("a.yaml"));
  // The removal has been seen once a later file's object is served.
  WriteFile(dir_.File("b.yaml"), ConfigMapYaml("other", "x"));
  std::vector<std::string> seen;
  ASSERT_TRUE(loop_.RunUntil([&] {
    seen.push_back(Value("app"));
    return Value("other") == "x";
  }));
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("app", "v2"));
  ASSERT_TRUE(loop_.RunUntil([&] {
    seen.push_back(Value("app"));
    return Value("app") == "v2";
  }));
  for (const std::string& v : seen) EXPECT_NE(v, "<none>") << "the object was deleted in between";
  EXPECT_THAT(changes_, ElementsAre(Cm("other"), Cm("app")))
      << "the other file's creation, then one change for the rewritten file: the update";
  EXPECT_THAT(logs.text(), Not(HasSubstr("deleted")));
  EXPECT_THAT(logs.text(), Not(HasSubstr("removed")));
}

// A manifest caught mid-write (created empty, then written) is no error; one that stays invalid
// past the settle time is reported once and listed, and its recovery is logged once.
TEST_F(LocalObjectStoreTest, AFileCaughtMidWriteIsNoErrorAndAStayingFailureIsListed) {
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("app", "v1"));
  Start(ChangeDetectionStrategy::kWatch, std::chrono::hours(1), LocalObjectStoreOptions().debounce,
        std::chrono::milliseconds(20));
  store_.RegisterPod("pod-1", {Cm("app")});
  WriteFile(dir_.File("a.yaml"), "kind: ConfigMap\nmetadata: {name: Bad_}\n");
  ASSERT_TRUE(loop_.RunUntil([&] { return !store_.Rejected().empty(); }));
  ASSERT_EQ(store_.Rejected().size(), 1u);
  EXPECT_EQ(store_.Rejected()[0].file, dir_.File("a.yaml"));
  EXPECT_THAT(store_.Rejected()[0].reason, HasSubstr("metadata.name"));
  EXPECT_EQ(Value("app"), "v1") << "kept as last read";
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("app", "v2"));
  ASSERT_TRUE(loop_.RunUntil([&] { return store_.Rejected().empty() && Value("app") == "v2"; }));
  const std::string text = logs.text();
  const size_t at = text.find("Object manifest is valid again");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.find("Object manifest is valid again", at + 1), std::string::npos);
}

TEST_F(LocalObjectStoreTest, AFileCaughtMidWriteIsNoError) {
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("app", "v1"));
  Start(ChangeDetectionStrategy::kWatch, std::chrono::hours(1), LocalObjectStoreOptions().debounce,
        std::chrono::hours(1));
  store_.RegisterPod("pod-1", {Cm("app"), Cm("other"), Cm("third")});
  WriteFile(dir_.File("a.yaml"), "");  // an in-place rewrite truncates first
  WriteFile(dir_.File("b.yaml"), "kind: ConfigMap\nmetadata: {name: oth");  // half-written
  WriteFile(dir_.File("c.yaml"), ConfigMapYaml("third", "x"));
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("third") == "x"; }));
  WriteFile(dir_.File("a.yaml"), ConfigMapYaml("app", "v2"));
  WriteFile(dir_.File("b.yaml"), ConfigMapYaml("other", "y"));
  ASSERT_TRUE(loop_.RunUntil([&] { return Value("app") == "v2" && Value("other") == "y"; }));
  EXPECT_TRUE(store_.Rejected().empty());
  EXPECT_THAT(logs.text(), Not(HasSubstr("Invalid object manifest")));
  EXPECT_THAT(logs.text(), Not(HasSubstr("is empty")));
}

TEST_F(LocalObjectStoreTest, SecretValuesNeverReachTheLog) {
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  logger->set_level(spdlog::level::trace);
  spdlog::set_default_logger(logger);

  WriteFile(dir_.File("a.yaml"), SecretYaml("s", "hunter2-one"));
  WriteFile(dir_.File("b.yaml"), SecretYaml("s", "hunter2-two"));  // a duplicate, logged
  WriteFile(dir_.File("c.yaml"),
            "kind: Secret\nmetadata: {name: Bad_}\nstringData: {k: hunter2-three}\n");
  WriteFile(dir_.File("d.yaml"),
            "kind: Secret\nmetadata: {name: d}\ndata: {k: \"hunter2-four\"}\n");
  Start();
  store_.RegisterPod("pod-1", {Sec("s")});
  WriteFile(dir_.File("a.yaml"), SecretYaml("s", "hunter2-five"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }));
  store_.Stop();
  spdlog::set_default_logger(previous);

  EXPECT_THAT(log.str(), HasSubstr("object=\"secret/default/s\" change=\"updated\""));
  EXPECT_THAT(log.str(), HasSubstr("c.yaml"));
  EXPECT_THAT(log.str(), HasSubstr("d.yaml"));
  EXPECT_THAT(log.str(), Not(HasSubstr("hunter2"))) << log.str();
}

}  // namespace
}  // namespace cache
