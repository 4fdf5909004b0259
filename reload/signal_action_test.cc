#include "reload/signal_action.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/random_uuid.h"
#include "base/strings.h"
#include "tests/support/skip.h"
#include "tests/support/test_loop.h"

namespace reload {
namespace {

using ::testing::HasSubstr;

// 64 lowercase hex digits, as runtimes draw container IDs.
std::string RandomContainerId() {
  std::string id = base::RandomUuid() + base::RandomUuid();
  std::erase(id, '-');
  return id;
}

// Random in each test process: ctest runs test processes side by side, and each call scans the
// whole of /proc, so two processes must never share a pod UID or a container ID.
const std::string kPodUid = base::RandomUuid();
const std::string kOtherPodUid = base::RandomUuid();
const std::string kThirdPodUid = base::RandomUuid();
const std::string kId = RandomContainerId();
const std::string kPauseId = RandomContainerId();
const std::string kExecId = RandomContainerId();

std::string Underscored(std::string uid) {
  for (char& c : uid) {
    if (c == '-') c = '_';
  }
  return uid;
}

// Waits (generous deadline) until `condition` holds; false if it never did.
bool WaitFor(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// ---- Pure pieces: no root, no processes. ----

TEST(ContainerIdTest, EachRuntimeFormAndBadOnes) {
  for (const std::string runtime : {"containerd", "cri-o", "docker"}) {
    base::Result<ContainerId> id = ParseContainerId(runtime + "://" + kId);
    ASSERT_TRUE(id.ok()) << runtime << ": " << id.status().message();
    EXPECT_EQ(id->runtime, runtime);
    EXPECT_EQ(id->id, kId);
  }
  struct Case {
    std::string name, input, error;
  } cases[] = {
      {"no scheme", kId, "is not <runtime>://<id>"},
      {"unknown runtime", "rkt://" + kId, "is not containerd, cri-o or docker"},
      {"short id", "containerd://abc123", "64 lowercase hex"},
      {"upper case", "containerd://" + std::string(64, 'A'), "64 lowercase hex"},
      {"slash in id", "containerd://" + kId.substr(0, 63) + "/", "64 lowercase hex"},
      {"path in id", "containerd://../" + kId.substr(3), "64 lowercase hex"},
      {"empty", "", "is not <runtime>://<id>"},
  };
  for (const Case& c : cases) {
    base::Result<ContainerId> id = ParseContainerId(c.input);
    ASSERT_FALSE(id.ok()) << c.name;
    EXPECT_THAT(id.status().message(), HasSubstr(c.error)) << c.name;
  }
}

TEST(PodUidTest, OnlyLettersDigitsDashes) {
  EXPECT_TRUE(CheckPodUid(kPodUid).ok());
  EXPECT_TRUE(CheckPodUid("0123456789abcdef0123456789abcdef").ok());  // a static pod's MD5
  for (const std::string& bad : {std::string(), std::string("a/b"), std::string("a_b"),
                                 std::string(".."), std::string("a\0b", 3), std::string(65, 'a')}) {
    EXPECT_FALSE(CheckPodUid(bad).ok()) << base::ShowNul(bad);
  }
}

TEST(CgroupPathTest, Table) {
  const std::string u = kPodUid, s = Underscored(kPodUid), id = kId;
  struct Case {
    std::string name, path;
    bool match;
  } cases[] = {
      {"cgroupfs burstable", "/kubepods/burstable/pod" + u + "/" + id, true},
      {"cgroupfs besteffort", "/kubepods/besteffort/pod" + u + "/" + id, true},
      {"cgroupfs guaranteed", "/kubepods/pod" + u + "/" + id, true},
      {"kind cgroupfs prefix", "/kubelet/kubepods/burstable/pod" + u + "/" + id, true},
      {"cri-o cgroupfs", "/kubepods/burstable/pod" + u + "/crio-" + id, true},
      {"systemd containerd",
       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + s +
           ".slice/cri-containerd-" + id + ".scope",
       true},
      {"systemd guaranteed", "/kubepods.slice/kubepods-pod" + s + ".slice/crio-" + id + ".scope",
       true},
      {"systemd docker",
       "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + s + ".slice/docker-" +
           id + ".scope",
       true},
      {"kind systemd prefix",
       "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
       "kubelet-kubepods-besteffort-pod" +
           s + ".slice/cri-containerd-" + id + ".scope",
       true},
      {"crun subgroup below the scope",
       "/kubepods.slice/kubepods-pod" + s + ".slice/crio-" + id + ".scope/container", true},
      {"another pod through the daemon's cgroup namespace: `..` up to a common ancestor, then "
       "the cgroups' own names, the pod's among them",
       "/../../../kubepods-besteffort.slice/kubepods-besteffort-pod" + s +
           ".slice/cri-containerd-" + id + ".scope",
       true},
      {"`..` steps then cgroupfs names", "/../../burstable/pod" + u + "/" + id, true},
      // Never:
      {"root", "/", false},
      {"pause of the same pod", "/kubepods/burstable/pod" + u + "/" + kPauseId, false},
      {"conmon", "/kubepods.slice/kubepods-pod" + s + ".slice/crio-conmon-" + id + ".scope", false},
      {"another pod, same id", "/kubepods/burstable/pod" + kOtherPodUid + "/" + id, false},
      {"another pod systemd",
       "/kubepods.slice/kubepods-pod" + Underscored(kOtherPodUid) + ".slice/crio-" + id + ".scope",
       false},
      {"pod cgroup itself", "/kubepods/burstable/pod" + u, false},
      {"container not directly below the pod", "/kubepods/pod" + u + "/x/" + id, false},
      {"systemd uid with dashes", "/kubepods.slice/kubepods-pod" + u + ".slice/" + id, false},
      {"pod name glued to a word", "/kubepods.slice/kubepodspod" + s + ".slice/" + id, false},
      {"cgroupfs uid with underscores", "/kubepods/pod" + s + "/" + id, false},
      {"id prefix only", "/kubepods/pod" + u + "/" + id.substr(0, 12), false},
      {"id with suffix", "/kubepods/pod" + u + "/" + id + "x", false},
      {"cri-containerd without .scope", "/kubepods/pod" + u + "/cri-containerd-" + id, false},
      // A container seen without any pod's component is a container of the reader's own pod
      // (through its private cgroup namespace), which no action may target, whatever pod's
      // containerStatuses name its ID.
      {"`..` then the container, no pod component: the daemon's own pod",
       "/../cri-containerd-" + id + ".scope", false},
      {"`..` then the bare id, no pod component: the daemon's own pod", "/../" + id, false},
      {"`..` steps then the container below it, no pod component: the daemon's own pod",
       "/../../" + id + "/container", false},
      {"no `..`, the bare id at the namespace root: no pod component", "/" + id, false},
      {"`..` then another component then the id: no pod component", "/../other/" + id, false},
      {"`..` then another pod", "/../pod" + kOtherPodUid + "/" + id, false},
      {"`..` after a name: no path the kernel writes", "/kubepods/x/../pod" + u + "/" + id, false},
      {"`..` between the pod and the container: not directly below",
       "/kubepods/pod" + u + "/../" + id, false},
      {"docker outside kubernetes", "/docker/" + id, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CgroupPathIsContainers(c.path, kPodUid, kId), c.match) << c.name << ": " << c.path;
  }
}

TEST(CgroupFileTest, AnyV1HierarchyOrTheV2Line) {
  const std::string mine = "/kubepods/pod" + kPodUid + "/" + kId;
  EXPECT_TRUE(CgroupFileNamesContainer("12:pids:/\n4:memory:" + mine + "\n0::/\n", kPodUid, kId));
  EXPECT_TRUE(CgroupFileNamesContainer("0::" + mine + "\n", kPodUid, kId));
  EXPECT_TRUE(CgroupFileNamesContainer("1:name=systemd:" + mine, kPodUid, kId));
  EXPECT_FALSE(CgroupFileNamesContainer("12:pids:/\n0::/\n", kPodUid, kId));
  EXPECT_FALSE(CgroupFileNamesContainer(mine + "\n", kPodUid, kId));  // not a cgroup line
  EXPECT_FALSE(CgroupFileNamesContainer("", kPodUid, kId));
}

TEST(ProcStatusTest, ParsesTheFieldsItUses) {
  base::Result<ProcStatus> status = ParseProcStatus(
      "Name:\tsh\nPPid:\t4100\nNSpid:\t4242\t7\t1\nSigQ:\t0/1\nSigCgt:\t0000000000010201\n");
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(status->ppid, 4100);
  EXPECT_EQ(status->nspid, (std::vector<int>{4242, 7, 1}));
  EXPECT_EQ(status->sig_caught, 0x10201u);
  EXPECT_TRUE(status->sig_caught >> (SIGHUP - 1) & 1);
  EXPECT_TRUE(status->sig_caught >> (SIGUSR1 - 1) & 1);
  EXPECT_FALSE(status->sig_caught >> (SIGUSR2 - 1) & 1);

  struct Case {
    std::string name, text, error;
  } cases[] = {
      {"no NSpid", "PPid:\t1\nSigCgt:\t0\n", "no NSpid"},
      {"no SigCgt", "PPid:\t1\nNSpid:\t5\n", "no SigCgt"},
      {"no PPid", "NSpid:\t5\nSigCgt:\t0\n", "no PPid"},
      {"bad mask", "PPid:\t1\nNSpid:\t5\nSigCgt:\txyz\n", "SigCgt is not a hex mask"},
      {"mask too long", "PPid:\t1\nNSpid:\t5\nSigCgt:\t00000000000000000\n", "hex mask"},
      {"bad pid", "PPid:\t1\nNSpid:\t5\t-1\nSigCgt:\t0\n", "NSpid holds"},
      {"pid zero", "PPid:\t1\nNSpid:\t0\nSigCgt:\t0\n", "NSpid holds"},
      {"bad ppid", "PPid:\tx\nNSpid:\t5\nSigCgt:\t0\n", "PPid is not a number"},
  };
  for (const Case& c : cases) {
    base::Result<ProcStatus> bad = ParseProcStatus(c.text);
    ASSERT_FALSE(bad.ok()) << c.name;
    EXPECT_THAT(bad.status().message(), HasSubstr(c.error)) << c.name;
  }
}

TEST(ProcStatTest, StartTimeAfterTheLastParenthesis) {
  // The command name may hold ") " itself.
  const std::string stat =
      "4242 (we) ird) S 4100 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 123 45\n";
  base::Result<uint64_t> start = ParseProcStatStartTime(stat);
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(*start, 987654u);
  EXPECT_FALSE(ParseProcStatStartTime("4242 (sh) S 1 2 3").ok());
  EXPECT_FALSE(ParseProcStatStartTime("no parenthesis").ok());
}

TEST(SignalContainerTest, OnlyHupUsr1Usr2) {
  for (int sig : {0, SIGKILL, SIGTERM, SIGINT, SIGSTOP, SIGQUIT, SIGRTMIN, 65, -1}) {
    ContainerSignal request{kPodUid, "app", "containerd://" + kId, sig, false};
    base::Result<SignalOutcome> outcome = SignalContainer(request);
    ASSERT_FALSE(outcome.ok()) << sig;
    EXPECT_THAT(outcome.status().message(), HasSubstr("only SIGHUP, SIGUSR1 and SIGUSR2")) << sig;
    EXPECT_THAT(outcome.status().message(), HasSubstr("container app of pod " + kPodUid)) << sig;
  }
}

TEST(SignalContainerTest, BadIdsNamePodAndContainer) {
  ContainerSignal request{kPodUid, "app", "containerd://short", SIGHUP, false};
  base::Result<SignalOutcome> outcome = SignalContainer(request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(),
              HasSubstr("SIGHUP to container app of pod " + kPodUid + ": container ID"));
  request = {"../etc", "app", "containerd://" + kId, SIGHUP, false};
  outcome = SignalContainer(request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("pod UID \"../etc\""));
}

// ---- A fake proc dir: selection rules on texts (no signal can go through a plain dir fd). ----

class FakeProc {
 public:
  void Add(int pid, int ppid, const std::string& nspid, const std::string& cgroup,
           const std::string& sigcgt, uint64_t start = 100) {
    const std::string d = dir_.File(std::to_string(pid));
    std::filesystem::create_directories(d);
    std::ofstream(d + "/cgroup") << cgroup;
    std::ofstream(d + "/status") << "Name:\tx\nPPid:\t" << ppid << "\nNSpid:\t" << nspid
                                 << "\nSigCgt:\t" << sigcgt << "\n";
    std::ofstream(d + "/stat") << pid << " (x) S " << ppid
                               << " 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " << start << " 0 0\n";
  }
  const std::string& dir() const { return dir_.path(); }

 private:
  vmtest::TempDir dir_;
};

TEST(SignalContainerFakeProcTest, V2LinesAndSelection) {
  FakeProc proc;
  const std::string mine = "0::/kubepods.slice/kubepods-pod" + Underscored(kPodUid) +
                           ".slice/cri-containerd-" + kId + ".scope\n";
  const std::string pause = "0::/kubepods.slice/kubepods-pod" + Underscored(kPodUid) +
                            ".slice/cri-containerd-" + kPauseId + ".scope\n";
  proc.Add(10, 1, "10", "0::/system.slice/containerd.service\n", "0");  // the shim
  proc.Add(20, 10, "20\t1", pause, "0000000000004003");
  proc.Add(30, 10, "30\t1", mine, "0000000000000000");  // no handler
  proc.Add(31, 30, "31\t2", mine, "0000000000000001");
  std::filesystem::create_directories(proc.dir() + "/self");  // never opened: not numeric
  SignalEnvironment env;
  env.proc_dir = proc.dir();
  ContainerSignal request{kPodUid, "app", "containerd://" + kId, SIGHUP, false};
  base::Result<SignalOutcome> outcome = SignalContainer(request, env);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(),
              HasSubstr("PID 1 (host PID 30) of container app has no handler for SIGHUP"));
  EXPECT_THAT(outcome.status().message(), HasSubstr("init of a PID namespace drops it"));

  // A nested PID namespace's init (parent inside the container) is not the main process.
  proc.Add(32, 31, "32\t3\t1", mine, "0000000000000001");
  outcome = SignalContainer(request, env);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("host PID 30"));

