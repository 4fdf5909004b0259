#include "atomicwriter/atomic_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/open_beneath.h"
#include "atomicwriter/remove_tree.h"
#include "atomicwriter/tree_stamp.h"
#include "base/errno_error.h"
#include "base/strings.h"

namespace atomicwriter {
namespace {

using base::Result;
using base::Status;

constexpr int kDirOpenFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
constexpr mode_t kTimestampDirMode = 0755;
constexpr mode_t kNestedDirMode = 0777;  // as the kubelet requests; the umask applies
constexpr int kMaxNameAttempts = 100;
// How long a volume's versions follow the one last placed as a top-level dir is, before a write
// places one again (AtomicWriter, where versions are spread).
constexpr std::chrono::seconds kPlaceAgainAfter{30};
// Dirs of a version held open while its files are written: a payload's depth must not decide how
// many descriptors a write holds.
constexpr size_t kMaxHeldDirs = 16;

using base::ErrnoError;

// An owned descriptor, closed through the Env interface.
class ScopedFd {
 public:
  ScopedFd(Env* fs, int fd) : fs_(fs), fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(ScopedFd&& o) noexcept : fs_(o.fs_), fd_(std::exchange(o.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fs_ = o.fs_;
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) fs_->Close(fd_);
    fd_ = -1;
  }

 private:
  Env* fs_;
  int fd_;
};

std::vector<std::string> SplitCleanPath(const std::string& path) {
  const std::vector<std::string_view> parts = base::Split(path, '/');
  return {parts.begin(), parts.end()};
}

std::string FirstComponent(const std::string& clean_path) {
  return clean_path.substr(0, clean_path.find('/'));
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string TimestampDirName(std::chrono::system_clock::time_point now, uint32_t suffix) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "..%Y_%m_%d_%H_%M_%S.", &tm);
  return std::string(buf) + std::to_string(suffix);
}

uint32_t RandomSuffix() {
  thread_local std::mt19937 rng{std::random_device{}()};
  return static_cast<uint32_t>(rng());
}

// kStagingPrefix + 16 hex digits: unique to one write of one process.
std::string StagingName() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(kStagingPrefix) + hex;
}

// The tree of an entry TreeStamp cannot judge: a value no observation repeats (odds 2^-64), so
// the ledger never finds it unchanged.
uint64_t UnjudgedTree() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng() | 1;
}

bool IsStagingName(std::string_view name) {
  return name.starts_with(kStagingPrefix) && name.size() > std::strlen(kStagingPrefix);
}

// A removal in progress (RemovalQueue), or left by a crash in the middle of one.
bool IsRemovingName(std::string_view name) {
  return name.starts_with(kRemovingPrefix) && name.size() > std::strlen(kRemovingPrefix);
}

Status RemoveAllAt(Env& fs, int dirfd, const std::string& name, const std::string& shown) {
  return RemoveTreeAt(fs, dirfd, name, shown);
}

// The entry's type, asking lstat when readdir did not say.
unsigned char EntryType(Env& fs, int dirfd, const DirEntry& e) {
  if (e.type != DT_UNKNOWN) return e.type;
  struct stat st {};
  if (fs.FstatAt(dirfd, e.name, &st, AT_SYMLINK_NOFOLLOW) != 0) return DT_UNKNOWN;
  if (S_ISDIR(st.st_mode)) return DT_DIR;
  if (S_ISREG(st.st_mode)) return DT_REG;
  if (S_ISLNK(st.st_mode)) return DT_LNK;
  return DT_UNKNOWN;
}

// True when `name` in `dirfd` (already seen as a regular file) still is one, reached without
// following a symlink, and holds exactly `data`. One open and one read: a regular file returns
// everything up to end of file in one read, so a read of size+1 returning size bytes proves the
// length. Anything unreadable counts as different: the write then replaces it.
bool SameContent(Env& fs, int dirfd, const std::string& name, const std::string& data) {
  ScopedFd fd(&fs, fs.OpenAt(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0));
  if (!fd.valid()) return false;
  std::string got(data.size() + 1, '\0');
  const ssize_t n = fs.Read(fd.get(), got.data(), got.size());
  return n == static_cast<ssize_t>(data.size()) &&
         std::memcmp(got.data(), data.data(), data.size()) == 0;
}

struct CleanFile {
  std::string path;  // cleaned
  const FileProjection* file;
};

// Validates and cleans the payload; rejects paths that clean to nothing and a path that would
// have to be both a file and a directory.
Result<std::vector<CleanFile>> CleanPayload(const Payload& payload) {
  std::map<std::string, const FileProjection*> by_path;
  for (const auto& [raw, file] : payload) {
    Status s = ValidatePath(raw);
    if (!s.ok()) return s;
    std::string clean = CleanPath(raw);
    if (clean == ".") return Status::Error("invalid path: names no file: " + raw);
    by_path[std::move(clean)] = &file;
  }
  std::vector<CleanFile> files;
  for (const auto& [path, file] : by_path) {
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      const std::string parent = path.substr(0, slash);
      if (by_path.count(parent) != 0) {
        return Status::Error("invalid payload: \"" + parent + "\" is both a file and a directory");
      }
    }
    files.push_back({path, file});
  }
  return files;
}

}  // namespace

bool IsTimestampDirName(std::string_view name) {
  static constexpr std::string_view kShape = "..dddd_dd_dd_dd_dd_dd.";
  if (name.size() <= kShape.size()) return false;
  for (size_t i = 0; i < kShape.size(); ++i) {
    const char want = kShape[i];
    const char got = name[i];
    if (want == 'd' ? (got < '0' || got > '9') : got != want) return false;
  }
  return AllDigits(name.substr(kShape.size()));
}

