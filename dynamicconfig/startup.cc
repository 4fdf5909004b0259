#include "dynamicconfig/startup.h"

namespace dynamicconfig {

base::Result<Startup> BeginStartup(CheckpointStore& store, int64_t now_unix, int max_failed_starts,
                                   const ParseFunction& parse, StartupWrites writes) {
  const bool read_only = writes == StartupWrites::kNone;
  auto local = parse(std::nullopt);
  if (!local.ok()) return local.status();
  // A newer release's checkpoint (a rollback) is neither used nor set aside: no start.
  if (base::Status newer = store.RefuseNewerFormat(); !newer.ok()) return newer;
  Startup out;
  out.parsed = std::move(local).value();
  if (base::Status s = read_only ? base::Status::OK() : store.Init(); !s.ok()) {
    out.errors.push_back("dynamic config dir: " + s.message() +
                         "; running on the file and flags alone");
    return out;
  }
  // A corrupt file goes aside, so that the next start does not trip over it again.
  auto corrupt = [&](const char* file, const base::Status& s, const std::string& fallback) {
    std::string message = s.message() + "; " + fallback;
    if (read_only) {
      message += " (set aside once this daemon holds the node's lock)";
    } else if (base::Status aside = store.SetAside(file); !aside.ok()) {
      message += " (setting it aside failed: " + aside.message() + ")";
    } else {
      message += " (kept as " + std::string(file) + ".corrupt)";
    }
    out.errors.push_back(std::move(message));
  };

  auto lkg = store.LoadLastKnownGood();
  if (lkg.ok()) {
    out.last_known_good = *lkg;
  } else {
    corrupt(CheckpointStore::kLastKnownGood, lkg.status(), "no last known good config");
  }
  auto rolled_back = store.LoadRolledBack();
  if (rolled_back.ok()) {
    out.rolled_back = *rolled_back;
  } else {
    corrupt(CheckpointStore::kRolledBack, rolled_back.status(), "forgetting it");
  }
  const std::string fallback =
      out.last_known_good ? "using the last known good config " + out.last_known_good->Describe()
                          : "using the file and flags alone (no last known good config)";
  auto assigned = store.LoadAssigned();
  if (!assigned.ok()) corrupt(CheckpointStore::kAssigned, assigned.status(), fallback);

  // Runs on the last known good config (or the file and flags), which becomes the assigned one.
  auto fall_back = [&]() {
    out.active.reset();
    out.assigned.reset();
    if (out.last_known_good) {
      auto parsed = parse(out.last_known_good->config);
      if (!parsed.ok()) {
        out.errors.push_back("last known good config " + out.last_known_good->Describe() + ": " +
                             parsed.status().message() + "; using the file and flags alone");
      } else {
        out.parsed = std::move(parsed).value();
        out.active = out.last_known_good;
        out.assigned = AssignedRecord{*out.last_known_good, now_unix, 1, 0};
      }
    }
    if (read_only) return;
    base::Status s = out.assigned ? store.SaveAssigned(*out.assigned) : store.ClearAssigned();
    if (!s.ok()) out.errors.push_back("dynamic config checkpoint: " + s.message());
  };
  auto roll_back = [&](const AssignedRecord& record, std::string reason) {
    out.rolled_back = RolledBackRecord{record.checkpoint, std::move(reason)};
    out.rolled_back_now = true;
    if (read_only) {
      // Recorded by the start that holds the lock (it decides again from the disk then).
    } else if (base::Status s = store.SaveRolledBack(*out.rolled_back); !s.ok()) {
      out.errors.push_back("dynamic config checkpoint: " + s.message());
    }
    fall_back();
  };

  if (!assigned.ok()) {
    fall_back();
    return out;
  }
  if (!assigned->has_value()) return out;  // nothing assigned: the file and flags
  AssignedRecord record = **assigned;
  const bool good = out.last_known_good && out.last_known_good->SameRevision(record.checkpoint);
  const int failed = record.starts - record.clean_exits;
  if (!good && failed >= max_failed_starts) {
    roll_back(record, std::to_string(failed) + " of " + std::to_string(record.starts) +
                          " runs during its trial ended without a graceful stop (crashed, "
                          "failed to start or killed)");
    return out;
  }
  auto parsed = parse(record.checkpoint.config);
  if (!parsed.ok()) {
    if (good) {
      out.last_known_good.reset();  // no longer usable with these flags either
      out.errors.push_back("last known good config " + record.checkpoint.Describe() + ": " +
                           parsed.status().message() + "; using the file and flags alone");
      fall_back();
    } else {
      roll_back(record, "invalid with this daemon's flags: " + parsed.status().message());
    }
    return out;
  }
  out.parsed = std::move(parsed).value();
  out.active = record.checkpoint;
  if (!good) {
    record.starts += 1;
    if (record.trial_started_unix == 0) record.trial_started_unix = now_unix;
    if (read_only) {
      // Counted once the lock is held (BeginStartup again, kAll).
    } else if (base::Status s = store.SaveAssigned(record); !s.ok()) {
      out.errors.push_back("dynamic config checkpoint: counting this start: " + s.message());
    }
  }
  out.assigned = record;
  return out;
}

}  // namespace dynamicconfig