  // Two candidates with their parents outside: refused, not guessed.
  proc.Add(40, 10, "40\t1", mine, "0000000000000001");
  outcome = SignalContainer(request, env);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("2 processes could be its main process"));

  // Unknown pod: nothing found, the message names pod, container and ID.
  request.pod_uid = kOtherPodUid;
  outcome = SignalContainer(request, env);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(),
              HasSubstr("container app of pod " + kOtherPodUid + ": no process of container ID"));
}

TEST(SignalContainerFakeProcTest, ShareProcessNamespacePicksTheOldestWithParentOutside) {
  FakeProc proc;
  const std::string mine = "0::/kubepods/pod" + kPodUid + "/" + kId + "\n";
  proc.Add(20, 10, "20\t1", "0::/kubepods/pod" + kPodUid + "/" + kPauseId + "\n", "1", 50);
  proc.Add(30, 10, "30\t7", mine, "0", 100);   // the first process, no handler
  proc.Add(31, 30, "31\t8", mine, "1", 100);   // its child, same tick
  proc.Add(90, 11, "90\t40", mine, "1", 900);  // an exec session
  SignalEnvironment env;
  env.proc_dir = proc.dir();
  ContainerSignal request{kPodUid, "app", "containerd://" + kId, SIGHUP, true};
  base::Result<SignalOutcome> outcome = SignalContainer(request, env);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(),
              HasSubstr("first process (host PID 30, PID 7 in the pod's shared namespace) of "
                        "container app has no handler for SIGHUP"));
  EXPECT_THAT(outcome.status().message(), HasSubstr("its default action would kill the process"));
}