Result<std::unique_ptr<AtomicWriter>> AtomicWriter::Open(const std::string& target_dir,
                                                         Options options) {
  Env* fs = options.fs != nullptr ? options.fs : PosixEnv();
  int fd = fs->OpenAt(AT_FDCWD, target_dir, kDirOpenFlags, 0);
  if (fd < 0) return ErrnoError("Error creating atomic writer: open", target_dir, errno);
  return std::unique_ptr<AtomicWriter>(new AtomicWriter(target_dir, fd, std::move(options)));
}

Result<std::unique_ptr<AtomicWriter>> AtomicWriter::OpenBeneath(int root_fd,
                                                                const std::string& root_dir,
                                                                const std::string& rel_dir,
                                                                const std::string& shown,
                                                                Options options) {
  Env* env = options.fs != nullptr ? options.fs : PosixEnv();
  const int fd = atomicwriter::OpenBeneath(*env, root_fd, rel_dir, kDirOpenFlags);
  if (fd < 0) {
    const int err = errno;
    Status s = OpenBeneathError(shown, err);
    return Status::Error("Error creating atomic writer: " + s.message(), err);
  }
  std::unique_ptr<AtomicWriter> writer(new AtomicWriter(shown, fd, std::move(options)));
  writer->root_dir_ = root_dir;
  writer->rel_dir_ = rel_dir;
  return writer;
}

AtomicWriter::AtomicWriter(std::string target_dir, int dir_fd, Options options)
    : target_dir_(std::move(target_dir)),
      dir_fd_(dir_fd),
      options_(std::move(options)),
      fs_(options_.fs != nullptr ? options_.fs : PosixEnv()) {
  if (options_.ledger == nullptr) options_.ledger = &own_ledger_;
}

AtomicWriter::~AtomicWriter() { fs_->Close(dir_fd_); }

namespace {

// One Write call. Names used in messages are relative to the volume dir.
class WriteOperation {
 public:
  // `dir_stat`: the volume dir's lstat taken by the caller right before (AtomicWriter::StatDir),
  // or nullopt.
  WriteOperation(Env& fs, int dir_fd, RemovalQueue::VolumeDir queued_as, const Options& options,
                 std::optional<struct stat> dir_stat)
      : fs_(fs),
        dir_fd_(dir_fd),
        queued_as_(std::move(queued_as)),
        target_dir_(queued_as_.shown),
        options_(options),
        dir_stat_(std::move(dir_stat)) {}

  Result<WriteResult> Run(const Payload& payload, const PermissionCallback& set_permissions) {
    Result<std::vector<CleanFile>> files = CleanPayload(payload);
    if (!files.ok()) return files.status();
    files_ = std::move(files).value();
    for (const CleanFile& f : files_) {
      first_components_.insert(FirstComponent(f.path));
      by_path_[f.path] = f.file;
      for (size_t slash = f.path.find('/'); slash != std::string::npos;
           slash = f.path.find('/', slash + 1)) {
        dirs_.insert(f.path.substr(0, slash));
      }
    }

    // Taken out for the whole write: a write that fails leaves no memo, and the next one reads
    // the volume dir in full.
    std::optional<UnpublishedLedger::LastWrite> last = options_.ledger->last_write();
    options_.ledger->set_last_write(std::nullopt);
    UnpublishedLedger& ledger = *options_.ledger;
    const auto now = options_.steady_now ? options_.steady_now() : std::chrono::steady_clock::now();
    const uint64_t names = TopLevelNamesHash();
    const uint64_t content = options_.removals != nullptr ? ContentHash() : 0;
    struct stat dir_before {};
    // Only this process's last write touched the volume dir since it ended, with the same
    // top-level names (UnpublishedLedger::LastWrite): every top-level link is in place, and the
    // version this write replaces is all there is to queue, once ..data is seen to name it.
    // The queue's removals since (of entries it was handed: never the live version nor a
    // top-level name) count as that write's (RemovalQueue::TookDirFromTo).
    const bool may_be_as_left =
        last && options_.removals != nullptr && last->top_level_names == names &&
        now - last->scanned < options_.unpublished_grace && StatDir(&dir_before) &&
        (UnpublishedLedger::DirStateHash(dir_before) == last->dir ||
         options_.removals->TookDirFromTo(queued_as_.shown, last->dir,
                                          UnpublishedLedger::DirStateHash(dir_before)));
    // The same dir, so the same filesystem.
    if (may_be_as_left) {
      traits_ = last->traits;
      last_version_mode_ = last->version_mode;
    }
    now_ = now;
    if (last) placed_ = last->placed;

    bool changed = false;
    std::string live;
    if (may_be_as_left && content != last->content &&
        fs_.ReadlinkAt(dir_fd_, kDataDirName, &live) == 0 &&
        UnpublishedLedger::NameHash(live) == last->live) {
      // Other paths or bytes than the live version was written with: a new version, without
      // opening or reading the live one.
      as_left_ = true;
      changed = true;
      old_ts_ = std::move(live);
      ledger.Forget(old_ts_);
    } else if (may_be_as_left && content == last->content && last->live_tree != 0 &&
               now - last->verified < options_.unpublished_grace &&
               fs_.ReadlinkAt(dir_fd_, kDataDirName, &live) == 0 && IsTimestampDirName(live) &&
               UnpublishedLedger::NameHash(live) == last->live &&
               LiveTreeHash(live) == last->live_tree) {
      // The bytes the live version holds, and nothing in it has changed since they were last
      // read: no new version, without reading them again.
      as_left_ = true;
      old_ts_ = std::move(live);
      live_tree_ = last->live_tree;
      verified_ = last->verified;
    } else {
      Status s = LocateCurrentVersion();
      if (!s.ok()) return s;
      as_left_ =
          may_be_as_left && !old_ts_.empty() && UnpublishedLedger::NameHash(old_ts_) == last->live;
      changed = !old_fd_.valid();
      if (!changed) {
        // When the payload is what the live version was written with (or last found to hold),
        // the live tree's state is taken before its bytes are read: a change after this shows in
        // a later write's state, and the next writes of the same payload need only compare it.
        const uint64_t tree = last && options_.removals != nullptr && content == last->content
                                  ? LiveTreeHash(old_ts_)
                                  : 0;
        Result<bool> needs = NeedsNewVersion();
        if (!needs.ok()) return needs.status();
        changed = *needs;
        if (!changed && tree != 0) {
          live_tree_ = tree;
          verified_ = now;
        }
      }
    }

    WriteResult result;
    result.on_tmpfs = Traits().tmpfs;
    if (!changed) {
      // Same content: keep the live version and only repair what a crash may have left.
      if (!as_left_) {
        Status s = LinkTopLevelNames(nullptr);
        if (!s.ok()) return s;
      }
      result.ts_dir = old_ts_;
    } else {
      Result<std::string> published = PublishNewVersion(set_permissions);
      if (!published.ok()) return published.status();
      result.published = true;
      result.ts_dir = std::move(published).value();
      // Past the point of no return: nothing below fails the write.
      if (options_.durable && fs_.Fsync(dir_fd_) != 0) {
        result.cleanup_error = ErrnoError("fsync", ".", errno).message();
      }
    }
    old_fd_.Reset();
    // The replaced version goes at once when the volume is this writer's alone: queued due now,
    // or removed here without a queue (a failure leaves what is left of it to the grace period).
    if (result.published && !old_ts_.empty() && ReplacedGoesAtOnce()) replaced_at_once_ = old_ts_;
    Status removal;
    if (!replaced_at_once_.empty() && options_.removals == nullptr) {
      removal = RemoveTreeAt(fs_, dir_fd_, replaced_at_once_, replaced_at_once_, DT_DIR);
      result.removed_replaced = removal.ok();
      if (removal.ok()) ledger.Forget(replaced_at_once_);
      replaced_at_once_.clear();
    }
    Status cleanup;
    if (as_left_) {
      if (result.published && !old_ts_.empty() && !result.removed_replaced) {
        cleanup = QueueReplacedVersion(dir_before, now, &result.queued_removals);
      }
    } else {
      cleanup = RemoveStaleEntries(&result.awaiting_grace, &result.queued_removals);
    }
    if (cleanup.ok() && !removal.ok()) cleanup = removal;
    if (cleanup.ok() && options_.removals != nullptr) {
      // A write that changed nothing left the dir as it found it.
      struct stat dir_after = dir_before;
      if ((result.published || !as_left_) &&
          fs_.FstatAt(dir_fd_, ".", &dir_after, AT_SYMLINK_NOFOLLOW) != 0) {
        return result;  // no memo: the next write reads the dir in full
      }
      ledger.set_last_write(UnpublishedLedger::LastWrite{
          UnpublishedLedger::NameHash(result.ts_dir), names, content,
          UnpublishedLedger::DirStateHash(dir_after), as_left_ ? last->scanned : now, traits_,
          result.published ? 0 : live_tree_, verified_, placed_,
          version_mode_ ? version_mode_ : last_version_mode_});
    }
    if (!cleanup.ok() && result.cleanup_error.empty()) result.cleanup_error = cleanup.message();
    return result;
  }

