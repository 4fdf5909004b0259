// Shared fixtures for the atomic writer's tests: a fresh temporary dir holding an empty volume dir
// (WriterTest); the same with a grace period on a fake clock (SharedWriterTest), and written
// through a RemovalQueue on that clock (QueuedWriterTest).
#ifndef VOLUMEMANAGER_ATOMICWRITER_WRITER_TEST_FIXTURE_H_
#define VOLUMEMANAGER_ATOMICWRITER_WRITER_TEST_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/removal_queue.h"
#include "atomicwriter/unpublished_ledger.h"
#include "atomicwriter/volume_inspector.h"

namespace atomicwriter {

// path -> bytes, all with one mode.
inline Payload MakePayload(std::initializer_list<std::pair<std::string, std::string>> files,
                           mode_t mode = 0644) {
  Payload p;
  for (const auto& [path, data] : files) p[path] = FileProjection{data, mode, std::nullopt};
  return p;
}

// Options::probe for a test: the traits of the test dir's filesystem, but withholding freed
// inodes, as ext4 without a journal does.
inline FilesystemTraits ProbeAsIfFreedInodesWait(int fd) {
  FilesystemTraits t = ProbeFilesystem(fd);
  t.freed_inodes_wait = true;
  return t;
}

class WriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/atomicwriter-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    vol_ = root_ + "/vol";
    ASSERT_EQ(::mkdir(vol_.c_str(), 0777), 0);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  // Options for a volume no other writer touches: unpublished entries go at first sight.
  static Options SoleWriter() {
    Options o;
    o.unpublished_grace = std::chrono::milliseconds(0);
    return o;
  }

  std::unique_ptr<AtomicWriter> OpenWriter(Options options = SoleWriter()) {
    auto w = AtomicWriter::Open(vol_, std::move(options));
    EXPECT_TRUE(w.ok()) << w.status().message();
    return w.ok() ? std::move(w).value() : nullptr;
  }

  // The name ..data links to, or "" when there is none.
  std::string LiveTsDir() const {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(std::filesystem::path(vol_) / "..data", ec);
    return ec ? "" : target.string();
  }

  // Names in the volume dir that start with "..", other than ..data.
  std::set<std::string> DotDotEntries() const {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(vol_)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("..") && name != "..data") out.insert(name);
    }
    return out;
  }

  // Every path below the live version's dir (files and dirs), relative to it.
  std::set<std::string> LiveTree() const {
    std::set<std::string> out;
    const std::filesystem::path live = std::filesystem::path(vol_) / LiveTsDir();
    for (const auto& e : std::filesystem::recursive_directory_iterator(live)) {
      out.insert(std::filesystem::relative(e.path(), live).string());
    }
    return out;
  }

  std::string root_;
  std::string vol_;
};

// A writer sharing the volume with another writer: a fake monotonic clock drives the 30 s grace.
class SharedWriterTest : public WriterTest {
 protected:
  Options Shared() {
    Options o;
    o.unpublished_grace = std::chrono::seconds(30);
    o.ledger = &ledger_;
    o.steady_now = [this] { return now_; };
    return o;
  }
  UnpublishedLedger ledger_;
  std::chrono::steady_clock::time_point now_{std::chrono::hours(1)};
};

// The same, writing through a RemovalQueue on the same fake clock; the test runs the queue (no
// worker thread) unless it says so.
class QueuedWriterTest : public SharedWriterTest {
 protected:
  Options Queued() {
    Options o = Shared();
    o.removals = &queue_;
    return o;
  }
  std::set<std::string> Removing() const {
    std::set<std::string> out;
    for (const std::string& n : DotDotEntries()) {
      if (n.starts_with(kRemovingPrefix)) out.insert(n);
    }
    return out;
  }

  RemovalQueue queue_{nullptr, [this] { return now_; }};
};

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_WRITER_TEST_FIXTURE_H_