// ---- Real processes in real cgroups (root). ----

// A hierarchy to work in: `mount` is its mount point in this process's view.
struct Hierarchy {
  std::string mount;
  std::string temp_mount;  // set when the test mounted it itself
};

// A v1 hierarchy mounted read-write (not cpuset, whose cgroups need cpus and mems first), or a
// named one mounted on a temporary dir; the v2 hierarchy mounted read-write, or mounted again on a
// temporary dir.
std::optional<Hierarchy> FindHierarchy(bool v2, std::string* why) {
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string source, target, type, options;
    fields >> source >> target >> type >> options;
    if ((options + ",").find("rw,") != 0) continue;
    if (v2 && type == "cgroup2") return Hierarchy{target, ""};
    if (!v2 && type == "cgroup" && options.find("cpuset") == std::string::npos) {
      return Hierarchy{target, ""};
    }
  }
  char tmpl[] = "/tmp/vm-cgroup-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (dir == nullptr) {
    *why = "mkdtemp failed";
    return std::nullopt;
  }
  const int rc = v2 ? ::mount("none", dir, "cgroup2", 0, nullptr)
                    : ::mount("cgroup", dir, "cgroup", 0, "none,name=vmtest");
  if (rc != 0) {
    *why = std::string("mount ") + (v2 ? "cgroup2" : "cgroup v1 (name=vmtest)") + ": " +
           std::strerror(errno);
    ::rmdir(dir);
    return std::nullopt;
  }
  return Hierarchy{dir, dir};
}

