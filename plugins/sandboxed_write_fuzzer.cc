// libFuzzer target: payloads of fuzzed paths (NUL bytes, "..", slashes, anything) written by the
// real AtomicWriter, through the real PosixEnv, into a volume dir inside a sandbox. Nothing
// may ever be created, changed or removed outside the volume dir. The input is one byte of
// choices, then up to 16 paths separated by '\n' (each file's content names its index).
//
// Two oracles:
//  * at the system-call boundary, a Env that forwards to PosixEnv() traps on any
//    name or link target that, read as the kernel reads it (up to its first NUL), is absolute or
//    has a ".." element: the writer only ever passes single names and cleaned relative paths
//    below the volume dir (the one absolute name is Open's own, the volume dir). This catches an
//    escape of any depth before it happens, so a regression cannot write to the real /;
//  * on disk, after every input: the sandbox outside the volume dir (a canary dir and file, the
//    process's working dir, empty, for anything resolved against the cwd), and a marker dir
//    beside the sandbox in its parent, are exactly as they were (names, types, inodes, sizes,
//    modes, mtimes and ctimes).
// And on the writer's answer: a payload with a NUL in any path is refused, naming the NUL; a
// write that succeeds shows every file with its bytes through the volume's links.
// The sandbox (/tmp/sandboxed-write-fuzzer-*) is made once per process and reused, and removed at
// exit; the volume dir is emptied after each input. The process's working dir is the sandbox's,
// so libFuzzer's corpus and artifact paths must be absolute (tests/fuzz/run_fuzzers.sh).
// Built only with -DVM_FUZZ=ON (clang).
#include <fcntl.h>
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/env.h"
#include "atomicwriter/path_validation.h"
#include "base/strings.h"

namespace {

namespace fs = std::filesystem;

// The name as the kernel would read it: up to its first NUL.
std::string_view KernelView(const std::string& name) {
  return std::string_view(name.data(), std::strlen(name.c_str()));
}

bool CouldLeave(const std::string& name) {
  const std::string_view k = KernelView(name);
  if (!k.empty() && k.front() == '/') return true;
  for (std::string_view part : base::Split(k, '/')) {
    if (part == "..") return true;
  }
  return false;
}

[[noreturn]] void Escape(const char* call, const std::string& name) {
  std::fprintf(stderr, "ESCAPE: %s with a name that leaves its dir: \"%s\"\n", call,
               base::ShowNul(name).c_str());
  __builtin_trap();
}

class EscapeGuard final : public atomicwriter::EnvWrapper {
 public:
  explicit EscapeGuard(std::string volume_dir)
      : EnvWrapper(atomicwriter::PosixEnv()), volume_dir_(std::move(volume_dir)) {}

  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
    if (!(dirfd == AT_FDCWD && path == volume_dir_)) Check("openat", path);
    return target()->OpenAt(dirfd, path, flags, mode);
  }
  int FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) override {
    Check("fchmodat", path);
    return target()->FchmodAt(dirfd, path, mode, flags);
  }
  int FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid, int flags) override {
    Check("fchownat", path);
    return target()->FchownAt(dirfd, path, uid, gid, flags);
  }
  int FstatAt(int dirfd, const std::string& path, struct stat* st, int flags) override {
    Check("fstatat", path);
    return target()->FstatAt(dirfd, path, st, flags);
  }
  int MkdirAt(int dirfd, const std::string& path, mode_t mode) override {
    Check("mkdirat", path);
    return target()->MkdirAt(dirfd, path, mode);
  }
  int SymlinkAt(const std::string& link_target, int dirfd, const std::string& linkpath) override {
    Check("symlinkat (target)", link_target);
    Check("symlinkat", linkpath);
    return target()->SymlinkAt(link_target, dirfd, linkpath);
  }
  int OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) override {
    Check("openat2", rel);
    return target()->OpenAt2Beneath(dirfd, rel, flags, mode);
  }
  int ReadlinkAt(int dirfd, const std::string& path, std::string* out) override {
    Check("readlinkat", path);
    return target()->ReadlinkAt(dirfd, path, out);
  }
  int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
               const std::string& newpath) override {
    Check("renameat (from)", oldpath);
    Check("renameat (to)", newpath);
    return target()->RenameAt(olddirfd, oldpath, newdirfd, newpath);
  }
  int UnlinkAt(int dirfd, const std::string& path, int flags) override {
    Check("unlinkat", path);
    return target()->UnlinkAt(dirfd, path, flags);
  }

 private:
  static void Check(const char* call, const std::string& name) {
    if (CouldLeave(name)) Escape(call, name);
  }

  std::string volume_dir_;
};

