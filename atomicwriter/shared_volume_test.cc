// Two writers on one volume, as on a node where the kubelet refreshes a volume that the daemon
// refreshes too: a writer that follows the kubelet's algorithm exactly (its fixed ..data_tmp
// staging link, its error handling: any error fails the write) and the AtomicWriter update the
// same volume concurrently while a reader checks every version it can catch. Nothing may ever be
// torn or missing, and the kubelet-side writer must never fail (a failed SetUp makes the kubelet
// tear the volume down).
//
// Iterations: 3,000 writes per writer by default (about 30 s here; 10,000 took 97 s of every
// `make test` and 140 s of `make test-asan`); VM_SHARED_VOLUME_WRITES=<n> for a longer run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

// Every file of one payload holds the same tag; the file set is fixed, so top-level links never
// change and a reader can tell a torn version from a superseded one.
const std::vector<std::string> kFiles = {"app.properties", "tls/tls.crt", "tls/tls.key",
                                         "deep/a/b/c"};

std::map<std::string, std::string> TaggedPayload(const std::string& tag) {
  std::map<std::string, std::string> p;
  for (const std::string& f : kFiles) p[f] = tag + ":" + f;
  return p;
}

// The kubelet's AtomicWriter.Write, step by step (path validation omitted: the payload's paths
// are clean). Returns "" on success, else the error the kubelet would return.
class KubeletStyleWriter {
 public:
  explicit KubeletStyleWriter(std::string dir) : dir_(std::move(dir)) {}

  std::string Write(const std::map<std::string, std::string>& payload) {
    // (2) Current version.
    std::string old_ts;
    {
      char buf[PATH_MAX];
      const ssize_t n = ::readlink((dir_ + "/..data").c_str(), buf, sizeof(buf));
      if (n < 0 && errno != ENOENT) return Err("readlink ..data");
      if (n >= 0) old_ts.assign(buf, static_cast<size_t>(n));
    }
    const std::string old_path = dir_ + "/" + old_ts;
    std::set<std::string> removals;
    bool changed = old_ts.empty();
    if (!old_ts.empty()) {
      // (3) Walk the old version (the walk's visitor ignores errors; only a missing root counts).
      std::error_code ec;
      std::set<std::string> walked;
      for (fs::recursive_directory_iterator it(old_path, ec), end; !ec && it != end;
           it.increment(ec)) {
        std::error_code rec;
        const std::string rel = fs::relative(it->path(), old_path, rec).string();
        if (!rec && !rel.empty() && rel != ".") walked.insert(rel);
      }
      std::set<std::string> keep;
      for (const auto& [path, data] : payload) {
        for (std::string p = path; !p.empty();
             p = p.substr(0, p.rfind('/') == std::string::npos ? 0 : p.rfind('/'))) {
          keep.insert(p);
        }
      }
      for (const std::string& p : walked) {
        if (!keep.count(p)) removals.insert(p);
      }
      // (4) Compare: lstat, then read; a read error fails the write.
      for (const auto& [path, data] : payload) {
        struct stat st {};
        const std::string file = old_path + "/" + path;
        if (::lstat(file.c_str(), &st) != 0) {
          if (errno == ENOENT) {
            changed = true;
            break;
          }
        }
        std::string got;
        if (!ReadFile(file, &got)) return Err("read " + file);
        if (got != data) {
          changed = true;
          break;
        }
      }
    }
    if (changed || !removals.empty()) {
      // (5) New version dir: "..<UTC timestamp>." plus a random suffix (os.MkdirTemp).
      char stamp[64];
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      gmtime_r(&now, &tm);
      std::strftime(stamp, sizeof(stamp), "..%Y_%m_%d_%H_%M_%S.", &tm);
      std::string ts;
      for (;;) {
        ts = stamp + std::to_string(rng_() % 4000000000u);
        if (::mkdir((dir_ + "/" + ts).c_str(), 0700) == 0) break;
        if (errno != EEXIST) return Err("mkdir " + ts);
      }
      const std::string ts_path = dir_ + "/" + ts;
      if (::chmod(ts_path.c_str(), 0755) != 0) return Err("chmod " + ts);
      // (6) Files.
      for (const auto& [path, data] : payload) {
        std::error_code ec;
        fs::create_directories(fs::path(ts_path + "/" + path).parent_path(), ec);
        if (ec) return "mkdir -p: " + ec.message();
        const int fd = ::open((ts_path + "/" + path).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return Err("create " + path);
        const bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
        ::close(fd);
        if (!ok) return Err("write " + path);
      }
      // (8) Stage: the fixed name. EEXIST (a stale or concurrent ..data_tmp) fails the write.
      if (::symlink(ts.c_str(), (dir_ + "/..data_tmp").c_str()) != 0) {
        const std::string e = Err("symlink ..data_tmp");
        std::error_code ec;
        fs::remove_all(ts_path, ec);
        return e;
      }
      // (9) Publish.
      if (::rename((dir_ + "/..data_tmp").c_str(), (dir_ + "/..data").c_str()) != 0) {
        const std::string e = Err("rename ..data_tmp");
        ::unlink((dir_ + "/..data_tmp").c_str());
        std::error_code ec;
        fs::remove_all(ts_path, ec);
        return e;
      }
    }
    // (10) Top-level links for names that do not exist.
    for (const auto& [path, data] : payload) {
      const std::string first = path.substr(0, path.find('/'));
      char buf[PATH_MAX];
      if (::readlink((dir_ + "/" + first).c_str(), buf, sizeof(buf)) < 0 && errno == ENOENT) {
        if (::symlink(("..data/" + first).c_str(), (dir_ + "/" + first).c_str()) != 0) {
          return Err("symlink " + first);
        }
      }
    }
    // (11) Prune top-level removals.
    for (const std::string& p : removals) {
      if (p.find('/') == std::string::npos && ::unlink((dir_ + "/" + p).c_str()) != 0) {
        return Err("remove " + p);
      }
    }
    // (12) Drop the old version (os.RemoveAll: a missing tree is no error).
    if ((changed || !removals.empty()) && !old_ts.empty()) {
      std::error_code ec;
      fs::remove_all(old_path, ec);
      if (ec && ec != std::errc::no_such_file_or_directory) return "remove old: " + ec.message();
    }
    return "";
  }

 private:
  static std::string Err(const std::string& what) { return what + ": " + std::strerror(errno); }
  static bool ReadFile(const std::string& path, std::string* out) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return false;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
    ::close(fd);
    return n == 0;
  }