// Writes `text` to `path`; false on failure (errno kept).
bool WriteText(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::vector<int> CgroupProcs(const std::string& dir) {
  std::vector<int> pids;
  std::ifstream in(dir + "/cgroup.procs");
  int pid = 0;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

// How a test process starts: in which cgroup dirs (each a cgroup.procs it writes "0" to), in a
// new PID namespace or another process's, and in a new cgroup namespace.
struct Launch {
  std::string script;
  std::vector<std::string> cgroups;
  bool new_pid_ns = false;
  int join_pid_ns_of = 0;
  bool new_cgroup_ns = false;
};

// A shell script that records each HUP, USR1 and USR2 it gets (dash runs traps in signal-number
// order, so a "usr1" line comes after any "hup" delivered before that USR1), says "ready", and
// waits for ever.
std::string Catcher(const std::string& file, bool catch_hup = true) {
  std::string s;
  if (catch_hup) s += "trap 'echo hup >> " + file + "' HUP; ";
  s += "trap 'echo usr1 >> " + file + "' USR1; trap 'echo usr2 >> " + file + "' USR2; ";
  s += "echo ready >> " + file + "; while :; do sleep 0.1; done";
  return s;
}

// The steps after the namespaces: into the cgroups, a new cgroup namespace, exec. Only system
// calls (this runs in a forked child).
[[noreturn]] void EnterAndExec(const Launch& launch) {
  for (const std::string& cgroup : launch.cgroups) {
    if (!WriteText(cgroup + "/cgroup.procs", "0")) ::_exit(120);
  }
  if (launch.new_cgroup_ns && ::unshare(CLONE_NEWCGROUP) != 0) ::_exit(121);
  ::execl("/bin/sh", "sh", "-c", launch.script.c_str(), static_cast<char*>(nullptr));
  ::_exit(122);
}

class SignalContainerRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VM_SKIP_UNLESS_ROOT("moves processes into cgroups and PID namespaces");
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // orphans come back here to be reaped
    name_ = "vmtest-signal-" + std::to_string(::getpid());
  }

  void TearDown() override {
    // Only children not reaped yet (their numbers cannot have been reused); what they started is
    // in the test's cgroups, emptied below.
    for (auto it = launched_.rbegin(); it != launched_.rend(); ++it) {
      SendSignal(it->pidfd, SIGKILL);
      ::close(it->pidfd);
      if (::waitpid(it->direct, nullptr, WNOHANG) == 0) ::kill(it->direct, SIGKILL);
    }
    // Every process left in the test's cgroups, deepest dirs first, then the dirs.
    std::sort(dirs_.begin(), dirs_.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const std::string& dir : dirs_) {
      EXPECT_TRUE(WaitFor([&] {
        if (!WriteText(dir + "/cgroup.kill", "1")) {  // v1, or v2 before Linux 5.14
          // Through a pidfd taken before the PID is seen in the cgroup again: a number reused
          // in between belongs to another process, which the pidfd does not reach.
          for (int pid : CgroupProcs(dir)) {
            const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
            if (fd < 0) continue;
            const std::vector<int> now = CgroupProcs(dir);
            if (std::find(now.begin(), now.end(), pid) != now.end()) SendSignal(fd, SIGKILL);
            ::close(fd);
          }
        }
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        return ::rmdir(dir.c_str()) == 0 || errno == ENOENT;
      })) << "cannot remove "
          << dir << ": " << std::strerror(errno);
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    for (const Hierarchy& h : hierarchies_) {
      if (!h.temp_mount.empty()) {
        ::umount2(h.temp_mount.c_str(), MNT_DETACH);
        ::rmdir(h.temp_mount.c_str());
      }
    }
  }

  // The hierarchy of cgroup v1 or v2, or "" after a skip.
  std::string UseHierarchy(bool v2) {
    std::string why;
    std::optional<Hierarchy> h = FindHierarchy(v2, &why);
    if (!h) return "";
    hierarchies_.push_back(*h);
    const std::string root = h->mount + "/" + name_;
    if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) return "";
    dirs_.push_back(root);
    return root;
  }

  // mkdir -p of `relative` under `root`, each dir removed at the end.
  std::string MakeCgroup(const std::string& root, const std::string& relative) {
    std::string path = root;
    for (const std::string_view part : base::Split(relative, '/')) {
      if (part.empty()) continue;
      path += "/" + std::string(part);
      if (::mkdir(path.c_str(), 0755) == 0) dirs_.push_back(path);
    }
    return path;
  }

  struct Process {
    pid_t direct = 0;  // the child this test reaps
    pid_t main = 0;    // the shell, in this test's PID namespace
    std::string file;  // what it recorded
    int pidfd = -1;    // of `main`: the test signals it through this, never by number
  };

  Process Start(const std::string& name, Launch launch, bool catch_hup = true) {
    Process p;
    p.file = files_.File(name);
    launch.script = Catcher(p.file, catch_hup);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe";
      return p;
    }
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(pipe_fds[0]);
      if (launch.join_pid_ns_of != 0) {
        const std::string ns = "/proc/" + std::to_string(launch.join_pid_ns_of) + "/ns/pid";
        const int fd = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ::setns(fd, CLONE_NEWPID) != 0) ::_exit(123);
      }
      if (launch.new_pid_ns && ::unshare(CLONE_NEWPID) != 0) ::_exit(124);
      if (launch.new_pid_ns || launch.join_pid_ns_of != 0) {
        const pid_t grandchild = ::fork();  // the first process of (or in) that namespace
        if (grandchild == 0) EnterAndExec(launch);
        pid_t reported = grandchild;
        if (::write(pipe_fds[1], &reported, sizeof reported) != sizeof reported) ::_exit(125);
        int status = 0;
        ::waitpid(grandchild, &status, 0);
        ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
      }
      pid_t self = ::getpid();
      if (::write(pipe_fds[1], &self, sizeof self) != sizeof self) ::_exit(125);
      EnterAndExec(launch);
    }
    ::close(pipe_fds[1]);
    p.direct = child;
    if (::read(pipe_fds[0], &p.main, sizeof p.main) != sizeof p.main) {
      ADD_FAILURE() << "no PID from the launcher of " << name;
    }
    ::close(pipe_fds[0]);
    // Ready, or its launcher gone (exit codes: 120 cgroup, 121 cgroup namespace, 122 exec,
    // 123 and 124 PID namespace).
    int status = 0;
    bool exited = false;
    EXPECT_TRUE(WaitFor([&] {
      exited = exited || ::waitpid(child, &status, WNOHANG) == child;
      return Recorded(p, "ready") || exited;
    }));
    EXPECT_FALSE(exited) << name << " did not start: exit status " << status;
    if (exited) return Process{};
    p.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, p.main, 0));
    EXPECT_GE(p.pidfd, 0) << "pidfd_open " << name << ": " << std::strerror(errno);
    launched_.push_back(p);
    return p;
  }

  // Kills the process and waits until it is reaped (by its launcher, or here).
  static void Stop(const Process& p) {
    if (p.pidfd < 0) return;
    SendSignal(p.pidfd, SIGKILL);
    ::waitpid(p.direct, nullptr, 0);
    if (p.main != p.direct) ::waitpid(p.main, nullptr, WNOHANG);
  }

  static int SendSignal(int pidfd, int sig) {
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
  }

  static bool Recorded(const Process& p, const std::string& word) {
    return vmtest::ReadFile(p.file).find(word) != std::string::npos;
  }

  // The fence: USR1, then its record; a HUP sent before would be recorded before it.
  static void ExpectNoHup(const Process& p, const std::string& name) {
    ASSERT_GE(p.pidfd, 0) << name << " never started";
    ASSERT_EQ(SendSignal(p.pidfd, SIGUSR1), 0) << name << " is gone";
    ASSERT_TRUE(WaitFor([&] { return Recorded(p, "usr1"); })) << name;
    EXPECT_FALSE(Recorded(p, "hup")) << name << " got the signal";
  }

  vmtest::TempDir files_;
  std::string name_;
  std::vector<std::string> dirs_;
  std::vector<Hierarchy> hierarchies_;
  std::vector<Process> launched_;
};