 private:
  // The volume dir's lstat when the write begins: the caller's, taken right before, or now.
  bool StatDir(struct stat* st) {
    if (dir_stat_) {
      *st = *dir_stat_;
      return true;
    }
    return fs_.FstatAt(dir_fd_, ".", st, AT_SYMLINK_NOFOLLOW) == 0;
  }

  // Reads ..data. Only a link to a real directory with a timestamp name counts as the live
  // version; a ..data that is not a symlink is debris and is removed.
  Status LocateCurrentVersion() {
    std::string target;
    if (fs_.ReadlinkAt(dir_fd_, kDataDirName, &target) != 0) {
      if (errno == ENOENT) return Status::OK();
      if (errno == EINVAL) return RemoveAllAt(fs_, dir_fd_, kDataDirName, kDataDirName);
      return ErrnoError("readlink", kDataDirName, errno);
    }
    if (!IsTimestampDirName(target)) return Status::OK();
    ScopedFd fd(&fs_, fs_.OpenAt(dir_fd_, target, kDirOpenFlags, 0));
    if (!fd.valid()) {
      // Dangling, or not a real directory (never followed): there is no old version to keep.
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return Status::OK();
      return ErrnoError("open", target, errno);
    }
    old_ts_ = target;
    old_fd_ = std::move(fd);
    // Live right now: once this write replaces it, its grace period starts afresh (another
    // writer that read ..data a moment ago may still be reading it).
    options_.ledger->Forget(target);
    return Status::OK();
  }

  // A new version is needed when a payload file is missing or differs in bytes, or when the live
  // version holds anything the payload does not (docs/kubelet-behavior.md §2 steps 3-4). Modes are
  // not compared. One walk of the live version, stopping at the first difference.
  Result<bool> NeedsNewVersion() {
    size_t matched = 0;
    Result<bool> same = SameTree(old_fd_.get(), "", old_ts_, &matched);
    if (!same.ok()) return same.status();
    return !*same || matched != files_.size();
  }

  Result<bool> SameTree(int dirfd, const std::string& prefix, const std::string& shown,
                        size_t* matched) {
    std::vector<DirEntry> entries;
    if (fs_.ReadDir(dirfd, &entries) != 0) {
      // Removed meanwhile by another writer that published a newer version: write ours.
      if (errno == ENOENT) return false;
      return ErrnoError("read dir", shown, errno);
    }
    for (const DirEntry& e : entries) {
      const std::string rel = prefix.empty() ? e.name : prefix + "/" + e.name;
      const unsigned char type = EntryType(fs_, dirfd, e);
      if (type == DT_DIR) {
        if (dirs_.count(rel) == 0) return false;
        ScopedFd sub(&fs_, fs_.OpenAt(dirfd, e.name, kDirOpenFlags, 0));
        if (!sub.valid()) return false;
        Result<bool> same = SameTree(sub.get(), rel, shown + "/" + e.name, matched);
        if (!same.ok() || !*same) return same;
        continue;
      }
      auto it = by_path_.find(rel);
      if (it == by_path_.end() || type != DT_REG ||
          !SameContent(fs_, dirfd, e.name, it->second->data)) {
        return false;
      }
      ++*matched;
    }
    return true;
  }

