#include "plugins/ownership_pass.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "logging/structured_log.h"

namespace plugins {
namespace {

constexpr mode_t kReadMask = 0440;  // group and owner read: the volume is read-only to pods
constexpr mode_t kExecMask = 0110;  // group and owner search on directories

class OwnershipWalker {
 public:
  OwnershipWalker(atomicwriter::Env& fs, gid_t gid, OwnershipPassStats* stats)
      : fs_(fs), gid_(gid), stats_(stats) {}

  // Children of the open directory `dir_fd`, then the directory itself.
  void Directory(int dir_fd, const std::string& rel) {
    std::vector<atomicwriter::DirEntry> entries;
    if (fs_.ReadDir(dir_fd, &entries) != 0) {
      Failed("readdir", rel);
    } else {
      for (const atomicwriter::DirEntry& e : entries) Entry(dir_fd, e.name, ChildPath(rel, e.name));
    }
    ++stats_->entries;
    struct stat st;
    if (fs_.FstatAt(dir_fd, "", &st, AT_EMPTY_PATH) != 0) {
      Failed("stat", rel);
      return;
    }
    if (fs_.Fchown(dir_fd, static_cast<uid_t>(-1), gid_) != 0) Failed("chown", rel);
    if (fs_.Fchmod(dir_fd, (st.st_mode & 07777) | kReadMask | kExecMask | S_ISGID) != 0) {
      Failed("chmod", rel);
    }
  }

  int failures() const { return stats_->failures; }

 private:
  // `name` in directory `rel` of the volume (".": the volume dir), as messages name it.
  static std::string ChildPath(const std::string& rel, const std::string& name) {
    return rel == "." ? name : rel + "/" + name;
  }

  void Failed(const char* op, const std::string& rel) {
    ++stats_->failures;
    logging::Debug("fsGroup ownership pass: a call failed",
                   {{"op", op}, {"path", rel}, {"err", std::strerror(errno)}});
  }

  void Entry(int dir_fd, const std::string& name, const std::string& rel) {
    struct stat st;
    if (fs_.FstatAt(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      ++stats_->entries;
      Failed("lstat", rel);
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      const int fd = fs_.OpenAt(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
      if (fd < 0) {
        ++stats_->entries;
        Failed("open", rel);
        return;
      }
      Directory(fd, rel);
      fs_.Close(fd);
      return;
    }
    ++stats_->entries;
    if (!S_ISREG(st.st_mode)) {
      // Symlinks (and anything else that is not a plain file): group only, never followed.
      if (fs_.FchownAt(dir_fd, name, static_cast<uid_t>(-1), gid_, AT_SYMLINK_NOFOLLOW) != 0) {
        Failed("chown", rel);
      }
      return;
    }
    // O_NONBLOCK: should the file have been swapped for a FIFO, opening must not hang.
    const int fd = fs_.OpenAt(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) {
      Failed("open", rel);
      return;
    }
    struct stat now;
    if (fs_.FstatAt(fd, "", &now, AT_EMPTY_PATH) != 0 || !S_ISREG(now.st_mode)) {
      Failed("stat", rel);
    } else {
      if (fs_.Fchown(fd, static_cast<uid_t>(-1), gid_) != 0) Failed("chown", rel);
      // chmod after chown: chown clears setuid/setgid on files.
      if (fs_.Fchmod(fd, (now.st_mode & 07777) | kReadMask) != 0) Failed("chmod", rel);
    }
    fs_.Close(fd);
  }

  atomicwriter::Env& fs_;
  gid_t gid_;
  OwnershipPassStats* stats_;
};

}  // namespace

base::Status SetVolumeOwnership(atomicwriter::Env& fs, int volume_dir_fd, gid_t fs_group,
                                OwnershipPassStats* stats) {
  OwnershipPassStats local;
  if (stats == nullptr) stats = &local;
  *stats = {};
  std::vector<atomicwriter::DirEntry> probe;
  if (fs.ReadDir(volume_dir_fd, &probe) != 0) {
    const int err = errno;
    return base::Status::Error(
        std::string("fsGroup ownership pass: read volume dir: ") + std::strerror(err), err);
  }
  OwnershipWalker(fs, fs_group, stats).Directory(volume_dir_fd, ".");
  return base::Status::OK();
}

atomicwriter::PermissionCallback OwnershipPass(gid_t fs_group, OwnershipPassTarget target) {
  return [fs_group, target = std::move(target)](atomicwriter::Env& fs, int volume_dir_fd,
                                                const std::string& /*ts_dir*/) -> base::Status {
    OwnershipPassStats stats;
    base::Status s = SetVolumeOwnership(fs, volume_dir_fd, fs_group, &stats);
    if (!s.ok()) {
      return s.WithContext("volume \"" + target.volume + "\" of pod \"" + target.pod + "\"");
    }
    logging::Log(stats.failures > 0 ? spdlog::level::warn : spdlog::level::debug,
                 stats.failures > 0
                     ? "fsGroup ownership pass: some entries could not be changed (skipped)"
                     : "fsGroup ownership pass done",
                 {{"pod", target.pod},
                  {"podUID", target.pod_uid},
                  {"volume", target.volume},
                  {"fsGroup", fs_group},
                  {"entries", stats.entries},
                  {"failures", stats.failures}});
    return base::Status::OK();
  };
}

atomicwriter::PermissionCallback OwnershipPassFor(const kube::Pod& pod, const std::string& volume) {
  if (!pod.spec.security_context || !pod.spec.security_context->fs_group) return nullptr;
  return OwnershipPass(static_cast<gid_t>(*pod.spec.security_context->fs_group),
                       {pod.metadata.NamespacedName(), pod.metadata.uid, volume});
}

}  // namespace plugins