#define VM_USE_HIERARCHY(var, v2)                                                  \
  const std::string var = UseHierarchy(v2);                                        \
  if (var.empty()) {                                                               \
    VM_SKIP_NEEDS_ROOT(std::string("no writable cgroup ") + ((v2) ? "v2" : "v1") + \
                       " hierarchy here, and mounting one failed");                \
  }

struct Layout {
  std::string name;
  bool v2;
  std::string runtime;
  // Relative cgroup dirs of the container and of the pause container.
  std::string container;
  std::string pause;
};

std::vector<Layout> Layouts() {
  const std::string u = kPodUid, s = Underscored(kPodUid);
  const std::string sys_pod =
      "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + s + ".slice/";
  const std::string kind_pod =
      "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
      "kubelet-kubepods-besteffort-pod" +
      s + ".slice/";
  return {
      {"containerd_cgroupfs_v1", false, "containerd", "kubepods/burstable/pod" + u + "/" + kId,
       "kubepods/burstable/pod" + u + "/" + kPauseId},
      {"containerd_systemd_v2", true, "containerd", sys_pod + "cri-containerd-" + kId + ".scope",
       sys_pod + "cri-containerd-" + kPauseId + ".scope"},
      {"containerd_systemd_v1", false, "containerd", sys_pod + "cri-containerd-" + kId + ".scope",
       sys_pod + "cri-containerd-" + kPauseId + ".scope"},
      {"crio_systemd_crun_subgroup_v2", true, "cri-o", sys_pod + "crio-" + kId + ".scope/container",
       sys_pod + "crio-" + kPauseId + ".scope"},
      {"crio_cgroupfs_v1", false, "cri-o", "kubepods/besteffort/pod" + u + "/crio-" + kId,
       "kubepods/besteffort/pod" + u + "/crio-" + kPauseId},
      {"docker_systemd_v2", true, "docker", sys_pod + "docker-" + kId + ".scope",
       sys_pod + "docker-" + kPauseId + ".scope"},
      {"kind_systemd_besteffort_v2", true, "containerd",
       kind_pod + "cri-containerd-" + kId + ".scope",
       kind_pod + "cri-containerd-" + kPauseId + ".scope"},
      {"kind_cgroupfs_guaranteed_v2", true, "containerd", "kubelet/kubepods/pod" + u + "/" + kId,
       "kubelet/kubepods/pod" + u + "/" + kPauseId},
  };
}

