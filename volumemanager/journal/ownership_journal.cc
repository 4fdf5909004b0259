#include "volumemanager/journal/ownership_journal.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/durable_file.h"
#include "base/errno_error.h"
#include "base/unique_fd.h"

namespace volumemanager {
namespace {

using base::Result;
using base::Status;

constexpr std::string_view kHeaderPrefix = "volumemanager-ownership v";

using base::ErrnoError;

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string Header() {
  return std::string(kHeaderPrefix) + std::to_string(OwnershipJournal::kVersion) + "\n";
}

std::string Checksum(std::string_view body) {
  char sum[17];
  std::snprintf(sum, sizeof(sum), "%016llx", static_cast<unsigned long long>(Fnv1a64(body)));
  return sum;
}

// No control character: the root dir is the rest of one line.
bool RecordableRoot(const std::string& root) {
  for (unsigned char c : root) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// "/var/lib/kubelet/" and "/var/lib/kubelet" are one root dir.
std::string NormalRoot(std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

// The identity line: "<checksum> = root <magic>:<fsid>|- <boot id>|- <root dir>".
std::string EncodeIdentity(const std::string& root, const RootIdentity& id) {
  std::string fs = "-";
  if (id.known()) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%llx:%016llx", static_cast<unsigned long long>(id.fs_magic),
                  static_cast<unsigned long long>(id.fs_id));
    fs = buf;
  }
  const std::string body =
      "= root " + fs + " " + (id.boot_id.empty() ? "-" : id.boot_id) + " " + root;
  return Checksum(body) + " " + body + "\n";
}

// Parses the identity line (without its newline). False when it does not check out.
bool DecodeIdentity(std::string_view line, std::string* root, RootIdentity* id) {
  if (line.size() < 17 || line[16] != ' ') return false;
  const std::string_view body = line.substr(17);
  if (line.substr(0, 16) != Checksum(body) || !body.starts_with("= root ")) return false;
  std::string_view rest = body.substr(7);
  const size_t fs_end = rest.find(' ');
  if (fs_end == std::string_view::npos) return false;
  const std::string fs(rest.substr(0, fs_end));
  rest = rest.substr(fs_end + 1);
  const size_t boot_end = rest.find(' ');
  if (boot_end == std::string_view::npos) return false;
  const std::string boot(rest.substr(0, boot_end));
  *root = std::string(rest.substr(boot_end + 1));
  *id = RootIdentity{};
  if (fs != "-") {
    unsigned long long magic = 0, fsid = 0;
    int used = 0;
    if (std::sscanf(fs.c_str(), "%llx:%llx%n", &magic, &fsid, &used) != 2 ||
        used != static_cast<int>(fs.size()) || magic == 0) {
      return false;
    }
    id->fs_magic = magic;
    id->fs_id = fsid;
  }
  if (boot != "-") id->boot_id = boot;
  return RecordableRoot(*root);
}

const char* KindName(OwnedKind k) { return k == OwnedKind::kVolume ? "volume" : "dir"; }

std::string EncodeRecord(char op, const OwnedPath& p) {
  std::string body = std::string(1, op) + " " + KindName(p.kind) + " " + p.path;
  char sum[17];
  std::snprintf(sum, sizeof(sum), "%016llx", static_cast<unsigned long long>(Fnv1a64(body)));
  return std::string(sum) + " " + body + "\n";
}

// "@ volume <inode> <path>": the identity of an owned volume dir.
std::string EncodeInode(const std::string& path, uint64_t inode) {
  const std::string body = "@ volume " + std::to_string(inode) + " " + path;
  return Checksum(body) + " " + body + "\n";
}

// A path the journal can hold on one line and the daemon could have created: relative, below
// pods/, no empty, "." or ".." component, no control character.
bool ValidPath(const std::string& path) {
  if (!path.starts_with("pods/")) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    const std::string_view part(path.data() + start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// Parses one complete record line (without its newline). False when it does not check out. An
// `@` record (v3 only) sets `*inode`.
bool DecodeRecord(std::string_view line, bool identities, char* op, OwnedPath* out,
                  uint64_t* inode) {
  if (line.size() < 18 || line[16] != ' ') return false;
  const std::string_view body = line.substr(17);
  if (line.substr(0, 16) != Checksum(body)) return false;
  if (identities && body.starts_with("@ volume ")) {
    std::string_view rest = body.substr(9);
    const size_t space = rest.find(' ');
    if (space == 0 || space == std::string_view::npos || space > 20) return false;
    uint64_t n = 0;
    for (char c : rest.substr(0, space)) {
      if (c < '0' || c > '9') return false;
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      if (n > (UINT64_MAX - digit) / 10) return false;  // overflow
      n = n * 10 + digit;
    }
    if (n == 0) return false;
    *op = '@';
    *inode = n;
    out->kind = OwnedKind::kVolume;
    out->path = std::string(rest.substr(space + 1));
    return ValidPath(out->path);
  }
  if (body.size() < 3 || (body[0] != '+' && body[0] != '-') || body[1] != ' ') return false;
  const std::string_view rest = body.substr(2);
  const size_t space = rest.find(' ');
  if (space == std::string_view::npos) return false;
  const std::string_view kind = rest.substr(0, space);
  if (kind == "volume") {
    out->kind = OwnedKind::kVolume;
  } else if (kind == "dir") {
    out->kind = OwnedKind::kDir;
  } else {
    return false;
  }
  out->path = std::string(rest.substr(space + 1));
  *op = body[0];
  return ValidPath(out->path);
}

// Replaces the journal in `state_dir` (atomically and durably) with one holding what
// `for_each_owned` gives: it calls its argument with (kind, path, inode; 0 when not known) for
// every owned path, in path order.
template <typename ForEachOwned>
Status WriteJournal(const std::string& state_dir, const std::string& root,
                    const RootIdentity& identity, const ForEachOwned& for_each_owned) {
  std::string data = Header() + EncodeIdentity(root, identity);
  for_each_owned([&data](OwnedKind kind, const std::string& path, uint64_t inode) {
    data += EncodeRecord('+', OwnedPath{kind, path});
    if (inode != 0) data += EncodeInode(path, inode);
  });
  return base::WriteFileDurably(state_dir, OwnershipJournal::kFileName, data);
}

// A header's version that a later release wrote: decimal digits, no leading zero, above
// kVersion.
bool NewerVersion(std::string_view version) {
  if (version.empty() || version[0] == '0') return false;
  for (char c : version) {
    if (c < '0' || c > '9') return false;
  }
  return version.size() > 9 || std::stoi(std::string(version)) > OwnershipJournal::kVersion;
}

struct Parsed {
  OwnershipJournal::Loaded loaded = OwnershipJournal::Loaded::kTrusted;
  // kRejected because a later release wrote it (a rollback): Open refuses to go on.
  bool newer_version = false;
  std::string detail;
  std::map<std::string, OwnedKind> owned;
  std::map<std::string, uint64_t> inodes;  // v3: identities of owned volume dirs
  bool has_root = false;                   // v2: the root dir and identity below were recorded
  std::string root;
  RootIdentity identity;
};

Parsed Parse(const std::string& data, const std::string& file) {
  Parsed out;
  auto reject = [&](std::string why) {
    out.loaded = OwnershipJournal::Loaded::kRejected;
    out.detail = file + ": " + why;
    out.owned.clear();
    out.inodes.clear();
    return out;
  };
  const size_t header_end = data.find('\n');
  if (header_end == std::string::npos) return reject("no complete header line");
  const std::string_view header(data.data(), header_end);
  if (!header.starts_with(kHeaderPrefix)) return reject("not an ownership journal");
  const std::string_view version = header.substr(kHeaderPrefix.size());
  if (version != std::to_string(OwnershipJournal::kVersion) && version != "1" && version != "2") {
    if (NewerVersion(version)) {
      // A newer release's: not corrupt, only unreadable here. Open refuses it as it is.
      out.newer_version = true;
      out.loaded = OwnershipJournal::Loaded::kRejected;
      out.detail = file + ": ownership journal format version " + std::string(version) +
                   " is newer than this release reads (versions 1 to " +
                   std::to_string(OwnershipJournal::kVersion) +
                   "): it was written by a newer release of volumemanager";
      return out;
    }
    return reject("version " + std::string(version) + ", this daemon reads versions 1 to " +
                  std::to_string(OwnershipJournal::kVersion));
  }
  const bool identities = version != "1" && version != "2";
  size_t pos = header_end + 1;
  size_t line_no = 1;
  if (version != "1") {
    // The identity line, complete: it was written with the header, in one durable rewrite.
    const size_t nl = data.find('\n', pos);
    ++line_no;
    if (nl == std::string::npos ||
        !DecodeIdentity(std::string_view(data.data() + pos, nl - pos), &out.root, &out.identity)) {
      return reject("line 2 (the root dir and its identity) is corrupt");
    }
    out.has_root = true;
    pos = nl + 1;
  }
  while (pos < data.size()) {
    ++line_no;
    const size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) {
      out.detail = "ignored an incomplete last record (a stop in the middle of an append)";
      break;
    }
    char op = 0;
    OwnedPath p{OwnedKind::kDir, ""};
    uint64_t inode = 0;
    if (!DecodeRecord(std::string_view(data.data() + pos, nl - pos), identities, &op, &p, &inode)) {
      return reject("line " + std::to_string(line_no) + " is corrupt");
    }
    if (op == '+') {
      out.owned[p.path] = p.kind;
      out.inodes.erase(p.path);  // a new set-up: its identity follows
    } else if (op == '@') {
      // Only for a volume owned at this point (written after its `+`); otherwise stale.
      if (auto it = out.owned.find(p.path); it != out.owned.end() && it->second == p.kind) {
        out.inodes[p.path] = inode;
      }
    } else {
      out.owned.erase(p.path);
      out.inodes.erase(p.path);
    }
    pos = nl + 1;
  }
  return out;
}

// The journal at `file`, read and judged for `root_dir`; nothing is written. One kept for another
// root dir is kOtherRoot: its entries are paths below that root, none of them this one's.
Parsed ReadJournal(const std::string& file, const std::string& root_dir) {
  Parsed parsed;
  Result<std::string> data = base::ReadWholeFile(file);
  if (!data.ok()) {
    if (data.status().sys_errno() == ENOENT) {
      parsed.loaded = OwnershipJournal::Loaded::kNew;
      parsed.detail = "no ownership journal at " + file;
    } else {
      parsed.loaded = OwnershipJournal::Loaded::kRejected;
      parsed.detail = data.status().message();
    }
  } else {
    parsed = Parse(*data, file);
  }
  if (parsed.loaded == OwnershipJournal::Loaded::kTrusted && parsed.has_root && !root_dir.empty() &&
      !parsed.root.empty() && parsed.root != root_dir) {
    parsed.loaded = OwnershipJournal::Loaded::kOtherRoot;
    parsed.detail = file + " was kept for root dir " + parsed.root + ", not " + root_dir;
  }
  return parsed;
}

}  // namespace

std::string OwnershipJournal::PodPath(const std::string& pod_uid) { return "pods/" + pod_uid; }
std::string OwnershipJournal::PodVolumesPath(const std::string& pod_uid) {
  return PodPath(pod_uid) + "/volumes";
}
std::string OwnershipJournal::PluginPath(const std::string& pod_uid,
                                         const std::string& plugin_dir) {
  return PodVolumesPath(pod_uid) + "/" + plugin_dir;
}
std::string OwnershipJournal::VolumePath(const std::string& pod_uid, const std::string& plugin_dir,
                                         const std::string& volume_name) {
  // One allocation: each write names its volume.
  std::string path;
  path.reserve(pod_uid.size() + plugin_dir.size() + volume_name.size() + 16);
  path.append("pods/").append(pod_uid).append("/volumes/").append(plugin_dir).append("/");
  path.append(volume_name);
  return path;
}

bool RootIdentity::Volatile() const { return fs_magic == TMPFS_MAGIC || fs_magic == RAMFS_MAGIC; }

std::string RootIdentity::ToString() const {
  if (!known()) return "not recorded";
  std::string name;
  switch (fs_magic) {
    case EXT4_SUPER_MAGIC:  // also ext2 and ext3
      name = "ext4";
      break;
    case XFS_SUPER_MAGIC:
      name = "xfs";
      break;
    case BTRFS_SUPER_MAGIC:
      name = "btrfs";
      break;
    case TMPFS_MAGIC:
      name = "tmpfs";
      break;
    case RAMFS_MAGIC:
      name = "ramfs";
      break;
    case OVERLAYFS_SUPER_MAGIC:
      name = "overlay";
      break;
    default:
      break;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(fs_magic));
  if (name.empty()) name = std::string("magic 0x") + buf;
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(fs_id));
  return name + " fsid " + buf + ", boot " + (boot_id.empty() ? "unknown" : boot_id);
}

Result<RootIdentity> RootIdentity::Probe(atomicwriter::Env& env, const std::string& root_dir,
                                         const std::string& boot_id_file) {
  struct statfs st {};
  const base::UniqueFd root(env.OpenAt(AT_FDCWD, root_dir, O_RDONLY | O_DIRECTORY, 0));
  if (!root.valid() || env.Fstatfs(root.get(), &st) != 0) {
    return ErrnoError("statfs", root_dir, errno);
  }
  RootIdentity id;
  id.fs_magic = static_cast<uint64_t>(static_cast<unsigned long>(st.f_type));
  int words[2];
  static_assert(sizeof(words) == sizeof(st.f_fsid));
  std::memcpy(words, &st.f_fsid, sizeof(words));
  id.fs_id = (static_cast<uint64_t>(static_cast<uint32_t>(words[0])) << 32) |
             static_cast<uint32_t>(words[1]);
  if (Result<std::string> boot = base::ReadWholeFile(boot_id_file); boot.ok()) {
    std::string b = *boot;
    while (!b.empty() && (b.back() == '\n' || b.back() == ' ')) b.pop_back();
    if (b.find_first_of(" \n") == std::string::npos) id.boot_id = b;
  }
  return id;
}

std::string OwnershipJournal::OtherRootFileName(const std::string& root_dir) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(Fnv1a64(NormalRoot(root_dir))));
  return std::string(kFileName) + "." + hex + kRejectedSuffix;
}

