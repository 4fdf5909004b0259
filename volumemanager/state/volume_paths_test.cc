#include "volumemanager/state/volume_paths.h"

#include <gtest/gtest.h>

#include <string>

namespace volumemanager {
namespace {

using namespace std::string_literals;

TEST(CheckPathComponentTest, OneNameOnly) {
  for (const std::string ok : {"web-0", "0b6f6a3c-1f2e-4a7b-9c8d-123456789abc", "a.b", "..a"}) {
    EXPECT_TRUE(CheckPathComponent(ok, "pod UID").ok()) << ok;
  }
  for (const std::string& bad : {""s, "."s, ".."s, "a/b"s, "/"s, std::string(256, 'a')}) {
    const base::Status s = CheckPathComponent(bad, "volume name");
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("must be a single path component"), std::string::npos);
  }
}

// "..\0x" is no ".." to a string comparison, but ".." to every system call.
TEST(CheckPathComponentTest, RefusesANulByteNamingItEscaped) {
  for (const std::string& bad : {"..\0x"s, "\0"s, "uid\0"s, "a\0/b"s}) {
    const base::Status s = CheckPathComponent(bad, "pod UID");
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("must not contain a NUL byte"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\0'), std::string::npos);
  }
  EXPECT_EQ(CheckPathComponent("..\0x"s, "volume name").message(),
            "invalid volume name \"..\\x00x\": must not contain a NUL byte");
}

}  // namespace
}  // namespace volumemanager
