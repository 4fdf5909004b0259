// A test fixture holding a fresh ext4 filesystem, made with or without a journal, in a small
// image file loop-mounted under a temporary dir (Ext4ImageTest). Needs root, mkfs.ext4 and a loop
// device: a test skips, saying why, where there is none of them.
#ifndef VOLUMEMANAGER_ATOMICWRITER_EXT4_IMAGE_FIXTURE_H_
#define VOLUMEMANAGER_ATOMICWRITER_EXT4_IMAGE_FIXTURE_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace atomicwriter {

class Ext4ImageTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (mounted_) ::umount2(mount_dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Mounts a fresh 16 MiB ext4 (journal or not; `mkfs_options` are passed on to mkfs.ext4) at
  // mount_dir_ and returns a descriptor of its root, or -1 with the reason in `why`.
  int Mount(bool journal, std::string* why, const std::string& mkfs_options = "") {
    char tmpl[] = "/tmp/ext4-image-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return -1;
    dir_ = tmpl;
    const std::string image = dir_ + "/image";
    mount_dir_ = dir_ + "/mnt";
    std::filesystem::create_directory(mount_dir_);
    const std::string mkfs = std::string("mkfs.ext4 -q -F ") + (journal ? "" : "-O ^has_journal ") +
                             mkfs_options + " " + image + " 16M >/dev/null 2>&1";
    if (std::system(mkfs.c_str()) != 0) {
      *why = "mkfs.ext4 failed (e2fsprogs missing?)";
      return -1;
    }
    const std::string mount = "mount -o loop " + image + " " + mount_dir_ + " >/dev/null 2>&1";
    if (::geteuid() != 0 || std::system(mount.c_str()) != 0) {
      *why = "no loop mount here (needs root and a loop device)";
      return -1;
    }
    mounted_ = true;
    return ::open(mount_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }

  std::string dir_;
  std::string mount_dir_;
  bool mounted_ = false;
};

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_EXT4_IMAGE_FIXTURE_H_
