#include "config/closest_match.h"

#include <gtest/gtest.h>

namespace config {
namespace {

TEST(ClosestMatchTest, FindsTheTypoAndNothingFarAway) {
  const std::vector<std::string> strategies = {"Get", "Cache", "Watch"};
  const std::vector<std::string> flags = {"--sync-frequency", "--state-dir", "--root-dir",
                                          "--healthz-bind-address", "--debug-bind-address"};
  struct Case {
    const char* name;
    const char* word;
    const std::vector<std::string>* candidates;
    const char* want;
  };
  const Case cases[] = {
      {"case only", "watch", &strategies, "Watch"},
      {"one letter off", "Cahce", &strategies, "Cache"},
      {"dropped letter", "--sync-frequncy", &flags, "--sync-frequency"},
      {"truncated flag", "--healthz", &flags, "--healthz-bind-address"},
      {"unrelated word", "Poll", &strategies, ""},
      {"unrelated flag", "--bogus", &flags, ""},
      {"empty", "", &strategies, ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ClosestMatch(c.word, *c.candidates), c.want) << c.name;
  }
}

TEST(ClosestMatchTest, JoinsChoicesAsASentence) {
  EXPECT_EQ(JoinChoices({"a"}), "a");
  EXPECT_EQ(JoinChoices({"kubelet", "self"}), "kubelet or self");
  EXPECT_EQ(JoinChoices({"Get", "Cache", "Watch"}), "Get, Cache or Watch");
}

}  // namespace
}  // namespace config
