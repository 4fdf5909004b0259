#include "dynamicconfig/checkpoint_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "base/durable_file.h"
#include "base/errno_error.h"
#include "base/sha256.h"

namespace dynamicconfig {
namespace {

constexpr char kKind[] = "VolumeManagerConfigCheckpoint";
constexpr int kVersion = 1;

std::string HexDigest(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : base::Sha256Of(text)) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

nlohmann::json EncodeCheckpoint(const Checkpoint& c) {
  nlohmann::json j = c.Reference();
  j["config"] = c.config;
  return j;
}

// Throws nlohmann::json::exception on a missing or mistyped member; Load's caller catches.
Checkpoint DecodeCheckpoint(const nlohmann::json& j) {
  Checkpoint c;
  c.namespace_ = j.at("namespace").get<std::string>();
  c.name = j.at("name").get<std::string>();
  c.uid = j.at("uid").get<std::string>();
  c.resource_version = j.at("resourceVersion").get<std::string>();
  c.config = j.at("config").get<std::string>();
  return c;
}

template <typename T, typename Decode>
base::Result<std::optional<T>> Decoded(const std::string& path,
                                       base::Result<std::optional<nlohmann::json>> record,
                                       Decode decode) {
  if (!record.ok()) return record.status();
  if (!record->has_value()) return std::optional<T>();
  try {
    return std::optional<T>(decode(**record));
  } catch (const nlohmann::json::exception& e) {
    return base::Status::Error(path + ": corrupt: " + e.what());
  }
}

// An error when `doc` is a checkpoint of a later format version than kVersion (a newer release
// wrote it): not corrupt, and not this release's to set aside or replace.
base::Status NewerFormat(const std::string& path, const nlohmann::json& doc) {
  auto kind = doc.find("kind");
  auto version = doc.find("version");
  if (kind == doc.end() || *kind != kKind || version == doc.end() ||
      !version->is_number_integer() || version->get<int64_t>() <= kVersion) {
    return base::Status::OK();
  }
  return base::Status::Error(
      path + ": dynamic config checkpoint format version " +
      std::to_string(version->get<int64_t>()) + " is newer than this release reads (version " +
      std::to_string(kVersion) + "): it was written by a newer release of volumemanager");
}

}  // namespace

std::string Checkpoint::Describe() const {
  return "ConfigMap " + namespace_ + "/" + name + " (uid " + uid + ", resourceVersion " +
         resource_version + ")";
}

nlohmann::json Checkpoint::Reference() const {
  return {{"namespace", namespace_},
          {"name", name},
          {"uid", uid},
          {"resourceVersion", resource_version}};
}

CheckpointStore::CheckpointStore(std::string dir) : dir_(std::move(dir)) {}

base::Status CheckpointStore::Init() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return base::Status::Error("create " + dir_ + ": " + ec.message(), ec.value());
  if (::chmod(dir_.c_str(), 0700) != 0) return base::ErrnoError("chmod", dir_, errno);
  return base::Status::OK();
}

base::Result<std::optional<nlohmann::json>> CheckpointStore::Load(const std::string& file) const {
  const std::string path = dir_ + "/" + file;
  auto data = base::ReadWholeFile(path);
  if (!data.ok()) {
    if (data.status().sys_errno() == ENOENT) return std::optional<nlohmann::json>();
    return data.status();
  }
  nlohmann::json doc = nlohmann::json::parse(*data, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return base::Status::Error(path + ": corrupt: not a JSON document");
  }
  if (base::Status newer = NewerFormat(path, doc); !newer.ok()) return newer;
  auto kind = doc.find("kind");
  auto version = doc.find("version");
  auto digest = doc.find("sha256");
  auto record = doc.find("record");
  if (kind == doc.end() || *kind != kKind || version == doc.end() || *version != kVersion) {
    return base::Status::Error(path + ": corrupt: not a " + std::string(kKind) + " version " +
                               std::to_string(kVersion));
  }
  if (digest == doc.end() || record == doc.end() || !digest->is_string() ||
      digest->get<std::string>() != HexDigest(record->dump())) {
    return base::Status::Error(path + ": corrupt: checksum mismatch");
  }
  return std::optional<nlohmann::json>(*record);
}

