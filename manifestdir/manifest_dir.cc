#include "manifestdir/manifest_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/durable_file.h"
#include "base/sha256.h"

namespace manifestdir {

bool IsManifestFileName(std::string_view name) {
  if (name.empty() || name[0] == '.') return false;
  return name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json");
}

FileStamp FileStamp::Of(const struct stat& st) {
  return {st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec};
}

base::Result<std::string> ReadManifestFile(const std::string& path) {
  // A manifest may be a link (a projected volume's files are links through ..data). A FIFO swapped
  // in after the stat is refused, not waited on: it would hold the pool thread for ever.
  return base::ReadRegularFile(path, kMaxManifestBytes, /*follow_symlinks=*/true);
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

ManifestDir::ManifestDir(ManifestDirOptions options) : options_(std::move(options)) {}

std::string ManifestDir::PathOf(const std::string& name) const {
  if (single_file_) return options_.path;
  return options_.path + "/" + name;
}

void ManifestDir::List(ManifestDirScan* scan, std::set<std::string>* names) {
  using Listing = ManifestDirScan::Listing;
  if (options_.allow_single_file) {
    struct stat st;
    if (stat(options_.path.c_str(), &st) != 0) {
      scan->listing = errno == ENOENT ? Listing::kMissing : Listing::kFailed;
      scan->error = strerror(errno);
      return;
    }
    if (S_ISREG(st.st_mode)) {
      single_file_ = BaseName(options_.path);
      names->insert(*single_file_);
      scan->listing = Listing::kListed;
      return;
    }
    if (!S_ISDIR(st.st_mode)) {
      scan->listing = Listing::kFailed;
      scan->error = "neither a directory nor a regular file";
      return;
    }
  }
  single_file_.reset();
  DIR* d = opendir(options_.path.c_str());
  if (d == nullptr) {
    scan->listing = errno == ENOENT ? Listing::kMissing : Listing::kFailed;
    scan->error = strerror(errno);
    return;
  }
  while (struct dirent* e = readdir(d)) {
    if (IsManifestFileName(e->d_name)) names->insert(e->d_name);
  }
  closedir(d);
  scan->listing = Listing::kListed;
}

std::optional<FileStamp> ManifestDir::Stat(int dir_fd, const std::string& name, bool* gone,
                                           int* error) const {
  struct stat st;
  *gone = false;
  *error = 0;
  const int rc =
      dir_fd >= 0 ? fstatat(dir_fd, name.c_str(), &st, 0) : stat(PathOf(name).c_str(), &st);
  if (rc != 0) {
    *error = errno;
    *gone = errno == ENOENT || errno == ENOTDIR;  // other failures: keep what was read
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *gone = true;  // a subdirectory (no recursion) or a device
    return std::nullopt;
  }
  return FileStamp::Of(st);
}

void ManifestDir::Read(const std::string& name, const FileStamp& stamp, File* file,
                       ManifestDirScan* scan) {
  ++reads_;
  file->stamp = stamp;
  ManifestFileRead read{name, base::Status::OK(), std::nullopt};
  base::Result<std::string> bytes = ReadManifestFile(PathOf(name));
  if (!bytes.ok()) {
    // Forgotten, so that the next good read is reported whatever its bytes.
    read.status = bytes.status();
    file->have_bytes = false;
    file->digest.clear();
  } else {
    std::string digest = base::Sha256Of(*bytes);
    if (!file->have_bytes || file->digest != digest) {
      file->have_bytes = true;
      file->digest = std::move(digest);
      read.bytes = std::move(bytes).value();
    }
  }
  scan->reads.push_back(std::move(read));
}

ManifestDirScan ManifestDir::Scan(ManifestScanScope scope, const std::set<std::string>& named) {
  ManifestDirScan scan;
  std::set<std::string> names;
  if (scope == ManifestScanScope::kNamed) {
    for (const std::string& name : named) {
      // A single file's directory holds other files: only the one file counts.
      if (!single_file_ || name == *single_file_) names.insert(name);
    }
  } else {
    List(&scan, &names);
    if (scan.listing == ManifestDirScan::Listing::kFailed) return scan;
    for (auto it = files_.begin(); it != files_.end();) {
      if (names.count(it->first)) {
        ++it;
        continue;
      }
      scan.removed.push_back(it->first);
      it = files_.erase(it);
    }
  }
  // Each name looked up in the directory (a relist stats every file: 1,000 path walks of the
  // whole path cost several times 1,000 lookups of one component). Symlinks are followed, as
  // stat does.
  const int dir_fd =
      single_file_ ? -1 : open(options_.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (const std::string& name : names) {
    bool gone = false;
    int error = 0;
    std::optional<FileStamp> stamp = Stat(dir_fd, name, &gone, &error);
    auto it = files_.find(name);
    if (!stamp) {
      if (gone && it != files_.end()) {
        scan.removed.push_back(name);
        files_.erase(it);
      } else if (!gone && error != 0) {
        // There but not readable (a symlink loop, EACCES, EIO): a failed read, so that the owner
        // hears of it and keeps what it had; read again whatever its stamp once stat works.
        if (it != files_.end()) {
          it->second.have_bytes = false;
          it->second.digest.clear();
        }
        scan.reads.push_back({name,
                              base::Status::Error(std::string("stat: ") + strerror(error), error),
                              std::nullopt});
      }
      continue;
    }
    const bool is_new = it == files_.end();
    if (is_new) it = files_.emplace(name, File{}).first;
    File& file = it->second;
    if (scope != ManifestScanScope::kStatAll || is_new || !file.have_bytes || named.count(name) ||
        !(file.stamp == *stamp)) {
      Read(name, *stamp, &file, &scan);
    }
  }
  if (dir_fd >= 0) close(dir_fd);
  std::sort(scan.removed.begin(), scan.removed.end());
  return scan;
}

}  // namespace manifestdir
