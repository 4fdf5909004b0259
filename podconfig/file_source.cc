#include "podconfig/file_source.h"

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "logging/structured_log.h"
#include "manifestdir/manifest_dir_scanner.h"
#include "manifestdir/manifest_dir_watcher.h"
#include "manifestdir/manifest_grace.h"
#include "podconfig/static_pod.h"

namespace podconfig {

struct FileSource::Impl {
  // Decoding runs on a pool thread: only the path, the bytes and the node name.
  using Scanner = manifestdir::ManifestDirScanner<base::Result<kube::Pod>>;

  explicit Impl(FileSourceOptions o)
      : options(std::move(o)),
        scanner({options.path, /*allow_single_file=*/true},
                [node = options.node_name](const std::string& path, const std::string& bytes) {
                  return DecodeStaticPodFile(bytes, path, node);
                }) {}

  FileSourceOptions options;
  Sink sink;
  Scanner scanner;
  manifestdir::ManifestDirWatcher watcher;
  // Files gone or failing wait here for the settle time before they count (manifest_grace.h).
  manifestdir::ManifestGrace grace;
  bool missing_logged = false;
  bool delivered = false;              // the sink has the state of `pods`
  std::map<std::string, PodPtr> pods;  // by file name; null: never decoded to a valid pod
  // By file name: the last read or decode error of a file whose last read failed, waiting in
  // `grace` or already reported.
  struct Failure {
    std::string file;  // its path
    base::Status error;
    bool read = false;  // the read failed (else the decoding)
  };
  std::map<std::string, Failure> failing;
  // By file name: the error reported (logged, and listed by Rejected) for a file still failing,
  // so that a file that stays broken is reported once, not at every relist.
  std::map<std::string, manifestdir::RejectedManifest> reported;

