#!/bin/sh
# Writes ownership.journal.v1, .v2 and .v3 here again, each with the journal code of the last
# commit that wrote its version (README.md), compiled apart from the build: run from anywhere in
# the repository; needs git and g++ only. The output must equal the committed files.
# The journal's path is the one it had at that commit: volumemanager/journal/ since the core was
# laid out by role (issue 45), volumemanager/ before.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/driver.cc" <<'CC'
// Writes an ownership journal with the journal code of the commit it is compiled with.
// JOURNAL_VERSION: 1, 2 or 3 (the API of that commit).
#include <cstdio>
#include <string>
#include <vector>
#include JOURNAL_HEADER  // the journal's header at that commit: -DJOURNAL_HEADER
using namespace volumemanager;
static void Must(const base::Status& s) {
  if (!s.ok()) { std::fprintf(stderr, "%s\n", s.message().c_str()); std::exit(1); }
}
int main(int argc, char** argv) {
  const std::string state = argv[1];
  const std::string a = "3f1c2a7b-6d2e-4b8e-9d0a-8e3f1c2a7b01";  // kept: owned at the end
  const std::string b = "3f1c2a7b-6d2e-4b8e-9d0a-8e3f1c2a7b02";  // torn down: released
#if JOURNAL_VERSION == 1
  auto r = OwnershipJournal::Open(state);
#else
  auto r = OwnershipJournal::Open(state, "/var/lib/kubelet");
#endif
  if (!r.ok()) { std::fprintf(stderr, "%s\n", r.status().message().c_str()); return 1; }
  OwnershipJournal& j = *r->journal;
#if JOURNAL_VERSION >= 2
  // What the first reconstruction records: ext4, its f_fsid, the boot.
  RootIdentity id;
  id.fs_magic = 0xEF53;
  id.fs_id = 0x38e8618577f245cbULL;
  id.boot_id = "465cdd80-5d1b-4b8e-9d0a-8e3f1c2a7b6d";
  Must(j.SetIdentity(id));
#endif
  auto setup = [&](const std::string& uid, const std::string& plugin, const std::string& vol,
                   bool pod_dirs, uint64_t inode) {
    std::vector<OwnedPath> paths;
    if (pod_dirs) {
      paths.push_back({OwnedKind::kDir, OwnershipJournal::PodPath(uid)});
      paths.push_back({OwnedKind::kDir, OwnershipJournal::PodVolumesPath(uid)});
    }
    paths.push_back({OwnedKind::kDir, OwnershipJournal::PluginPath(uid, plugin)});
    paths.push_back({OwnedKind::kVolume, OwnershipJournal::VolumePath(uid, plugin, vol)});
    Must(j.Add(paths));
    (void)inode;
#if JOURNAL_VERSION >= 3
    Must(j.SetVolumeInode(OwnershipJournal::VolumePath(uid, plugin, vol),
                          inode));
#endif
  };
  setup(a, "kubernetes.io~configmap", "app-config", true, 1572869);
  setup(b, "kubernetes.io~configmap", "app-config", true, 1572901);
  setup(a, "kubernetes.io~secret", "creds", false, 1572877);
  // b's pod went: its volume, then its dirs, released as teardown does.
  Must(j.Remove({{OwnedKind::kVolume, OwnershipJournal::VolumePath(b, "kubernetes.io~configmap", "app-config")}}));
  Must(j.Remove({{OwnedKind::kDir, OwnershipJournal::PluginPath(b, "kubernetes.io~configmap")},
                 {OwnedKind::kDir, OwnershipJournal::PodVolumesPath(b)},
                 {OwnedKind::kDir, OwnershipJournal::PodPath(b)}}));
  return 0;
}
CC
for spec in 1:6254945 2:e56c714 3:6b16b70; do
  v=${spec%%:*}
  commit=${spec#*:}
  src="$work/v$v"
  mkdir -p "$src"
  dir=volumemanager/journal
  git -C "$repo" cat-file -e "$commit:$dir/ownership_journal.h" 2>/dev/null || dir=volumemanager
  git -C "$repo" archive "$commit" base "$dir/ownership_journal.h" \
      "$dir/ownership_journal.cc" | tar -x -C "$src"
  g++ -std=c++20 -I "$src" -DJOURNAL_VERSION="$v" -DJOURNAL_HEADER="\"$dir/ownership_journal.h\"" \
      "$work/driver.cc" "$src/$dir/ownership_journal.cc" "$src/base/durable_file.cc" \
      -o "$work/gen$v"
  "$work/gen$v" "$work/state$v"
  cp "$work/state$v/ownership.journal" "$here/ownership.journal.v$v"
  chmod 644 "$here/ownership.journal.v$v"
done