Result<OwnershipJournal::OpenResult> OwnershipJournal::Open(const std::string& state_dir,
                                                            const std::string& root_arg,
                                                            atomicwriter::Env* env_arg) {
  atomicwriter::Env& env = env_arg != nullptr ? *env_arg : *atomicwriter::PosixEnv();
  const std::string root_dir = NormalRoot(root_arg);
  if (!RecordableRoot(root_dir)) {
    return Status::Error("--root-dir: a control character in \"" + root_dir +
                         "\": the ownership journal cannot record it");
  }
  if (env.MkdirAt(AT_FDCWD, state_dir, 0700) != 0 && errno != EEXIST) {
    return ErrnoError("--state-dir: mkdir", state_dir, errno);
  }
  const std::string file = state_dir + "/" + kFileName;
  OpenResult result;
  Parsed parsed = ReadJournal(file, root_dir);
  if (parsed.newer_version) {
    // A rollback: this release cannot tell what the newer one owns. Setting the journal aside
    // and starting a new one would lose that ownership for good; nothing is written instead.
    return Status::Error(parsed.detail + ". Refusing to start: " + file +
                         ", the rest of the state dir and every volume under the root dir are "
                         "left as they are; run the newer release again (docs/upgrades.md)");
  }
  if (parsed.loaded == Loaded::kOtherRoot) {
    // None of its entries is this root's to remove; it is kept aside, and a new one starts.
    parsed.owned.clear();
    parsed.inodes.clear();
    const std::string aside = state_dir + "/" + OtherRootFileName(parsed.root);
    if (env.RenameAt(AT_FDCWD, file, AT_FDCWD, aside) != 0) {
      return ErrnoError("rename", file, errno);
    }
    parsed.detail += "; kept as " + aside;
  }
  if (parsed.loaded != Loaded::kTrusted || !parsed.has_root) {
    parsed.identity = RootIdentity{};  // nothing recorded yet for this root
  }
  if (parsed.loaded == Loaded::kRejected) {
    // Kept for whoever investigates; a later rejection replaces it.
    const std::string aside = file + kRejectedSuffix;
    if (env.RenameAt(AT_FDCWD, file, AT_FDCWD, aside) == 0) {
      parsed.detail += "; kept as " + aside;
    } else if (errno != ENOENT) {
      return ErrnoError("rename", file, errno);
    }
  }
  // Start every run from a compact file: one record per owned path, and the root dir (a v1
  // journal's is the one it is opened for).
  const std::string root = root_dir.empty() ? parsed.root : root_dir;
  Status s = WriteJournal(state_dir, root, parsed.identity, [&parsed](const auto& emit) {
    for (const auto& [path, kind] : parsed.owned) {
      auto in = parsed.inodes.find(path);
      emit(kind, path, in == parsed.inodes.end() ? 0 : in->second);
    }
  });
  if (!s.ok()) return s;
  const int fd = env.OpenAt(AT_FDCWD, file, O_WRONLY | O_APPEND | O_NOFOLLOW, 0);
  if (fd < 0) return ErrnoError("open", file, errno);
  result.loaded = parsed.loaded;
  result.detail = std::move(parsed.detail);
  const size_t records = parsed.owned.size() + parsed.inodes.size();
  result.journal.reset(new OwnershipJournal(env, state_dir, root, parsed.identity, fd,
                                            std::move(parsed.owned), std::move(parsed.inodes),
                                            records));
  return result;
}