// <top>/marker/m                       beside the sandbox, in its parent
// <top>/sandbox/outside-canary/file    the sandbox outside the volume
// <top>/sandbox/cwd/                   the process's working dir, empty
// <top>/sandbox/vol/                   the volume dir
struct Sandbox {
  std::string top, sandbox, vol;
};

const Sandbox& TheSandbox() {
  static const Sandbox* box = [] {
    char tmpl[] = "/tmp/sandboxed-write-fuzzer-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) __builtin_trap();
    auto* b = new Sandbox{tmpl, std::string(tmpl) + "/sandbox", std::string(tmpl) + "/sandbox/vol"};
    fs::create_directories(b->top + "/marker");
    fs::create_directories(b->sandbox + "/outside-canary");
    fs::create_directories(b->sandbox + "/cwd");
    fs::create_directories(b->vol);
    std::ofstream(b->top + "/marker/m") << "marker";
    std::ofstream(b->sandbox + "/outside-canary/file") << "canary";
    // libFuzzer's corpus and artifact paths must then be absolute (run_fuzzers.sh makes them so).
    if (::chdir((b->sandbox + "/cwd").c_str()) != 0) __builtin_trap();
    // Gone at a normal exit; a finding's trap leaves it to look at.
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(TheSandbox().top, ec);
    });
    return b;
  }();
  return *box;
}

using Stat = std::tuple<mode_t, ino_t, off_t, int64_t, int64_t, int64_t, int64_t>;

Stat StatOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {st.st_mode,         st.st_ino,         st.st_size,        st.st_mtim.tv_sec,
          st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
}

// Everything under `top` but what is inside the volume dir (the volume dir's own entry is kept:
// it must stay the same dir).
std::map<std::string, Stat> Outside(const Sandbox& box) {
  std::map<std::string, Stat> out;
  out[box.top] = StatOf(box.top);
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(box.top, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string p = it->path().string();
    if (p == box.vol) {
      // Its mtime and ctime change with every write; its identity and mode must not.
      const Stat s = StatOf(p);
      out[p] = {std::get<0>(s), std::get<1>(s), 0, 0, 0, 0, 0};
      it.disable_recursion_pending();
      continue;
    }
    out[p] = StatOf(p);
  }
  if (ec) __builtin_trap();
  return out;
}

void EmptyVolume(const Sandbox& box) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(box.vol, ec)) fs::remove_all(e.path(), ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Sandbox& box = TheSandbox();
  static const std::map<std::string, Stat> before = Outside(box);

  const uint8_t choices = data[0];
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  atomicwriter::Payload payload;
  bool any_nul = false;
  size_t i = 0;
  for (std::string_view path : base::Split(rest, '\n')) {
    if (i == 16) break;
    const std::string p(path);
    any_nul = any_nul || base::HasNul(p);
    const mode_t mode = (choices & 1) ? 0755 : 0644;  // a secret with defaultMode 0755, or not
    payload[p] = atomicwriter::FileProjection{"file " + std::to_string(i++), mode, std::nullopt};
  }

  EscapeGuard guard(box.vol);
  atomicwriter::Options options;
  options.fs = &guard;
  options.unpublished_grace = std::chrono::milliseconds(0);
  options.replaced_version = atomicwriter::ReplacedVersion::kAtOnce;
  options.probe = [](int) { return atomicwriter::FilesystemTraits{}; };
  auto writer = atomicwriter::AtomicWriter::Open(box.vol, options);
  if (!writer.ok()) __builtin_trap();
  auto result = (*writer)->Write(payload, nullptr);
  if (any_nul) {
    if (result.ok()) __builtin_trap();  // a NUL path must never be written
    if (result.status().message().find("must not contain a NUL byte") == std::string::npos &&
        result.status().message().find("invalid path") == std::string::npos) {
      __builtin_trap();
    }
  }
  if (result.ok()) {
    // Paths that clean to one name ("x/" and "x//") are one file: it holds one of their bytes.
    std::map<std::string, std::set<std::string>> expected;
    for (const auto& [path, file] : payload) {
      expected[atomicwriter::CleanPath(path)].insert(file.data);
    }
    for (const auto& [clean, datas] : expected) {
      if (datas.count(ReadFile(box.vol + "/" + clean)) == 0) __builtin_trap();
    }
    // A second write of part of the payload: links and versions the first one made go.
    if (choices & 2) {
      atomicwriter::Payload half;
      size_t k = 0;
      for (const auto& [path, file] : payload) {
        if (k++ % 2 == 0) half[path] = file;
      }
      auto again = (*writer)->Write(half, nullptr);
      if (!again.ok()) __builtin_trap();  // its paths were all accepted a moment ago
    }
  }
  writer->reset();

  if (Outside(box) != before) {
    std::fprintf(stderr, "ESCAPE: something outside the volume dir was created or changed\n");
    __builtin_trap();
  }
  EmptyVolume(box);
  return 0;
}
