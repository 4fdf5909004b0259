// ClosestMatch: the "did you mean" of the daemon's flag errors: which of a few known words a
// mistyped one most likely meant.
#ifndef VOLUMEMANAGER_CONFIG_CLOSEST_MATCH_H_
#define VOLUMEMANAGER_CONFIG_CLOSEST_MATCH_H_

#include <string>
#include <string_view>
#include <vector>

namespace config {

// The candidate nearest to `word` by edit distance (insertions, deletions, substitutions and
// swaps of neighbours, ignoring case), or "" when none is near enough to be a typo of it: at most
// a third of the word's length, and at least one edit allowed ("watch" -> "Watch", "selff" ->
// "self", "--sync-frequncy" -> "--sync-frequency"). A candidate that starts with `word` (a
// truncated flag, at least 4 characters long) matches too. Ties go to the earlier candidate.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// "a, b or c", for the valid values of a flag.
std::string JoinChoices(const std::vector<std::string>& choices);

}  // namespace config

#endif  // VOLUMEMANAGER_CONFIG_CLOSEST_MATCH_H_