// Each naming, v1 and v2, each runtime's ID: PID 1 of the container's namespace gets the signal,
// the pause container's PID 1 (same pod, its own namespace, also catching HUP) does not.
TEST_F(SignalContainerRealTest, SignalsPid1OfTheContainerInEachLayout) {
  for (const Layout& layout : Layouts()) {
    SCOPED_TRACE(layout.name);
    VM_USE_HIERARCHY(root, layout.v2);
    const std::string container = MakeCgroup(root, layout.container);
    const std::string pause_dir = MakeCgroup(root, layout.pause);
    // The container's PID 1 also in a private cgroup namespace of its own (what runtimes do on
    // v2): the daemon reads its cgroup from outside, so nothing changes.
    Process app = Start(layout.name + "-app", {"", {container}, true, 0, true});
    Process pause = Start(layout.name + "-pause", {"", {pause_dir}, true, 0, false});
    ContainerSignal request{kPodUid, "app", layout.runtime + "://" + kId, SIGHUP, false};
    base::Result<SignalOutcome> outcome = SignalContainer(request);
    ASSERT_TRUE(outcome.ok()) << outcome.status().message();
    EXPECT_EQ(outcome->host_pid, app.main);
    EXPECT_EQ(outcome->target,
              "PID 1 (host PID " + std::to_string(app.main) + ") of container app");
    EXPECT_TRUE(WaitFor([&] { return Recorded(app, "hup"); }));
    ExpectNoHup(pause, "pause");

    // SIGUSR2 too, to the same process.
    request.signal = SIGUSR2;
    outcome = SignalContainer(request);
    ASSERT_TRUE(outcome.ok()) << outcome.status().message();
    EXPECT_TRUE(WaitFor([&] { return Recorded(app, "usr2"); }));
    Stop(app);
    Stop(pause);
  }
}

// The same container ID under another pod's cgroup: never signalled; a request for a pod that has
// no such container finds nothing and signals nobody.
TEST_F(SignalContainerRealTest, AnotherPodNeverGetsTheSignal) {
  VM_USE_HIERARCHY(root, true);
  const std::string mine = MakeCgroup(root, "kubepods/burstable/pod" + kPodUid + "/" + kId);
  const std::string other = MakeCgroup(root, "kubepods/burstable/pod" + kOtherPodUid + "/" + kId);
  Process app = Start("app", {"", {mine}, true});
  Process stranger = Start("stranger", {"", {other}, true});
  ContainerSignal request{kPodUid, "app", "containerd://" + kId, SIGHUP, false};
  base::Result<SignalOutcome> outcome = SignalContainer(request);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->host_pid, app.main);
  EXPECT_TRUE(WaitFor([&] { return Recorded(app, "hup"); }));

  // Alone with that ID now: a request for a third pod finds nothing.
  Stop(app);
  request.pod_uid = kThirdPodUid;
  outcome = SignalContainer(request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("container app of pod " + request.pod_uid +
                                                    ": no process of container ID"));
  ExpectNoHup(stranger, "the other pod's process");
}

// A `kubectl exec` session: a later process in the container's cgroup and PID namespace, its
// parent outside (the runtime's). PID 1 gets the signal, the session does not.
TEST_F(SignalContainerRealTest, AnExecSessionIsNotTheTarget) {
  VM_USE_HIERARCHY(root, false);
  const std::string container = MakeCgroup(root, "kubepods/burstable/pod" + kPodUid + "/" + kId);
  Process app = Start("app", {"", {container}, true});
  Process exec = Start("exec", {"", {container}, false, app.main});
  ContainerSignal request{kPodUid, "app", "containerd://" + kId, SIGHUP, false};
  base::Result<SignalOutcome> outcome = SignalContainer(request);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->host_pid, app.main);
  EXPECT_TRUE(WaitFor([&] { return Recorded(app, "hup"); }));
  ExpectNoHup(exec, "the exec session");
}

// Several containers of several pods with one scan: each its own outcome, a bad request fails
// alone, and each process gets only the signal meant for it.
TEST_F(SignalContainerRealTest, OneScanForSeveralContainers) {
  VM_USE_HIERARCHY(root, true);
  Process a = Start("a", {"", {MakeCgroup(root, "kubepods/pod" + kPodUid + "/" + kId)}, true});
  Process b = Start(
      "b",
      {"", {MakeCgroup(root, "kubepods/besteffort/pod" + kOtherPodUid + "/" + kPauseId)}, true});
  std::vector<ContainerSignal> requests = {
      {kPodUid, "a", "containerd://" + kId, SIGHUP, false},
      {kOtherPodUid, "b", "cri-o://" + kPauseId, SIGKILL, false},
      {kOtherPodUid, "b", "cri-o://" + kPauseId, SIGUSR2, false},
      {kOtherPodUid, "c", "cri-o://" + kId, SIGHUP, false},
  };
  std::vector<base::Result<SignalOutcome>> outcomes = SignalContainers(requests);
  ASSERT_EQ(outcomes.size(), 4u);
  ASSERT_TRUE(outcomes[0].ok()) << outcomes[0].status().message();
  EXPECT_EQ(outcomes[0]->host_pid, a.main);
  ASSERT_FALSE(outcomes[1].ok());
  EXPECT_THAT(outcomes[1].status().message(),
              HasSubstr("signal 9 to container b of pod " + kOtherPodUid + ": only SIGHUP"));
  ASSERT_TRUE(outcomes[2].ok()) << outcomes[2].status().message();
  EXPECT_EQ(outcomes[2]->host_pid, b.main);
  ASSERT_FALSE(outcomes[3].ok());
  EXPECT_THAT(outcomes[3].status().message(),
              HasSubstr("container c of pod " + kOtherPodUid + ": no process of container ID"));
  EXPECT_TRUE(WaitFor([&] { return Recorded(a, "hup"); }));
  EXPECT_TRUE(WaitFor([&] { return Recorded(b, "usr2"); }));
  ExpectNoHup(b, "b");
}