OwnershipJournal::OpenResult OwnershipJournal::ReadOnly(const std::string& state_dir,
                                                        const std::string& root_arg) {
  const std::string root_dir = NormalRoot(root_arg);
  const std::string file = state_dir + "/" + kFileName;
  Parsed parsed = ReadJournal(file, root_dir);
  if (parsed.loaded != Loaded::kTrusted) {
    parsed.owned.clear();
    parsed.inodes.clear();
  }
  if (parsed.loaded != Loaded::kTrusted || !parsed.has_root) parsed.identity = RootIdentity{};
  OpenResult result;
  result.loaded = parsed.loaded;
  result.detail = std::move(parsed.detail);
  const size_t records = parsed.owned.size() + parsed.inodes.size();
  result.journal.reset(new OwnershipJournal(
      *atomicwriter::PosixEnv(), state_dir, root_dir.empty() ? parsed.root : root_dir,
      parsed.identity, -1, std::move(parsed.owned), std::move(parsed.inodes), records));
  result.journal->read_only_ = true;
  return result;
}

OwnershipJournal::OwnershipJournal(atomicwriter::Env& env, std::string state_dir,
                                   std::string root_dir, RootIdentity identity, int fd,
                                   std::map<std::string, OwnedKind> owned,
                                   std::map<std::string, uint64_t> inodes, size_t records)
    : state_dir_(std::move(state_dir)),
      file_(state_dir_ + "/" + kFileName),
      root_dir_(std::move(root_dir)),
      identity_(std::move(identity)),
      env_(env),
      fd_(fd),
      records_(records) {
  for (auto& [path, kind] : owned) {
    auto in = inodes.find(path);
    const uint64_t inode = in == inodes.end() ? 0 : in->second;
    if (inode != 0) ++inodes_;
    owned_.Emplace(path, Owned{kind, inode});
  }
}

