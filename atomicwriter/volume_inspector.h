// Test helpers that look at a volume dir from outside the writer: what a container reading
// through the volume sees, whether the dir holds anything beyond the writer's steady state, and a
// no-follow snapshot of any tree (to prove that something was not touched). Used by the tests of
// this module and of the modules above it.
#ifndef VOLUMEMANAGER_ATOMICWRITER_VOLUME_INSPECTOR_H_
#define VOLUMEMANAGER_ATOMICWRITER_VOLUME_INSPECTOR_H_

#include <sys/types.h>

#include <map>
#include <string>

#include "atomicwriter/atomic_writer.h"

namespace atomicwriter {

struct VisibleFile {
  std::string data;
  mode_t mode = 0;  // permission bits of the file reached
  uid_t uid = 0;

  bool operator==(const VisibleFile&) const = default;
};

// Every regular file a reader reaches from `volume_dir` through its entries whose names do not
// start with "..", following symlinks (as a container does), keyed by path relative to the volume
// dir. Dangling names are skipped, as a reader sees them only as missing files.
std::map<std::string, VisibleFile> ReadVisibleFiles(const std::string& volume_dir);

// The path -> bytes view of a payload, with paths cleaned: what ReadVisibleFiles should show.
std::map<std::string, std::string> ExpectedContent(const Payload& payload);

// ReadVisibleFiles without modes and owners.
std::map<std::string, std::string> VisibleContent(const std::string& volume_dir);

// "" when `volume_dir` holds exactly the writer's steady state for `payload`: `..data` linking to
// the only timestamp dir, no other `..` entry but `..data_tmp` (the kubelet writer's staging
// link, which this writer never touches), and top-level entries that are exactly the payload's
// first path components, each a `<name> -> ..data/<name>` link. Otherwise says what differs.
std::string DescribeDebris(const std::string& volume_dir, const Payload& payload);

// A no-follow listing of the tree at `dir`: relative path -> "type mode bytes-or-link-target".
std::map<std::string, std::string> SnapshotTree(const std::string& dir);

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_VOLUME_INSPECTOR_H_
