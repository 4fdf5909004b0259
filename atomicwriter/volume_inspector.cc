#include "atomicwriter/volume_inspector.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

std::string ReadFileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void CollectVisible(const fs::path& p, const std::string& rel,
                    std::map<std::string, VisibleFile>* out, int depth) {
  if (depth > 64) return;
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return;  // dangling
  if (S_ISREG(st.st_mode)) {
    (*out)[rel] = VisibleFile{ReadFileBytes(p), st.st_mode & 07777, st.st_uid};
    return;
  }
  if (!S_ISDIR(st.st_mode)) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p, ec)) {
    const std::string name = e.path().filename().string();
    CollectVisible(e.path(), rel.empty() ? name : rel + "/" + name, out, depth + 1);
  }
}

}  // namespace

std::map<std::string, VisibleFile> ReadVisibleFiles(const std::string& volume_dir) {
  std::map<std::string, VisibleFile> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(volume_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("..")) continue;
    CollectVisible(e.path(), name, &out, 0);
  }
  return out;
}

std::map<std::string, std::string> ExpectedContent(const Payload& payload) {
  std::map<std::string, std::string> out;
  for (const auto& [path, file] : payload) out[CleanPath(path)] = file.data;
  return out;
}

std::map<std::string, std::string> VisibleContent(const std::string& volume_dir) {
  std::map<std::string, std::string> out;
  for (auto& [path, file] : ReadVisibleFiles(volume_dir)) out[path] = file.data;
  return out;
}

std::string DescribeDebris(const std::string& volume_dir, const Payload& payload) {
  std::set<std::string> want_links;
  for (const auto& [path, file] : payload) {
    const std::string clean = CleanPath(path);
    want_links.insert(clean.substr(0, clean.find('/')));
  }
  std::ostringstream problems;
  std::error_code ec;
  const fs::path data = fs::path(volume_dir) / "..data";
  if (!fs::is_symlink(fs::symlink_status(data, ec))) {
    problems << "..data is not a symlink; ";
    return problems.str();
  }
  const std::string live = fs::read_symlink(data, ec).string();
  std::set<std::string> seen_links;
  for (const auto& e : fs::directory_iterator(volume_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "..data" || name == "..data_tmp") continue;  // ..data_tmp: the kubelet's
    if (name.starts_with("..")) {
      if (name != live) problems << "extra entry " << name << "; ";
      continue;
    }
    if (!want_links.contains(name)) {
      problems << "unexpected top-level entry " << name << "; ";
      continue;
    }
    std::error_code lec;
    if (!fs::is_symlink(e.symlink_status(lec)) ||
        fs::read_symlink(e.path(), lec).string() != "..data/" + name) {
      problems << "top-level entry " << name << " is not ..data/" << name << "; ";
      continue;
    }
    seen_links.insert(name);
  }
  if (!fs::is_directory(fs::symlink_status(fs::path(volume_dir) / live, ec))) {
    problems << "..data target " << live << " is not a directory; ";
  }
  for (const std::string& name : want_links) {
    if (!seen_links.contains(name)) problems << "missing top-level link " << name << "; ";
  }
  return problems.str();
}

std::map<std::string, std::string> SnapshotTree(const std::string& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string rel = fs::relative(p, dir, ec).string();
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    std::ostringstream desc;
    desc << std::oct << (st.st_mode & 07777) << ' ';
    if (S_ISLNK(st.st_mode)) {
      desc << "link " << fs::read_symlink(p, ec).string();
    } else if (S_ISDIR(st.st_mode)) {
      desc << "dir";
    } else {
      desc << "file " << ReadFileBytes(p);
    }
    out[rel] = desc.str();
  }
  return out;
}

}  // namespace atomicwriter