base::Status CheckpointStore::Save(const std::string& file, const nlohmann::json& record) {
  const nlohmann::json doc = {{"kind", kKind},
                              {"version", kVersion},
                              {"sha256", HexDigest(record.dump())},
                              {"record", record}};
  return base::WriteFileDurably(dir_, file, doc.dump() + "\n");
}

base::Result<std::optional<AssignedRecord>> CheckpointStore::LoadAssigned() const {
  return Decoded<AssignedRecord>(dir_ + "/" + kAssigned, Load(kAssigned),
                                 [](const nlohmann::json& j) {
                                   AssignedRecord r;
                                   r.checkpoint = DecodeCheckpoint(j.at("checkpoint"));
                                   r.trial_started_unix = j.at("trialStarted").get<int64_t>();
                                   r.starts = j.at("starts").get<int>();
                                   r.clean_exits = j.at("cleanExits").get<int>();
                                   return r;
                                 });
}

base::Result<std::optional<Checkpoint>> CheckpointStore::LoadLastKnownGood() const {
  return Decoded<Checkpoint>(dir_ + "/" + kLastKnownGood, Load(kLastKnownGood),
                             [](const nlohmann::json& j) { return DecodeCheckpoint(j); });
}

base::Result<std::optional<RolledBackRecord>> CheckpointStore::LoadRolledBack() const {
  return Decoded<RolledBackRecord>(dir_ + "/" + kRolledBack, Load(kRolledBack),
                                   [](const nlohmann::json& j) {
                                     RolledBackRecord r;
                                     r.checkpoint = DecodeCheckpoint(j.at("checkpoint"));
                                     r.reason = j.at("reason").get<std::string>();
                                     return r;
                                   });
}

base::Status CheckpointStore::SaveAssigned(const AssignedRecord& r) {
  return Save(kAssigned, {{"checkpoint", EncodeCheckpoint(r.checkpoint)},
                          {"trialStarted", r.trial_started_unix},
                          {"starts", r.starts},
                          {"cleanExits", r.clean_exits}});
}

base::Status CheckpointStore::SaveLastKnownGood(const Checkpoint& c) {
  return Save(kLastKnownGood, EncodeCheckpoint(c));
}

base::Status CheckpointStore::SaveRolledBack(const RolledBackRecord& r) {
  return Save(kRolledBack, {{"checkpoint", EncodeCheckpoint(r.checkpoint)}, {"reason", r.reason}});
}

base::Status CheckpointStore::ClearAssigned() {
  const std::string path = dir_ + "/" + kAssigned;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return base::ErrnoError("remove", path, errno);
  return base::SyncDir(dir_);
}

base::Status CheckpointStore::RefuseNewerFormat() const {
  for (const char* file : {kAssigned, kLastKnownGood, kRolledBack}) {
    const std::string path = dir_ + "/" + file;
    auto data = base::ReadWholeFile(path);
    if (!data.ok()) continue;  // missing or unreadable: Load* says so
    nlohmann::json doc = nlohmann::json::parse(*data, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) continue;  // corrupt: Load* says so
    if (base::Status newer = NewerFormat(path, doc); !newer.ok()) {
      return base::Status::Error(newer.message() + ". Refusing to start: the checkpoints in " +
                                 dir_ +
                                 ", the rest of the state dir and every volume are left as they "
                                 "are; run the newer release again (docs/upgrades.md)");
    }
  }
  return base::Status::OK();
}

base::Status CheckpointStore::SetAside(const std::string& file) {
  const std::string path = dir_ + "/" + file;
  const std::string aside = path + ".corrupt";
  if (::rename(path.c_str(), aside.c_str()) != 0) return base::ErrnoError("rename", path, errno);
  return base::SyncDir(dir_);
}

}  // namespace dynamicconfig