  std::string dir_;
  std::mt19937 rng_{std::random_device{}()};
};

int Writes() {
  const char* env = std::getenv("VM_SHARED_VOLUME_WRITES");
  return env != nullptr ? std::atoi(env) : 3000;
}

// One look at the volume as a container sees it: resolve ..data once, then read every file of
// that version. Returns "" when the version is complete and consistent or was superseded while
// being read (a reader that resolves again sees the newer one); otherwise what is wrong.
std::string CheckSnapshot(const std::string& vol, long* checked) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink((vol + "/..data").c_str(), buf, sizeof(buf));
  if (n < 0) return errno == ENOENT ? "" : std::string("readlink: ") + std::strerror(errno);
  const std::string ts(buf, static_cast<size_t>(n));
  auto still_live = [&] {
    const ssize_t m = ::readlink((vol + "/..data").c_str(), buf, sizeof(buf));
    return m >= 0 && std::string(buf, static_cast<size_t>(m)) == ts;
  };
  const int dirfd = ::open((vol + "/" + ts).c_str(), O_RDONLY | O_DIRECTORY);
  if (dirfd < 0) return still_live() ? "..data points at a missing dir " + ts : "";
  std::string tag;
  std::string problem;
  for (const std::string& f : kFiles) {
    const int fd = ::openat(dirfd, f.c_str(), O_RDONLY);
    if (fd < 0) {
      if (still_live()) problem = "live version " + ts + " lacks " + f;
      break;
    }
    std::string data(256, '\0');
    const ssize_t got = ::read(fd, data.data(), data.size());
    ::close(fd);
    data.resize(got > 0 ? static_cast<size_t>(got) : 0);
    const std::string file_tag = data.substr(0, data.find(':'));
    if (data != file_tag + ":" + f) {
      problem = "bad content in " + ts + "/" + f + ": " + data;
      break;
    }
    if (tag.empty()) tag = file_tag;
    if (file_tag != tag) {
      problem = "torn version " + ts + ": " + f + " has " + file_tag + ", others " + tag;
      break;
    }
  }
  ::close(dirfd);
  if (problem.empty()) {
    // The user-visible names resolve (they never change: the file set is fixed).
    for (const char* top : {"app.properties", "tls", "deep"}) {
      struct stat st {};
      if (::stat((vol + "/" + top).c_str(), &st) != 0 && still_live()) {
        problem = std::string("visible name ") + top + " does not resolve";
      }
    }
    ++*checked;
  }
  return problem;
}

// On tmpfs when there is one (/dev/shm), as secret and projected volumes are: the interleavings
// are the same, and 20,000 writes on a disk mounted with `discard` take minutes.
class SharedVolumeTest : public WriterTest {
 protected:
  void SetUp() override {
    struct stat st {};
    if (::stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode) || ::access("/dev/shm", W_OK) != 0) {
      WriterTest::SetUp();
      return;
    }
    char tmpl[] = "/dev/shm/atomicwriter-shared-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    vol_ = root_ + "/vol";
    ASSERT_EQ(::mkdir(vol_.c_str(), 0777), 0);
  }
};