OwnershipJournal::~OwnershipJournal() {
  if (fd_ >= 0) env_.Close(fd_);
}

Status OwnershipJournal::Add(const std::vector<OwnedPath>& paths) {
  std::string lines;
  for (const OwnedPath& p : paths) {
    if (!ValidPath(p.path)) {
      return Status::Error("ownership journal: cannot record \"" + p.path + "\"");
    }
    lines += EncodeRecord('+', p);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++adds_in_flight_;
  }
  Status s = Commit(std::move(lines), paths.size());
  std::lock_guard<std::mutex> lock(mu_);
  --adds_in_flight_;
  if (adds_in_flight_ == 0) flushed_.notify_all();  // SetIdentity may wait for it
  if (!s.ok()) return s;
  for (const OwnedPath& p : paths) {
    Owned* entry = owned_.Emplace(p.path, Owned{p.kind, 0}).first;  // checked: ValidPath
    if (entry->inode != 0) --inodes_;
    *entry = Owned{p.kind, 0};  // a new set-up: its identity follows
  }
  return Status::OK();
}

Status OwnershipJournal::SetVolumeInode(const std::string& path, uint64_t inode) {
  if (inode == 0 || !Owns(OwnedKind::kVolume, path)) {
    return Status::Error("ownership journal: cannot record the identity of \"" + path +
                         "\": not an owned volume");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++adds_in_flight_;
  }
  Status s = Commit(EncodeInode(path, inode), 1);
  std::lock_guard<std::mutex> lock(mu_);
  --adds_in_flight_;
  if (adds_in_flight_ == 0) flushed_.notify_all();
  if (!s.ok()) return s;
  if (Owned* entry = owned_.Find(path); entry != nullptr) {
    if (entry->inode == 0) ++inodes_;
    entry->inode = inode;
  }
  return Status::OK();
}

