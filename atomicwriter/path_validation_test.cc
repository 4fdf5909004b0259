#include "atomicwriter/path_validation.h"

#include <gtest/gtest.h>

#include <string>

namespace atomicwriter {
namespace {

// A path of exactly `n` bytes made of 200-byte elements.
std::string PathOfLength(size_t n) {
  std::string p;
  while (p.size() < n) {
    if (!p.empty() && p.size() % 201 == 200) {
      p += '/';
    } else {
      p += 'a';
    }
  }
  return p;
}

struct ValidateCase {
  const char* name;
  std::string path;
  std::string error;  // "" = accepted
};

// Every vector of docs/kubelet-behavior.md §3, plus rule-order cases.
TEST(ValidatePathTest, SpecVectors) {
  using namespace std::string_literals;
  const ValidateCase cases[] = {
      {"well_behaved_nested", "i/am/well/behaved.txt", ""},
      {"well_behaved_flat", "keepyourheaddownandfollowtherules.txt", ""},
      {"too_long", std::string(4097, 'a'),
       "invalid path: must be less than or equal to 4096 characters"},
      {"max_length_ok", PathOfLength(4096), ""},
      {"element_too_long", std::string(256, 'a'),
       "invalid path: filenames must be less than or equal to 255 characters"},
      {"element_max_ok", std::string(255, 'a'), ""},
      {"absolute", "/dev/null", "invalid path: must be relative path: /dev/null"},
      {"sneaky", "..sneaky.txt", "invalid path: must not start with '..': ..sneaky.txt"},
      {"dotdotbar", "..bar", "invalid path: must not start with '..': ..bar"},
      {"three_dots", "...", "invalid path: must not start with '..': ..."},
      {"dotdot", "..", "invalid path: must not contain '..': .."},
      {"traversal", "hello/there/../../../../../../etc/passwd",
       "invalid path: must not contain '..': hello/there/../../../../../../etc/passwd"},
      {"traversal2", "hello/../etc/somethingbad",
       "invalid path: must not contain '..': hello/../etc/somethingbad"},
      {"traversal3", "foo/../bar", "invalid path: must not contain '..': foo/../bar"},
      {"traversal4", "foo/../etc/password",
       "invalid path: must not contain '..': foo/../etc/password"},
      {"empty", "", "invalid path: must not be empty: \"\""},
      {"many_slashes", "foo////bar", ""},
      {"dot_slash", "./bar", ""},
      {"double_slash", "foo//bar.txt", ""},
      {"triple_slash", "bar///bar/zab.txt", ""},
      {"dotfile_bin", ".binary.bin", ""},
      {"dotfile", ".dotfile", ""},
      {"dotfile_file", ".dotfile.file", ""},
      {"deep_dotfile", "1/2/3/4/5/6/7/8/9/10/.dotfile.lib", ""},
      {"inner_dotdot_prefix_ok", "a/..b", ""},
      // Rule order: absolute is reported before length, '..' element before long element, and
      // element rules left to right.
      {"absolute_and_long", "/" + std::string(5000, 'a'),
       "invalid path: must be relative path: /" + std::string(5000, 'a')},
      {"dotdot_before_long_element", "../" + std::string(300, 'a'),
       "invalid path: must not contain '..': ../" + std::string(300, 'a')},
      {"long_element_before_dotdot", std::string(300, 'a') + "/..",
       "invalid path: filenames must be less than or equal to 255 characters"},
      {"long_element_before_reserved_prefix", "..x/" + std::string(300, 'a'),
       "invalid path: filenames must be less than or equal to 255 characters"},
      {"byte_lengths", std::string(128, '\xc3') + std::string(128, '\xa9'),
       "invalid path: filenames must be less than or equal to 255 characters"},
      // A NUL byte: every system call would cut the name there, and "..\0x" would become "..".
      // Refused before every other rule, the path shown escaped.
      {"nul_escape", "a/..\0x/..\0x/..\0x/PWNED"s,
       "invalid path: must not contain a NUL byte: a/..\\x00x/..\\x00x/..\\x00x/PWNED"},
      {"nul_only", std::string(1, '\0'), "invalid path: must not contain a NUL byte: \\x00"},
      {"nul_last", "ok\0"s, "invalid path: must not contain a NUL byte: ok\\x00"},
      {"nul_before_absolute", "/etc/\0"s, "invalid path: must not contain a NUL byte: /etc/\\x00"},
      {"nul_before_long", std::string(5000, 'a') + std::string(1, '\0'),
       "invalid path: must not contain a NUL byte: " + std::string(5000, 'a') + "\\x00"},
  };
  for (const ValidateCase& c : cases) {
    SCOPED_TRACE(c.name);
    base::Status s = ValidatePath(c.path);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << s.message();
    } else {
      EXPECT_FALSE(s.ok());
      EXPECT_EQ(s.message(), c.error);
    }
  }
}

TEST(CleanPathTest, SpecVectors) {
  const struct {
    const char* in;
    const char* out;
  } cases[] = {
      {"foo////bar", "foo/bar"},
      {"./bar", "bar"},
      {"foo//bar.txt", "foo/bar.txt"},
      {"bar///bar/zab.txt", "bar/bar/zab.txt"},
      {"bar/", "bar"},
      {"a/./b/.", "a/b"},
      {"a/..b", "a/..b"},
      {".dotfile", ".dotfile"},
      {".", "."},
      // Go's path.Clean beyond what a valid payload path can hold.
      {"", "."},
      {"a/../b", "b"},
      {"/a/..", "/"},
      {"..", ".."},
  };
  for (const auto& c : cases) EXPECT_EQ(CleanPath(c.in), c.out) << c.in;
}

}  // namespace
}  // namespace atomicwriter