  Result<std::string> PublishNewVersion(const PermissionCallback& set_permissions) {
    // New top-level names are linked before the swap, so the moment ..data moves every file of
    // the new version is reachable. Until then they dangle, as a removed name does. They are
    // linked before the new version's dir is made: where versions are spread, that dir must be
    // the last inode made in the volume dir (CreateTimestampDir).
    std::vector<std::string> created_links;
    auto unlink_created = [&] {
      for (const std::string& link : created_links) fs_.UnlinkAt(dir_fd_, link, 0);
    };
    if (!as_left_) {
      Status s = LinkTopLevelNames(&created_links);
      if (!s.ok()) {
        unlink_created();
        return s;
      }
    }
    Result<std::string> ts = CreateTimestampDir(/*after_new_links=*/!created_links.empty());
    if (!ts.ok()) {
      unlink_created();
      return ts.status();
    }
    const std::string& ts_dir = *ts;

    auto abandon = [&](Status failure) -> Result<std::string> {
      // Nothing was published: put the volume back exactly as it was.
      new_fd_.Reset();
      unlink_created();
      RemoveAllAt(fs_, dir_fd_, ts_dir, ts_dir).IgnoreError();
      return failure;
    };

    Status s = WriteFiles(ts_dir);
    if (!s.ok()) return abandon(s);
    if (set_permissions) {
      s = set_permissions(fs_, dir_fd_, ts_dir);
      if (!s.ok()) return abandon(s);
    }

    // Staged under a name no other writer uses: the kubelet's writer owns ..data_tmp (it fails,
    // and tears the volume down, when that name is disturbed mid-write), and a second daemon
    // draws its own random name. Where versions are spread (SpreadsVersions), the link is made
    // inside the new version's dir and moved from there onto ..data: its inode then comes from
    // the part of the disk that dir was placed in, and the volume dir's last inode made stays
    // that dir (CreateTimestampDir). The link's target is a name relative to the dir holding
    // the link, so it resolves once it is ..data. The new dir is nobody else's until then: one
    // name is enough. Not for durable writes: a crash could leave that move half on disk, the
    // link in both dirs.
    const bool staged_inside = spread_ && !options_.durable;
    const int staging_dir = staged_inside ? new_fd_.get() : dir_fd_;
    std::string staging;
    for (int attempt = 0; attempt < kMaxNameAttempts && staging.empty(); ++attempt) {
      std::string name = StagingName();
      if (fs_.SymlinkAt(ts_dir, staging_dir, name) == 0) {
        staging = std::move(name);
      } else if (errno != EEXIST || staged_inside) {
        return abandon(ErrnoError("symlink", staged_inside ? ts_dir + "/" + name : name, errno));
      }
    }
    if (staging.empty()) return abandon(Status::Error("symlink: no free staging link name"));
    // The last look before the point of no return (e.g. this process still holds the node's
    // lock): refused, nothing is published and the new version goes again.
    if (options_.may_publish) {
      if (Status allowed = options_.may_publish(); !allowed.ok()) {
        if (!staged_inside) fs_.UnlinkAt(dir_fd_, staging, 0);
        return abandon(allowed);
      }
    }
    const int renamed = fs_.RenameAt(staging_dir, staging, dir_fd_, kDataDirName);
    new_fd_.Reset();
    if (renamed != 0) {
      Status failure = ErrnoError("rename " + staging + " to", kDataDirName, errno);
      if (!staged_inside) fs_.UnlinkAt(dir_fd_, staging, 0);
      // Only this write ever named the new dir (under its own staging link, now gone or inside
      // it), so it cannot have become live; make sure before removing it all the same.
      std::string live;
      if (fs_.ReadlinkAt(dir_fd_, kDataDirName, &live) == 0 && live == ts_dir) return ts_dir;
      return abandon(failure);
    }
    return ts_dir;
  }

  // `after_new_links`: this write has just made top-level links in the volume dir.
  Result<std::string> CreateTimestampDir(bool after_new_links) {
    const auto now = options_.now ? options_.now() : std::chrono::system_clock::now();
    // Where versions are spread, the first write of the volume in this process places its
    // version's dir as ext4 places a top-level dir: in the group with the fewest dirs among
    // those with more free inodes and blocks than the average. Later versions follow without the
    // flag: ext4 starts the search for a new dir's place where it last made an inode in the same
    // parent, so they land beside the last version, as long as nothing else is made in the
    // volume dir (PublishNewVersion) and its inode stays cached. So the flag is set again after
    // new top-level links, and every kPlaceAgainAfter (a volume dir that left the cache in
    // between lost its place). It is set only for this mkdir: under it every mkdir would weigh
    // every group of the filesystem (on the 252 GB disk of BENCHMARKS.md 68-133 us instead of
    // 21-43).
    spread_ = SpreadsVersions();
    const bool place = spread_ && (after_new_links || placed_ == decltype(placed_){} ||
                                   now_ - placed_ >= kPlaceAgainAfter);
    const std::optional<int> restore = place ? MarkTopOfHierarchy() : std::nullopt;
    Result<std::string> made = MakeTimestampDir(now);
    if (restore) fs_.SetInodeFlags(dir_fd_, *restore);
    // Tried, whether or not the mark could be set: where the filesystem refuses it, the next try
    // waits as a placement would (not an ioctl that fails on every write).
    if (place && made.ok()) placed_ = now_;
    return made;
  }