// A target without a handler: refused with the reason, and not sent (the process lives on and
// records nothing).
TEST_F(SignalContainerRealTest, ATargetThatDoesNotCatchTheSignalIsRefused) {
  VM_USE_HIERARCHY(root, false);
  const std::string pod = "kubepods/pod" + kPodUid + "/";
  // PID 1 of its namespace: the kernel would drop the signal.
  Process init = Start("init", {"", {MakeCgroup(root, pod + kId)}, true}, /*catch_hup=*/false);
  ContainerSignal request{kPodUid, "app", "containerd://" + kId, SIGHUP, false};
  base::Result<SignalOutcome> outcome = SignalContainer(request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("has no handler for SIGHUP"));
  EXPECT_THAT(outcome.status().message(), HasSubstr("init of a PID namespace drops it"));
  EXPECT_THAT(outcome.status().message(), HasSubstr("pod " + kPodUid));

  // The first process of a container in the pod's shared namespace: SIGHUP would kill it.
  Process pause = Start("pause", {"", {MakeCgroup(root, pod + kPauseId)}, true});
  Process first = Start("first", {"", {MakeCgroup(root, pod + kExecId)}, false, pause.main}, false);
  request = {kPodUid, "sidecar", "cri-o://" + kExecId, SIGHUP, true};
  outcome = SignalContainer(request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("its default action would kill the process"));
  ExpectNoHup(first, "the process without a handler");  // and it is alive: it answered USR1
  ExpectNoHup(pause, "pause");
}

// shareProcessNamespace: PID 1 is pause; the target is the container's first process, not a later
// exec session whose parent is outside too, and not pause.
TEST_F(SignalContainerRealTest, ShareProcessNamespaceTargetsTheFirstProcess) {
  VM_USE_HIERARCHY(root, true);
  const std::string pod = "kubepods.slice/kubepods-pod" + Underscored(kPodUid) + ".slice/";
  const std::string container = MakeCgroup(root, pod + "cri-containerd-" + kId + ".scope");
  Process pause =
      Start("pause", {"", {MakeCgroup(root, pod + "cri-containerd-" + kPauseId + ".scope")}, true});
  Process first = Start("first", {"", {container}, false, pause.main});
  // A later process of the same container with its parent outside (what `kubectl exec` makes).
  // Its start time must be later than the first's (10 ms clock ticks): started again until it is.
  const auto start_of = [](pid_t pid) -> uint64_t {
    base::Result<uint64_t> t =
        ParseProcStatStartTime(vmtest::ReadFile("/proc/" + std::to_string(pid) + "/stat"));
    return t.ok() ? *t : 0;
  };
  const uint64_t first_start = start_of(first.main);
  ASSERT_GT(first_start, 0u);
  Process exec;
  ASSERT_TRUE(WaitFor([&] {
    exec = Start("exec", {"", {container}, false, pause.main});
    if (start_of(exec.main) > first_start) return true;
    Stop(exec);
    // Its `sleep 0.1`, orphaned to pause, stays in the container's cgroup with a parent outside
    // it, maybe started in the first's clock tick: two candidates, and the signal refused (1 run
    // in 20). Gone within the 0.1 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return false;
  }));

  ContainerSignal request{kPodUid, "app", "containerd://" + kId, SIGHUP, true};
  base::Result<SignalOutcome> outcome = SignalContainer(request);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->host_pid, first.main);
  EXPECT_THAT(outcome->target, HasSubstr("first process (host PID " + std::to_string(first.main)));
  EXPECT_THAT(outcome->target, HasSubstr("in the pod's shared namespace) of container app"));
  EXPECT_TRUE(WaitFor([&] { return Recorded(first, "hup"); }));
  ExpectNoHup(exec, "the exec session");
  ExpectNoHup(pause, "pause");

  // Without the flag, nothing is PID 1 of the container's own namespace: refused.
  request.share_process_namespace = false;
  outcome = SignalContainer(request);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("is PID 1 of the container's PID namespace"));
}