uint64_t OwnershipJournal::VolumeInode(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Owned* entry = owned_.Find(path);
  return entry == nullptr ? 0 : entry->inode;
}

void OwnershipJournal::NoteForeignVolumeDir(const std::string& path, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(foreign_, [&](const ForeignVolumeDir& f) { return f.path == path; });
  if (foreign_.size() >= 256) foreign_.erase(foreign_.begin());
  foreign_.push_back(ForeignVolumeDir{path, reason});
}

std::vector<OwnershipJournal::ForeignVolumeDir> OwnershipJournal::ForeignVolumeDirs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return foreign_;
}

Status OwnershipJournal::Remove(const std::vector<OwnedPath>& paths) {
  std::string lines;
  std::vector<OwnedPath> released;
  std::vector<uint64_t> released_inodes;  // of `released`, 0 when not known
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const OwnedPath& p : paths) {
      const Owned* entry = owned_.Find(p.path);
      if (entry == nullptr || entry->kind != p.kind) continue;
      if (entry->inode != 0) --inodes_;
      released_inodes.push_back(entry->inode);
      owned_.Erase(p.path);
      lines += EncodeRecord('-', p);
      released.push_back(p);
    }
  }
  if (released.empty()) return Status::OK();
  Status s = Commit(std::move(lines), released.size());
  if (!s.ok()) {
    // The file still lists them: owned, so a teardown's retry releases them (and the owned dirs
    // above them) instead of taking the volume for one this daemon never set up.
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < released.size(); ++i) {
      if (owned_.Emplace(released[i].path, Owned{released[i].kind, released_inodes[i]}).second &&
          released_inodes[i] != 0) {
        ++inodes_;
      }
    }
  }
  return s;
}