  Result<std::string> MakeTimestampDir(std::chrono::system_clock::time_point now) {
    for (int attempt = 0; attempt < kMaxNameAttempts; ++attempt) {
      std::string name = TimestampDirName(now, RandomSuffix());
      if (fs_.MkdirAt(dir_fd_, name, kTimestampDirMode) != 0) {
        if (errno == EEXIST) continue;
        return ErrnoError("mkdir", name, errno);
      }
      // WriteFiles writes through a descriptor of the new dir, except for a flat payload (no
      // subdirs) where creates keep their mode: its files are created beneath the volume dir
      // through the new dir's name (WriteFilesBeneath), and no descriptor of it is needed unless
      // its mode needs a chmod. Durable writes sync it, and where versions are spread the
      // staging link is made in it.
      Status s;
      if (!dirs_.empty() || options_.durable || spread_ || !Traits().creates_keep_mode) {
        new_fd_ = ScopedFd(&fs_, fs_.OpenAt(dir_fd_, name, kDirOpenFlags, 0));
        if (!new_fd_.valid()) s = ErrnoError("open", name, errno);
      }
      if (s.ok()) s = SetTimestampDirMode(name);
      if (!s.ok()) {
        new_fd_.Reset();
        RemoveAllAt(fs_, dir_fd_, name, name).IgnoreError();
        return s;
      }
      return name;
    }
    return Status::Error("mkdir: no free timestamp dir name after " +
                         std::to_string(kMaxNameAttempts) + " attempts");
  }

  // Gives the new version's dir its mode, and learns from the mode its mkdir gave it which file
  // modes a create gives exactly (exact_modes_). Where creates keep their mode
  // (FilesystemTraits::creates_keep_mode), the dir got 0755 less what the umask, or the default
  // ACL it inherited, withholds; its files and subdirs inherit the same, so a file that asks for
  // no bit beyond those gets exactly its mode from the create, and only the others need a chmod
  // (as the kubelet's writer chmods every file). The umask is process-wide: a process must not
  // change it while a write runs (every process with threads has to keep it fixed anyway).
  // A write that finds the volume dir as this process's last write left it (as_left_) knows the
  // mode without an fstat: the last new version's mkdir gave the same (LastWrite::version_mode).
  // Without a descriptor of the new dir (MakeTimestampDir), its lstat is taken by name, and a
  // descriptor is opened only for a chmod.
  Status SetTimestampDirMode(const std::string& name) {
    if (Traits().creates_keep_mode) {
      if (!as_left_ || !last_version_mode_) {
        struct stat st {};
        if ((new_fd_.valid() ? fs_.FstatAt(new_fd_.get(), "", &st, AT_EMPTY_PATH)
                             : fs_.FstatAt(dir_fd_, name, &st, AT_SYMLINK_NOFOLLOW)) != 0) {
          return ErrnoError("stat", name, errno);
        }
        if (!S_ISDIR(st.st_mode)) return ErrnoError("stat", name, ENOTDIR);
        version_mode_ = st.st_mode & 07777;
      } else {
        version_mode_ = last_version_mode_;
      }
      exact_modes_ = *version_mode_ & kTimestampDirMode;
      // Not when it inherited the volume dir's setgid bit.
      if (*version_mode_ == kTimestampDirMode) return Status::OK();
    }
    if (!new_fd_.valid()) {
      new_fd_ = ScopedFd(&fs_, fs_.OpenAt(dir_fd_, name, kDirOpenFlags, 0));
      if (!new_fd_.valid()) return ErrnoError("open", name, errno);
    }
    if (fs_.Fchmod(new_fd_.get(), kTimestampDirMode) != 0) return ErrnoError("chmod", name, errno);
    return Status::OK();
  }

  // Whether this write places its version away from the volume dir: in a volume dir no other
  // writer touches (ReplacedVersion other than kAfterGrace), on a filesystem that withholds freed
  // inodes. There a create walks past every inode freed in the last 60-360 s in its group, and
  // the volume dir's group is the one the node's other writers (the kubelet's, the pods') free
  // theirs in. A version's files and subdirs, and its staging link, follow its dir.
  bool SpreadsVersions() {
    return options_.replaced_version != ReplacedVersion::kAfterGrace && Traits().freed_inodes_wait;
  }

  // Marks the volume dir as the top of a directory hierarchy (FS_TOPDIR_FL, chattr +T) and
  // returns its flags without that mark, to be set again once the version's dir is made. A mark
  // found already set is cleared too: the volume dir is this writer's alone, so a crash between
  // the two left it, and under it every later mkdir would weigh every group of the filesystem.
  // Placement only, nothing any reader sees: when the flags cannot be read or set, nullopt, and
  // the write goes on as anywhere else.
  std::optional<int> MarkTopOfHierarchy() {
    int flags = 0;
    if (fs_.GetInodeFlags(dir_fd_, &flags) != 0) return std::nullopt;
    if ((flags & FS_TOPDIR_FL) == 0 && fs_.SetInodeFlags(dir_fd_, flags | FS_TOPDIR_FL) != 0) {
      return std::nullopt;
    }
    return flags & ~FS_TOPDIR_FL;
  }

  // The filesystem's traits: the last write's (same dir, same filesystem), else probed once.
  const FilesystemTraits& Traits() {
    if (!traits_) traits_ = options_.probe ? options_.probe(dir_fd_) : ProbeFilesystem(dir_fd_);
    return *traits_;
  }