// The daemon in a private cgroup namespace rooted in its own container: a sibling container of its
// pod reads "/../cri-containerd-<id>.scope" (the pod component is hidden). That is a container of
// the daemon's own pod, never a target, whatever pod's containerStatuses name its ID: refused,
// saying why, and not signalled. A container of another pod reads "/../../<its pod>/<it>" and is
// found through its pod's component.
TEST_F(SignalContainerRealTest, ReaderInAPrivateCgroupNamespace) {
  const std::string other_id = RandomContainerId();
  for (bool v2 : {false, true}) {
    SCOPED_TRACE(v2 ? "v2" : "v1");
    VM_USE_HIERARCHY(root, v2);
    const std::string pod = "kubepods.slice/kubepods-pod" + Underscored(kPodUid) + ".slice/";
    const std::string other_pod =
        "kubepods.slice/kubepods-pod" + Underscored(kOtherPodUid) + ".slice/";
    const std::string daemon = MakeCgroup(root, pod + "cri-containerd-" + kExecId + ".scope");
    Process sibling =
        Start("sibling-" + std::to_string(v2),
              {"", {MakeCgroup(root, pod + "cri-containerd-" + kId + ".scope")}, true});
    Process pause =
        Start("pause-" + std::to_string(v2),
              {"", {MakeCgroup(root, pod + "cri-containerd-" + kPauseId + ".scope")}, true});
    Process other =
        Start("other-" + std::to_string(v2),
              {"", {MakeCgroup(root, other_pod + "cri-containerd-" + other_id + ".scope")}, true});
    int pipe_fds[2];
    ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
    const pid_t reader = ::fork();
    if (reader == 0) {
      ::close(pipe_fds[0]);
      std::string report;
      if (!WriteText(daemon + "/cgroup.procs", "0") || ::unshare(CLONE_NEWCGROUP) != 0) {
        report = "E:cannot enter the daemon's cgroup namespace";
      } else {
        const std::string seen =
            vmtest::ReadFile("/proc/" + std::to_string(sibling.main) + "/cgroup") +
            vmtest::ReadFile("/proc/" + std::to_string(other.main) + "/cgroup");
        // The sibling's ID named by a pod of another UID (its containerStatuses), and by the
        // daemon's own pod: neither reaches it.
        for (const std::string& uid : {kThirdPodUid, kPodUid}) {
          ContainerSignal request{uid, "app", "containerd://" + kId, SIGHUP, false};
          base::Result<SignalOutcome> outcome = SignalContainer(request);
          report += (outcome.ok() ? "O:" + std::to_string(outcome->host_pid)
                                  : "E:" + outcome.status().message()) +
                    "\n";
        }
        ContainerSignal request{kOtherPodUid, "app", "containerd://" + other_id, SIGHUP, false};
        base::Result<SignalOutcome> outcome = SignalContainer(request);
        report += (outcome.ok() ? "O:" + std::to_string(outcome->host_pid)
                                : "E:" + outcome.status().message()) +
                  "\n" + seen;
      }
      const bool written =
          ::write(pipe_fds[1], report.data(), report.size()) == static_cast<ssize_t>(report.size());
      ::_exit(written ? 0 : 1);
    }
    ::close(pipe_fds[1]);
    std::string report;
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) report.append(buffer, n);
    ::close(pipe_fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(reader, &status, 0), reader);
    const std::vector<std::string_view> lines = base::Split(report, '\n');
    ASSERT_GE(lines.size(), 3u) << report;
    for (int i : {0, 1}) {
      const std::string line(lines[i]);
      EXPECT_THAT(line, HasSubstr("E:SIGHUP to container app of pod ")) << report;
      EXPECT_THAT(line,
                  HasSubstr("/../cri-containerd-" + kId + ".scope\", under no pod's component"))
          << report;
      EXPECT_THAT(line, HasSubstr("a container of the daemon's own pod, which no action may "
                                  "signal; not sent"))
          << report;
    }
    EXPECT_EQ(std::string(lines[2]), "O:" + std::to_string(other.main)) << report;
    // What the reader saw: the pod's component hidden for the sibling, `..` steps for the other.
    EXPECT_THAT(report, HasSubstr("/../cri-containerd-" + kId + ".scope")) << report;
    EXPECT_THAT(report, HasSubstr("/../../kubepods-pod" + Underscored(kOtherPodUid) +
                                  ".slice/cri-containerd-" + other_id + ".scope"))
        << report;
    EXPECT_THAT(report, ::testing::Not(HasSubstr("pod" + Underscored(kPodUid)))) << report;
    EXPECT_TRUE(WaitFor([&] { return Recorded(other, "hup"); }));
    ExpectNoHup(sibling, "the sibling of the daemon's container");
    ExpectNoHup(pause, "pause");
    Stop(sibling);
    Stop(pause);
    Stop(other);
  }
}

// A new process with the target's PID, created between the choice and the signal, in the
// container's own cgroup and catching SIGHUP: it never gets the signal, and the call fails.
TEST_F(SignalContainerRealTest, PidReuseNeverSignalsTheNewProcess) {
  VM_USE_HIERARCHY(root, true);
  const std::string container = MakeCgroup(root, "kubepods/pod" + kPodUid + "/" + kId);
  Process app = Start("app", {"", {container}, true});
  const std::string newcomer_file = files_.File("newcomer");
  Process newcomer;
  std::string reuse_error;
  SignalEnvironment env;
  env.before_signal = [&](int host_pid) {
    if (host_pid != app.main) {
      reuse_error = "chose " + std::to_string(host_pid);
      return;
    }
    SendSignal(app.pidfd, SIGKILL);
    int status = 0;
    ::waitpid(app.direct, &status, 0);  // its launcher reaped it, so the number is free
    // A new process on the same number: clone3 with set_tid (exact, needs CAP_SYS_ADMIN).
    pid_t wanted = host_pid;
    clone_args args{};
    args.exit_signal = SIGCHLD;
    args.set_tid = reinterpret_cast<uint64_t>(&wanted);
    args.set_tid_size = 1;
    const std::string script = Catcher(newcomer_file);
    const std::string procs = container + "/cgroup.procs";
    const long child = ::syscall(SYS_clone3, &args, sizeof args);
    if (child == 0) {
      if (!WriteText(procs, "0")) ::_exit(120);
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(122);
    }
    if (child < 0) {
      reuse_error = std::string("clone3 with set_tid: ") + std::strerror(errno);
      return;
    }
    newcomer = {static_cast<pid_t>(child), static_cast<pid_t>(child), newcomer_file,
                static_cast<int>(::syscall(SYS_pidfd_open, child, 0))};
    launched_.push_back(newcomer);
    if (!WaitFor([&] { return Recorded(newcomer, "ready"); })) reuse_error = "newcomer not ready";
  };
  ContainerSignal request{kPodUid, "app", "containerd://" + kId, SIGHUP, false};
  base::Result<SignalOutcome> outcome = SignalContainer(request, env);
  if (reuse_error.find("clone3") == 0) VM_SKIP_NEEDS_ROOT(reuse_error);
  ASSERT_EQ(reuse_error, "");
  ASSERT_EQ(newcomer.main, app.main);  // the same number, another process
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("exited before the signal: not sent"));
  EXPECT_THAT(outcome.status().message(), HasSubstr("container app of pod " + kPodUid));
  ExpectNoHup(newcomer, "the process that took the PID");
}

}  // namespace
}  // namespace reload