  void Apply(Scanner::Outcome scan);
  // A read or decode failure of `name`: reported now, or once the settle time has passed.
  void Fail(const Scanner::File& read, const base::Status& error, bool read_failed);
  // Logs `name`'s failure once per distinct error and lists it as rejected.
  void Report(const std::string& name);
  // The settle time ended for these files: still gone, or still failing.
  void Settled(const std::vector<std::string>& gone, const std::vector<std::string>& invalid);
  // The file `name` is gone: its pod, failure and report too. True when a pod went.
  bool Forget(const std::string& name);
  void Deliver();
};

bool FileSource::Impl::Forget(const std::string& name) {
  failing.erase(name);
  reported.erase(name);
  auto it = pods.find(name);
  if (it == pods.end()) return false;
  const bool had_pod = it->second != nullptr;
  pods.erase(it);
  return had_pod;
}

void FileSource::Impl::Fail(const Scanner::File& read, const base::Status& error,
                            bool read_failed) {
  failing[read.name] = {read.path, error, read_failed};
  if (!grace.Invalid(read.name)) Report(read.name);
}

void FileSource::Impl::Report(const std::string& name) {
  auto f = failing.find(name);
  if (f == failing.end()) return;
  manifestdir::RejectedManifest& logged = reported[name];
  const base::Status& error = f->second.error;
  if (logged.reason == error.message()) return;
  logged = {f->second.file, error.message()};
  const std::string& file = f->second.file;
  const PodPtr& entry = pods[name];
  // A file that is there but cannot be read or decoded is most likely being edited (an editor's
  // half-saved or truncated file) or broken by mistake: its pod keeps its last good version, so
  // that the volumes already published stay (docs/design.md, "Keep what works"). Only a file
  // that goes away, or that decodes to a valid pod, changes what this file contributes.
  if (f->second.read && entry) {
    logging::Error(
        "Cannot read pod manifest; keeping its last good pod until the file is readable again or "
        "removed",
        {{"file", file},
         {"pod", logging::KObj(entry->metadata)},
         {"podUID", entry->metadata.uid},
         {"err", error}});
  } else if (f->second.read) {
    logging::Error("Cannot read pod manifest; skipping it", {{"file", file}, {"err", error}});
  } else if (entry) {
    logging::Error(
        "Invalid pod manifest; keeping its last good pod until the file is fixed or removed",
        {{"file", file},
         {"pod", logging::KObj(entry->metadata)},
         {"podUID", entry->metadata.uid},
         {"err", error}});
  } else {
    logging::Error("Invalid pod manifest, skipping it", {{"file", file}, {"err", error}});
  }
}

void FileSource::Impl::Settled(const std::vector<std::string>& gone,
                               const std::vector<std::string>& invalid) {
  bool changed = false;
  for (const std::string& name : gone) changed |= Forget(name);
  for (const std::string& name : invalid) Report(name);
  if (changed) Deliver();
}

void FileSource::Impl::Deliver() {
  std::vector<PodPtr> out;
  for (const auto& [name, pod] : pods) {
    if (pod) out.push_back(pod);
  }
  delivered = true;
  sink(std::move(out));
}

void FileSource::Impl::Apply(Scanner::Outcome scan) {
  using Listing = manifestdir::ManifestDirScan::Listing;
  const std::string& path = options.path;
  if (scan.listing == Listing::kFailed) {
    logging::Error("Cannot list the pod manifest path; keeping its last pods",
                   {{"dir", path}, {"err", scan.error}});
    return;
  }
  if (scan.listing == Listing::kMissing) {
    if (!missing_logged) {
      logging::Warn("Pod manifest path does not exist; no static pods", {{"dir", path}});
    }
    missing_logged = true;
    pods.clear();
    failing.clear();  // what settles later finds nothing to report
    reported.clear();
    delivered = false;  // delivered below, and again at each relist until the path appears
    sink({});
    return;
  }
  if (scan.listing == Listing::kListed) missing_logged = false;

  bool changed = !delivered;  // the pods to deliver differ from what the sink has
  for (const std::string& name : scan.removed) {
    // Most likely the first half of an unlink and create (a checkout): the pod stays until the
    // settle time passes without the file coming back.
    if (grace.Gone(name)) continue;
    changed |= Forget(name);
  }
  for (Scanner::File& read : scan.files) {
    const std::string& file = read.path;
    grace.Present(read.name);
    PodPtr& entry = pods[read.name];
    if (!read.status.ok()) {
      Fail(read, read.status, /*read_failed=*/true);
      continue;
    }
    if (!read.decoded) {
      // The same bytes as the last good read: a failed read in between is over, and the file
      // gives what those bytes gave.
      if (auto f = failing.find(read.name); f != failing.end() && f->second.read) {
        grace.Valid(read.name);
        failing.erase(f);
        reported.erase(read.name);
      }
      continue;
    }
    base::Result<kube::Pod>& pod = *read.decoded;
    if (!pod.ok()) {
      // Decoded once per content: a file caught mid-write (`cat > file` creates it empty first)
      // is reported only if it is still invalid once the settle time has passed.
      Fail(read, pod.status(), /*read_failed=*/false);
      continue;
    }
    grace.Valid(read.name);
    failing.erase(read.name);
    if (reported.erase(read.name) > 0) {
      logging::Info("Pod manifest is valid again", {{"file", file}});
    }
    // Annotated as PodConfig would, so that it passes this object on and keeps it rather than
    // a copy: the pod is held once, here and downstream.
    pod->metadata.annotations[kConfigSourceAnnotation] = kFileSource;
    entry = std::make_shared<const kube::Pod>(std::move(pod).value());
    changed = true;
    logging::Debug(
        "Pod manifest read",
        {{"file", file}, {"pod", logging::KObj(entry->metadata)}, {"podUID", entry->metadata.uid}});
  }
  // The relist usually finds nothing new: then the sink, which holds this state, is spared.
  if (changed) Deliver();
}

FileSource::~FileSource() { Stop(); }

base::Status FileSource::Start(uv_loop_t* loop, FileSourceOptions options, Sink sink) {
  if (impl_ != nullptr) return base::Status::Error("file source: already started");
  if (options.path.empty()) return base::Status::Error("file source: empty pod manifest path");
  if (options.node_name.empty()) return base::Status::Error("file source: empty node name");
  impl_ = std::make_shared<Impl>(std::move(options));
  Impl* impl = impl_.get();
  impl->sink = std::move(sink);
  // The first read reports at once: what is broken at start is not caught mid-write.
  impl->Apply(impl->scanner.ScanNow(manifestdir::ManifestScanScope::kReadAll));
  impl->grace.Start(
      loop, impl->options.settle,
      [impl](const std::vector<std::string>& gone, const std::vector<std::string>& invalid) {
        impl->Settled(gone, invalid);
      });
  impl->scanner.Start(loop, [weak = std::weak_ptr<Impl>(impl_)](Impl::Scanner::Outcome outcome) {
    if (std::shared_ptr<Impl> self = weak.lock()) self->Apply(std::move(outcome));
  });
  manifestdir::ManifestDirWatcherOptions watch;
  watch.path = impl->options.path;
  watch.allow_single_file = true;
  watch.what = "pod manifest path";
  watch.relist_interval = impl->options.relist_interval;
  // One read `debounce` after the first event of a burst.
  watch.debounce = watch.max_debounce = impl->options.debounce;
  base::Status s =
      impl->watcher.Start(loop, std::move(watch),
                          [weak = std::weak_ptr<Impl>(impl_)](manifestdir::ManifestScanScope scope,
                                                              const std::set<std::string>& named) {
                            if (std::shared_ptr<Impl> self = weak.lock()) {
                              self->scanner.Request(scope, named);
                            }
                          });
  if (!s.ok()) {
    impl_.reset();
    return s;
  }
  spdlog::info("file pod source watching {} (relist every {} ms)", impl->options.path,
               impl->options.relist_interval.count());
  return base::Status::OK();
}

void FileSource::Stop() { impl_.reset(); }

std::vector<manifestdir::RejectedManifest> FileSource::Rejected() const {
  std::vector<manifestdir::RejectedManifest> out;
  if (!impl_) return out;
  for (const auto& [name, rejected] : impl_->reported) out.push_back(rejected);
  return out;
}

}  // namespace podconfig