  Status WriteFiles(const std::string& ts_dir) {
    if (!new_fd_.valid()) {
      if (!dirs_.empty()) return ErrnoError("open", ts_dir, EBADF);
      Status s = WriteFilesBeneath(ts_dir);
      // No openat2 here (ENOSYS, before any file was made): through a descriptor of the dir.
      if (s.sys_errno() != ENOSYS) return s;
      new_fd_ = ScopedFd(&fs_, fs_.OpenAt(dir_fd_, ts_dir, kDirOpenFlags, 0));
      if (!new_fd_.valid()) return ErrnoError("open", ts_dir, errno);
    }
    const ScopedFd& root = new_fd_;
    std::set<std::string> dirs_made;
    // Files come sorted by path, so siblings, and the files beneath one dir, are consecutive:
    // keep the last file's parent dir open, and its ancestors, each opened once (the first
    // kMaxHeldDirs levels; deeper ones are opened again for each file).
    std::vector<std::string> open_parts;  // the components of the held dirs
    std::vector<ScopedFd> open_dirs;      // open_dirs[i]: open_parts[0..i]
    ScopedFd deeper(&fs_, -1);            // the parent dir, when below the held ones
    for (const CleanFile& f : files_) {
      const size_t last_slash = f.path.rfind('/');
      const std::vector<std::string> parts = last_slash == std::string::npos
                                                 ? std::vector<std::string>{}
                                                 : SplitCleanPath(f.path.substr(0, last_slash));
      size_t keep = 0;
      while (keep < parts.size() && keep < open_parts.size() && parts[keep] == open_parts[keep]) {
        ++keep;
      }
      open_parts.resize(keep);
      open_dirs.erase(open_dirs.begin() + static_cast<std::ptrdiff_t>(keep), open_dirs.end());
      std::string rel;
      for (size_t i = 0; i < keep; ++i) rel = rel.empty() ? parts[i] : rel + "/" + parts[i];
      deeper.Reset();
      int at = keep == 0 ? root.get() : open_dirs.back().get();
      for (size_t i = keep; i < parts.size(); ++i) {
        rel = rel.empty() ? parts[i] : rel + "/" + parts[i];
        if (dirs_made.insert(rel).second && fs_.MkdirAt(at, parts[i], kNestedDirMode) != 0 &&
            errno != EEXIST) {
          return ErrnoError("mkdir", ts_dir + "/" + rel, errno);
        }
        ScopedFd next(&fs_, fs_.OpenAt(at, parts[i], kDirOpenFlags, 0));
        if (!next.valid()) return ErrnoError("open", ts_dir + "/" + rel, errno);
        at = next.get();
        if (open_dirs.size() < kMaxHeldDirs && !deeper.valid()) {
          open_parts.push_back(parts[i]);
          open_dirs.push_back(std::move(next));
        } else {
          deeper = std::move(next);
        }
      }
      const std::string name =
          last_slash == std::string::npos ? f.path : f.path.substr(last_slash + 1);
      Status s = WriteFile(at, name, *f.file, ts_dir + "/" + f.path);
      if (!s.ok()) return s;
    }
    deeper.Reset();
    open_dirs.clear();
    if (options_.durable) {
      // Directory entries become durable with their directory: sync every dir of the new tree.
      for (const std::string& rel : dirs_made) {
        ScopedFd d(&fs_, atomicwriter::OpenBeneath(fs_, root.get(), rel, kDirOpenFlags));
        if (!d.valid()) return ErrnoError("open", ts_dir + "/" + rel, errno);
        if (fs_.Fsync(d.get()) != 0) return ErrnoError("fsync", ts_dir + "/" + rel, errno);
      }
      if (fs_.Fsync(root.get()) != 0) return ErrnoError("fsync", ts_dir, errno);
    }
    return Status::OK();
  }