TEST_F(SharedVolumeTest, KubeletWriterAndAtomicWriterNeverTearOrFailEachOther) {
  const int writes = Writes();
  // Long against a write (~100 us), short against the test, so that old versions and the other
  // writer's leftovers are removed while both writers run.
  const auto grace = std::chrono::milliseconds(1000);
  // The kubelet sets the volume up first (the daemon writes beside the kubelet only once `..data`
  // and its top-level links exist: volumemanager's KubeletHasSetUp). Without this, both writers'
  // first writes race to create the top-level links, and the kubelet's symlink fails with EEXIST.
  ASSERT_EQ(KubeletStyleWriter(vol_).Write(TaggedPayload("k-initial")), "");

  std::atomic<bool> writers_done{false};
  std::mutex mu;
  std::vector<std::string> kubelet_errors, our_errors, reader_problems;
  long snapshots = 0;
  long max_dirs_seen = 0;

  std::thread kubelet([&] {
    KubeletStyleWriter w(vol_);
    for (int i = 0; i < writes; ++i) {
      std::string e = w.Write(TaggedPayload("k" + std::to_string(i)));
      if (!e.empty()) {
        std::lock_guard<std::mutex> l(mu);
        kubelet_errors.push_back(e);
      }
    }
  });
  std::thread ours([&] {
    UnpublishedLedger ledger;
    Options o;
    o.unpublished_grace = grace;
    o.ledger = &ledger;
    for (int i = 0; i < writes; ++i) {
      Payload p;
      for (const auto& [path, data] : TaggedPayload("v" + std::to_string(i))) {
        p[path] = FileProjection{data, 0644, std::nullopt};
      }
      // A new writer object per write, as the daemon opens one per operation; the ledger is
      // what carries over.
      auto w = AtomicWriter::Open(vol_, o);
      if (!w.ok()) {
        std::lock_guard<std::mutex> l(mu);
        our_errors.push_back(w.status().message());
        continue;
      }
      auto r = (*w)->Write(p);
      std::lock_guard<std::mutex> l(mu);
      if (!r.ok()) our_errors.push_back(r.status().message());
      if (r.ok() && !r->cleanup_error.empty()) our_errors.push_back(r->cleanup_error);
    }
  });
  std::thread reader([&] {
    long checked = 0;
    std::vector<std::string> problems;
    while (!writers_done.load()) {
      std::string p = CheckSnapshot(vol_, &checked);
      if (!p.empty() && problems.size() < 20) problems.push_back(p);
      std::this_thread::yield();  // two cores: let the writers run
    }
    std::lock_guard<std::mutex> l(mu);
    snapshots = checked;
    reader_problems = problems;
  });
  // Counts how many unpublished version dirs exist at a time: without the grace-period removal
  // the other writer's replaced versions would pile up.
  std::thread counter([&] {
    size_t max_dirs = 0;
    while (!writers_done.load()) {
      size_t dirs = 0;
      std::error_code ec;
      for (fs::directory_iterator it(vol_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with("..2")) ++dirs;
      }
      max_dirs = std::max(max_dirs, dirs);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard<std::mutex> l(mu);
    max_dirs_seen = static_cast<long>(max_dirs);
  });
  kubelet.join();
  ours.join();
  writers_done = true;
  reader.join();
  counter.join();

  EXPECT_EQ(kubelet_errors.size(), 0u) << "first: " << kubelet_errors.front();
  EXPECT_EQ(our_errors.size(), 0u) << "first: " << our_errors.front();
  EXPECT_EQ(reader_problems.size(), 0u) << "first: " << reader_problems.front();
  EXPECT_GT(snapshots, 0);
  RecordProperty("snapshots_checked", static_cast<int>(snapshots));
  RecordProperty("max_version_dirs", static_cast<int>(max_dirs_seen));

  // Once the other writer is gone and the grace period is over, one more write leaves exactly
  // the live version: everything the kubelet-style writer left behind is collected.
  std::this_thread::sleep_for(grace + std::chrono::milliseconds(50));
  UnpublishedLedger ledger;
  Options o;
  o.unpublished_grace = grace;
  o.ledger = &ledger;
  auto w = AtomicWriter::Open(vol_, o);
  ASSERT_TRUE(w.ok());
  Payload final_payload;
  for (const auto& [path, data] : TaggedPayload("final")) {
    final_payload[path] = FileProjection{data, 0644, std::nullopt};
  }
  ASSERT_TRUE((*w)->Write(final_payload).ok());  // first sight of the leftovers
  std::this_thread::sleep_for(grace + std::chrono::milliseconds(50));
  auto r = (*w)->Write(final_payload);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->awaiting_grace, 0);
  EXPECT_EQ(DescribeDebris(vol_, final_payload), "");
}

}  // namespace
}  // namespace atomicwriter