bool OwnershipJournal::Owns(OwnedKind kind, const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Owned* entry = owned_.Find(path);
  return entry != nullptr && entry->kind == kind;
}

std::vector<OwnedPath> OwnershipJournal::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OwnedPath> out;
  out.reserve(owned_.size());
  owned_.ForEach([&](const std::string& path, const Owned& entry) {
    out.push_back({entry.kind, path});
  });
  // In path order, as the file lists them (OwnedPaths keeps a pod's entries together).
  std::sort(out.begin(), out.end(),
            [](const OwnedPath& a, const OwnedPath& b) { return a.path < b.path; });
  return out;
}

std::vector<OwnedPath> OwnershipJournal::EntriesOfPod(const std::string& pod_uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OwnedPath> out;
  owned_.ForEachOfPod(pod_uid, [&](const std::string& path, const Owned& entry) {
    out.push_back({entry.kind, path});
  });
  return out;
}

Status OwnershipJournal::Commit(std::string lines, size_t count) {
  std::unique_lock<std::mutex> lock(mu_);
  if (read_only_) return Status::OK();  // observe mode: the memory only
  pending_ += lines;
  pending_records_ += count;
  const uint64_t mine = ++queued_seq_;
  while (durable_seq_ < mine) {
    if (flushing_) {
      flushed_.wait(lock);
      continue;
    }
    // This thread writes everything queued so far, with one fsync.
    flushing_ = true;
    const std::string batch = std::exchange(pending_, {});
    const size_t batch_records = std::exchange(pending_records_, 0);
    const uint64_t batch_start = durable_seq_ + 1;
    const uint64_t batch_end = queued_seq_;
    const int fd = fd_;
    lock.unlock();
    struct stat before {};
    Status s;
    if (fd < 0) {
      s = Status::Error("ownership journal " + file_ + " is unusable after an earlier error");
    } else if (env_.Fstat(fd, &before) != 0) {
      s = ErrnoError("fstat", file_, errno);
    } else {
      if (env_.WriteAll(fd, batch.data(), batch.size()) < 0) s = ErrnoError("write", file_, errno);
      if (s.ok() && env_.Fdatasync(fd) != 0) s = ErrnoError("fsync", file_, errno);
      if (!s.ok() && env_.Ftruncate(fd, before.st_size) != 0) {
        // A partial record would make the whole journal untrusted at the next start; keep it
        // out of reach instead: nothing more is recorded (nothing more is created).
        env_.Close(fd);
        lock.lock();
        fd_ = -1;
        lock.unlock();
      }
    }
    lock.lock();
    flushing_ = false;
    if (s.ok()) {
      records_ += batch_records;
    } else {
      failed_[batch_start] = FailedBatch{batch_end, s};
    }
    durable_seq_ = batch_end;
    // Mostly released entries: rewrite the file, unless an Add is between its commit and its
    // update of owned_ (the rewrite would drop its records).
    if (s.ok() && adds_in_flight_ == 0 && records_ > 1024 &&
        records_ > 4 * (owned_.size() + inodes_)) {
      CompactLocked().IgnoreError();  // the appended file stays valid when this fails
    }
    flushed_.notify_all();
  }
  // Batches are contiguous ranges of sequence numbers; a failed one is remembered by its range.
  auto it = failed_.upper_bound(mine);
  if (it != failed_.begin()) {
    --it;
    if (mine <= it->second.end) return it->second.status;
  }
  return Status::OK();
}