  // A flat payload's files, each created beneath the volume dir as `<ts_dir>/<name>` by one
  // openat2 that follows no link (Env::OpenAt2Beneath): one call per file, and none to open or
  // close the version's dir. An error with ENOSYS (no openat2) comes before any file is made.
  Status WriteFilesBeneath(const std::string& ts_dir) {
    for (const CleanFile& f : files_) {
      const std::string rel = ts_dir + "/" + f.path;
      const mode_t mode = f.file->mode & 07777;
      ScopedFd fd(&fs_, fs_.OpenAt2Beneath(dir_fd_, rel, O_WRONLY | O_CREAT | O_EXCL, mode));
      if (!fd.valid()) return ErrnoError("create", rel, errno);
      Status s = FillFile(std::move(fd), *f.file, rel);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  Status WriteFile(int dirfd, const std::string& name, const FileProjection& file,
                   const std::string& shown) {
    const mode_t mode = file.mode & 07777;
    ScopedFd fd(&fs_, fs_.OpenAt(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode));
    if (!fd.valid()) return ErrnoError("create", shown, errno);
    return FillFile(std::move(fd), file, shown);
  }

  // Writes `file` into the file just created as `fd`, and gives it its mode and owner.
  Status FillFile(ScopedFd fd, const FileProjection& file, const std::string& shown) {
    const mode_t mode = file.mode & 07777;
    if (fs_.WriteAll(fd.get(), file.data.data(), file.data.size()) < 0) {
      return ErrnoError("write", shown, errno);
    }
    if ((!exact_modes_ || (mode & ~*exact_modes_) != 0) && fs_.Fchmod(fd.get(), mode) != 0) {
      return ErrnoError("chmod", shown, errno);
    }
    if (file.fs_user && fs_.Fchown(fd.get(), *file.fs_user, static_cast<gid_t>(-1)) != 0) {
      return ErrnoError("chown", shown, errno);
    }
    if (options_.durable && fs_.Fsync(fd.get()) != 0) return ErrnoError("fsync", shown, errno);
    // A close error can be the first report of a failed write-back: the file is not trusted.
    if (fs_.Close(fd.release()) != 0) return ErrnoError("close", shown, errno);
    return Status::OK();
  }

  // Gives every first path component a `<name> -> ..data/<name>` link unless something already
  // stands under that name (a link, or a nested volume's mount point): docs/kubelet-behavior.md §2
  // step 10.
  Status LinkTopLevelNames(std::vector<std::string>* created) {
    for (const std::string& name : first_components_) {
      struct stat st {};
      if (fs_.FstatAt(dir_fd_, name, &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
      if (errno != ENOENT) return ErrnoError("lstat", name, errno);
      if (fs_.SymlinkAt(std::string(kDataDirName) + "/" + name, dir_fd_, name) != 0) {
        return ErrnoError("symlink", name, errno);
      }
      if (created != nullptr) created->push_back(name);
    }
    return Status::OK();
  }

  // The state of live version `ts` as far as this payload reaches: the lstat of its dir, of every
  // dir of the payload and of every file (inode, type and mode, link count, size, mtime and
  // ctime), hashed in path order. Any entry added, removed, renamed or written in it since moves
  // a mtime or ctime (UnpublishedLedger::LastWrite). 0 when an lstat fails or finds another type
  // (a dir is looked at before anything beneath it, so no path through a link is followed).
  uint64_t LiveTreeHash(const std::string& ts) {
    uint64_t h = 14695981039346656037ULL;
    auto add = [&](const std::string& rel, bool dir) {
      struct stat st {};
      if (fs_.FstatAt(dir_fd_, rel.empty() ? ts : ts + "/" + rel, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
        return false;
      }
      const uint64_t parts[] = {
          static_cast<uint64_t>(st.st_ino),         static_cast<uint64_t>(st.st_mode),
          static_cast<uint64_t>(st.st_nlink),       static_cast<uint64_t>(st.st_size),
          static_cast<uint64_t>(st.st_mtim.tv_sec), static_cast<uint64_t>(st.st_mtim.tv_nsec),
          static_cast<uint64_t>(st.st_ctim.tv_sec), static_cast<uint64_t>(st.st_ctim.tv_nsec)};
      for (const uint64_t p : parts) h = (h ^ p) * 1099511628211ULL + 0x9e3779b97f4a7c15ULL;
      return true;
    };
    if (!add("", true)) return 0;
    for (const std::string& dir : dirs_) {
      if (!add(dir, true)) return 0;
    }
    for (const CleanFile& f : files_) {
      if (!add(f.path, false)) return 0;
    }
    return h == 0 ? 1 : h;
  }

  // Whether the version this write replaced goes at once (Options::replaced_version).
  bool ReplacedGoesAtOnce() {
    switch (options_.replaced_version) {
      case ReplacedVersion::kAfterGrace:
        return false;
      case ReplacedVersion::kAtOnce:
        return true;
      case ReplacedVersion::kAtOnceWhereFreedInodesWait:
        return Traits().freed_inodes_wait;
    }
    return false;
  }

  // When the queue should remove unpublished entry `name`, seen first at `since`: at once for the
  // version this write replaced on a volume that is the writer's alone, else after the grace.
  std::chrono::steady_clock::time_point DueTime(const std::string& name,
                                                std::chrono::steady_clock::time_point since,
                                                std::chrono::steady_clock::time_point now) const {
    return name == replaced_at_once_ ? now : since + options_.unpublished_grace;
  }

  // The fast path's cleanup: queues the version this write replaced (old_ts_), due when its grace
  // period runs out, in the volume dir whose lstat is `dir_st`.
  Status QueueReplacedVersion(const struct stat& dir_st, std::chrono::steady_clock::time_point now,
                              int* queued) {
    struct stat st {};
    if (fs_.FstatAt(dir_fd_, old_ts_, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return Status::OK();  // removed by another writer meanwhile
      return ErrnoError("lstat", old_ts_, errno);
    }
    ++*queued;
    if (old_ts_ == replaced_at_once_) {
      // Due now, so the ledger need not remember it: a full read that still finds it queues it
      // again, and the queue keeps the earlier due time.
      options_.removals->Add(queued_as_, dir_st, old_ts_, st, now, options_.unpublished_grace);
      return Status::OK();
    }
    UnpublishedLedger& ledger = *options_.ledger;
    ledger.Observe(old_ts_, st, now, options_.unpublished_grace);
    // The version this process's last write published (the dir is as that write left it):
    // complete, and no writer writes into a published version, so the queue judges it by its own
    // inode and ctime without reading its tree.
    options_.removals->Add(queued_as_, dir_st, old_ts_, st,
                           DueTime(old_ts_, ledger.Since(old_ts_), now), options_.unpublished_grace,
                           /*complete=*/true);
    return Status::OK();
  }

  // The payload's cleaned paths and bytes (not modes or owners, which never make a new version),
  // hashed (UnpublishedLedger::LastWrite).
  uint64_t ContentHash() const {
    uint64_t h = 0;
    for (const CleanFile& f : files_) {
      const uint64_t parts[] = {std::hash<std::string_view>{}(f.path), f.file->data.size(),
                                std::hash<std::string_view>{}(f.file->data)};
      for (const uint64_t p : parts) h = (h ^ p) * 1099511628211ULL + 0x9e3779b97f4a7c15ULL;
    }
    return h;
  }

  // FNV-1a over the payload's top-level names (UnpublishedLedger::LastWrite).
  uint64_t TopLevelNamesHash() const {
    uint64_t h = 14695981039346656037ULL;
    for (const std::string& name : first_components_) {
      for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
      h = (h ^ 0x2f) * 1099511628211ULL;  // '/', which no name holds
    }
    return h;
  }

  // After the live version is settled: removes the writer's own top-level links for names the
  // payload no longer has, and timestamp dirs, staging links and removals in progress that
  // ..data does not point to once the ledger has seen them unpublished for the grace period
  // (counted in `*awaiting` until then), or hands them all to Options::removals (counted in
  // `*queued`), due when their grace period runs out. ..data is read again before each removal:
  // another writer may have published meanwhile. Entries the writer did not make, and the
  // kubelet's ..data_tmp, are left alone. Continues past failures and reports the last one.
  Status RemoveStaleEntries(int* awaiting, int* queued) {
    std::vector<DirEntry> entries;
    if (fs_.ReadDir(dir_fd_, &entries) != 0) return ErrnoError("read dir", ".", errno);
    Status last;
    UnpublishedLedger& ledger = *options_.ledger;
    const auto now = options_.steady_now ? options_.steady_now() : std::chrono::steady_clock::now();
    std::set<std::string> unpublished;
    struct stat dir_st {};
    if (options_.removals != nullptr &&
        fs_.FstatAt(dir_fd_, ".", &dir_st, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError("lstat", ".", errno);
    }
    // With a queue, ..data is read once: the queue reads it again before each removal.
    std::string queue_live;
    bool queue_live_read = false;
    for (const DirEntry& e : entries) {
      const std::string& name = e.name;
      if (name.starts_with("..")) {
        if (!IsTimestampDirName(name) && !IsStagingName(name) && !IsRemovingName(name)) continue;
        std::string live;
        if (options_.removals != nullptr) {
          if (!queue_live_read) {
            queue_live_read = true;
            if (fs_.ReadlinkAt(dir_fd_, kDataDirName, &queue_live) != 0) queue_live.clear();
          }
          if (queue_live == name) continue;
          if (ledger.Contains(name)) {
            // Queued by an earlier write and unpublished ever since: the queue checks, at the
            // due time, that it is unchanged.
            unpublished.insert(name);
            ++*queued;
            continue;
          }
        } else if (fs_.ReadlinkAt(dir_fd_, kDataDirName, &live) == 0 && live == name) {
          continue;
        }
        struct stat st {};
        if (fs_.FstatAt(dir_fd_, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
          if (errno != ENOENT) last = ErrnoError("lstat", name, errno);  // ENOENT: gone already
          continue;
        }
        unpublished.insert(name);
        // Without a queue, the writer judges the tree itself (the queue does otherwise); one it
        // cannot stamp is never unchanged.
        std::optional<uint64_t> tree;
        if (options_.removals == nullptr) {
          tree = TreeStamp(fs_, dir_fd_, name, st);
          if (!tree.has_value()) tree = UnjudgedTree();
        }
        const bool due =
            ledger.Observe(name, st, now, options_.unpublished_grace, tree.value_or(0));
        if (options_.removals != nullptr) {
          options_.removals->Add(queued_as_, dir_st, name, st,
                                 DueTime(name, ledger.Since(name), now),
                                 options_.unpublished_grace);
          ++*queued;
          continue;
        }
        if (!due) {
          ++*awaiting;
          continue;
        }
        // Checked again just before the removal: a version published meanwhile stays.
        if (fs_.ReadlinkAt(dir_fd_, kDataDirName, &live) == 0 && live == name) continue;
        Status s = RemoveAllAt(fs_, dir_fd_, name, name);
        if (s.ok()) {
          ledger.Forget(name);
          unpublished.erase(name);
        } else {
          last = s;
        }
        continue;
      }
      if (first_components_.count(name) != 0) continue;
      if (e.type != DT_LNK && e.type != DT_UNKNOWN) continue;  // not a link: not ours
      std::string target;
      if (fs_.ReadlinkAt(dir_fd_, name, &target) != 0) {
        if (errno != EINVAL && errno != ENOENT) last = ErrnoError("readlink", name, errno);
        continue;  // not a link: not ours
      }
      if (target != std::string(kDataDirName) + "/" + name) continue;
      if (fs_.UnlinkAt(dir_fd_, name, 0) != 0 && errno != ENOENT) {
        last = ErrnoError("remove", name, errno);
      }
    }
    ledger.ForgetAllBut(unpublished);
    return last;
  }

  Env& fs_;
  const int dir_fd_;
  // The volume dir as Options::removals opens it again: beneath the root when the writer was
  // opened so.
  const RemovalQueue::VolumeDir queued_as_;
  const std::string& target_dir_;
  const Options& options_;
  const std::optional<struct stat> dir_stat_;  // StatDir
  std::vector<CleanFile> files_;
  std::map<std::string, const FileProjection*> by_path_;  // cleaned path -> file
  std::set<std::string> dirs_;                            // every ancestor dir of a file
  std::set<std::string> first_components_;
  std::string old_ts_;
  ScopedFd old_fd_{&fs_, -1};
  ScopedFd new_fd_{&fs_, -1};                  // the new version's dir, from its mkdir to the swap
  bool spread_ = false;                        // SpreadsVersions(), for this write's new version
  std::chrono::steady_clock::time_point now_;  // the steady clock when this write began
  std::chrono::steady_clock::time_point placed_;  // UnpublishedLedger::LastWrite::placed
  bool as_left_ = false;  // the volume dir is as this process's last write left it
  // The version this write replaced when it goes at once (ReplacedVersion::kAtOnce), else empty.
  std::string replaced_at_once_;
  std::optional<FilesystemTraits> traits_;  // Traits()
  // The live version's LiveTreeHash when its bytes were found to match this payload's (0:
  // unknown), and when they were read.
  uint64_t live_tree_ = 0;
  std::chrono::steady_clock::time_point verified_;
  // The permission bits a create gives exactly in the new version (SetTimestampDirMode); unknown:
  // every file is chmodded.
  std::optional<mode_t> exact_modes_;
  // The bits the new version's mkdir gave it (SetTimestampDirMode), and the last write's
  // (LastWrite::version_mode) when the volume dir is as that write left it.
  std::optional<mode_t> version_mode_;
  std::optional<mode_t> last_version_mode_;
};

}  // namespace

Result<WriteResult> AtomicWriter::Write(const Payload& payload,
                                        const PermissionCallback& set_permissions) {
  WriteOperation op(*fs_, dir_fd_, RemovalQueue::VolumeDir{target_dir_, root_dir_, rel_dir_},
                    options_, std::exchange(dir_stat_, std::nullopt));
  return op.Run(payload, set_permissions);
}

int AtomicWriter::StatDir(struct stat* st) {
  dir_stat_.reset();
  if (fs_->FstatAt(dir_fd_, ".", st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
  dir_stat_ = *st;
  return 0;
}

uint64_t TmpfsPageBytes(const Payload& payload) {
  const long page_size = sysconf(_SC_PAGESIZE);
  const uint64_t page = page_size > 0 ? static_cast<uint64_t>(page_size) : 4096;
  uint64_t bytes = 0;
  for (const auto& [path, file] : payload) bytes += (file.data.size() + page - 1) / page * page;
  return bytes;
}

}  // namespace atomicwriter