RootIdentity OwnershipJournal::identity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return identity_;
}

Status OwnershipJournal::SetIdentity(const RootIdentity& identity) {
  std::unique_lock<std::mutex> lock(mu_);
  // A rewrite drops what an append in progress, or an Add between its commit and its update of
  // owned_, is about to record.
  flushed_.wait(lock, [this] { return !flushing_ && adds_in_flight_ == 0 && pending_.empty(); });
  const RootIdentity before = identity_;
  identity_ = identity;
  if (read_only_) return Status::OK();  // observe mode: the memory only
  Status s = CompactLocked();
  if (!s.ok()) identity_ = before;
  return s;
}

Status OwnershipJournal::CompactLocked() {
  Status s = WriteJournal(state_dir_, root_dir_, identity_, [this](const auto& emit) {
    owned_.ForEach(
        [&](const std::string& path, const Owned& entry) { emit(entry.kind, path, entry.inode); });
  });
  if (!s.ok()) return s;
  const int fd = env_.OpenAt(AT_FDCWD, file_, O_WRONLY | O_APPEND | O_NOFOLLOW, 0);
  if (fd < 0) return ErrnoError("open", file_, errno);
  if (fd_ >= 0) env_.Close(fd_);
  fd_ = fd;
  records_ = owned_.size() + inodes_;
  return Status::OK();
}

}  // namespace volumemanager
