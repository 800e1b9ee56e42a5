#include "launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string_view>

#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"

extern char** environ;

namespace tp::cli {
namespace {

constexpr auto kGrace = std::chrono::seconds(10); // SIGTERM -> SIGKILL for the surviving ranks

int to_int(const std::string& flag, const std::string& text, int low, int high) {
  try {
    std::size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used == text.size() && value >= low && value <= high) return value;
  } catch (const std::exception&) {
  }
  throw ConfigError("", flag + " " + text + ": expected an integer in [" + std::to_string(low) + ", " +
                            std::to_string(high) + "]. Usage: host --nproc-per-node N [--nnodes M --node-rank R "
                            "--master-addr A --master-port P] train --config FILE ...");
}

// A port nobody listens on now: bind to port 0 and read what the kernel chose. Another process
// could take it before rank 0 binds it (a small window, as with torchrun's own choice).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw Error(std::string("launcher: could not find a free TCP port: ") + std::strerror(errno) +
                ". Pass --master-port P.");
  ::close(fd);
  return ntohs(address.sin_port);
}

// Self-pipe: the handler only writes the signal number; the loop forwards it to the ranks.
int g_signal_pipe = -1; // written only by the handler; the launcher is single-threaded
extern "C" void on_launcher_signal(int number) {
  const unsigned char byte = static_cast<unsigned char>(number);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe, &byte, 1);
}

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;     // read ends of its stdout/stderr pipes (-1 once closed)
  std::string out_buf, err_buf;
  bool done = false;
  int status = 0;
};

void emit(int fd, const std::string& prefix, std::string& buffer, bool flush_all) {
  std::size_t start = 0;
  for (std::size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = prefix + buffer.substr(start, nl - start + 1);
    [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
  }
  buffer.erase(0, start);
  if (flush_all && !buffer.empty()) {
    const std::string line = prefix + buffer + "\n";
    [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
    buffer.clear();
  }
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "ended with wait status " + std::to_string(status);
}

/// The stop signal a rank's status reports it saved and stopped for (one of kStopSignals: exit
/// 128 + signal, stop_signal.h), or 0.
int stop_signal_of(int status) {
  if (!WIFEXITED(status)) return 0;
  for (const int signal_number : kStopSignals)
    if (WEXITSTATUS(status) == exit_code_for_signal(signal_number)) return signal_number;
  return 0;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return exit_code_for_signal(WTERMSIG(status));
  return kExitRuntime;
}

/// The launch's identity for its ranks' store keys (TORCHHOST_LAUNCH_ID, read as the rendezvous'
/// run id): two launches on one node that meet at one port (a --master-port given twice) then
/// refuse each other's ranks, naming both, as two torchrun runs or SLURM steps do. One node: fresh
/// for every launch (this process's id and 64 random bits). Several nodes must agree on it, which
/// their launchers cannot do by themselves: the one exported to every node, or none.
std::string launch_id(const LaunchOptions& o) {
  if (o.nnodes > 1) {
    const char* exported = std::getenv("TORCHHOST_LAUNCH_ID");
    return exported != nullptr ? exported : "";
  }
  std::random_device random;
  const uint64_t bits = (static_cast<uint64_t>(random()) << 32) ^ random();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  return std::to_string(::getpid()) + "-" + hex;
}

pid_t spawn(const LaunchOptions& o, int local_rank, int port, const std::string& addr, const std::string& id, Rank& r) {
  const int world = o.nnodes * o.nproc_per_node;
  r.rank = o.node_rank * o.nproc_per_node + local_rank;
  // Environment built before fork(): only async-signal-safe calls happen in the child.
  std::vector<std::string> env;
  const std::vector<std::string_view> replaced{"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "GROUP_RANK=",
                                               "MASTER_ADDR=", "MASTER_PORT=", "TORCHELASTIC_USE_AGENT_STORE=",
                                               "TORCHHOST_LAUNCH_ID="};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool skip = false;
    for (auto name : replaced) skip |= entry.starts_with(name);
    if (!skip) env.emplace_back(entry);
  }
  env.push_back("RANK=" + std::to_string(r.rank));
  env.push_back("LOCAL_RANK=" + std::to_string(local_rank));
  env.push_back("WORLD_SIZE=" + std::to_string(world));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nproc_per_node));
  env.push_back("GROUP_RANK=" + std::to_string(o.node_rank));
  env.push_back("MASTER_ADDR=" + addr);
  env.push_back("MASTER_PORT=" + std::to_string(port));
  if (!id.empty()) env.push_back("TORCHHOST_LAUNCH_ID=" + id);
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o.args;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw Error(std::string("launcher: pipe failed: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("launcher: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Own process group: a terminal's Ctrl-C reaches the launcher once, which forwards it once.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM); // the launcher killed -9 must not leave ranks behind
    if (::getppid() != parent) ::_exit(kExitRuntime);
    default_stop_signals_in_child(); // nohup's SIGHUP stays ignored
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execve("/proc/self/exe", argv.data(), envp.data());
    ::_exit(kExitLaunchFailed);
  }
  ::close(out[1]);
  ::close(err[1]);
  r.out = out[0];
  r.err = err[0];
  r.pid = pid;
  return pid;
}

}  // namespace

std::optional<LaunchOptions> parse_launch(int argc, char** argv) {
  LaunchOptions o;
  bool launch = false, have_addr = false, have_port = false;
  o.args.emplace_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const bool known = flag == "--nproc-per-node" || flag == "--nnodes" || flag == "--node-rank" ||
                       flag == "--master-addr" || flag == "--master-port";
    if (!known) {
      o.args.push_back(arg);
      continue;
    }
    if (eq != std::string::npos) value = arg.substr(eq + 1);
    else if (i + 1 < argc) value = argv[++i];
    else throw ConfigError("", flag + " needs a value.");
    if (flag == "--nproc-per-node") o.nproc_per_node = to_int(flag, value, 1, 1024), launch = true;
    if (flag == "--nnodes") o.nnodes = to_int(flag, value, 1, 65536);
    if (flag == "--node-rank") o.node_rank = to_int(flag, value, 0, 65535);
    if (flag == "--master-addr") o.master_addr = value, have_addr = true;
    if (flag == "--master-port") o.master_port = to_int(flag, value, 1, 65535), have_port = true;
  }
  if (!launch) {
    if (o.nnodes != 1 || have_addr || have_port || o.node_rank != 0)
      throw ConfigError("", "--nnodes, --node-rank, --master-addr and --master-port belong to the launcher: add "
                            "--nproc-per-node N (ranks on this node).");
    return std::nullopt;
  }
  if (o.node_rank >= o.nnodes)
    throw ConfigError("", "--node-rank " + std::to_string(o.node_rank) + " must be below --nnodes " +
                              std::to_string(o.nnodes) + " (nodes are numbered from 0).");
  if (o.nnodes > 1 && (!have_addr || !have_port))
    throw ConfigError("", "with --nnodes " + std::to_string(o.nnodes) + " every node needs the same --master-addr "
                          "(node 0's address, reachable from the others) and --master-port.");
  return o;
}

int run_launcher(const LaunchOptions& o) {
  const std::string addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  const int port = o.master_port != 0 ? o.master_port : free_port();
  int signal_pipe[2];
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("launcher: pipe failed");
  g_signal_pipe = signal_pipe[1];
  struct sigaction action{};
  action.sa_handler = &on_launcher_signal;
  // The ranks' stop signals, forwarded to them (SIGUSR1 among them: SLURM's warning before a time
  // limit, on which the ranks save; SIGHUP unless nohup ignored it, stop_signal.h).
  for (const int signal_number : kStopSignals)
    if (!keeps_ignored(signal_number)) ::sigaction(signal_number, &action, nullptr);
  std::fprintf(stderr, "host: launching %d ranks on node %d of %d (world size %d, rendezvous %s:%d)\n",
               o.nproc_per_node, o.node_rank, o.nnodes, o.nnodes * o.nproc_per_node, addr.c_str(), port);

  std::vector<Rank> ranks(static_cast<std::size_t>(o.nproc_per_node));
  const std::string id = launch_id(o);
  for (int k = 0; k < o.nproc_per_node; ++k) spawn(o, k, port, addr, id, ranks[static_cast<std::size_t>(k)]);

  int failed = -1, failed_status = 0, forwarded = 0;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  std::chrono::steady_clock::time_point forwarded_at{};  // meaningful once `forwarded` is set
  const auto stop_others = [&](int sig) {
    for (auto& r : ranks)
      if (!r.done) ::kill(r.pid, sig);
  };
  for (;;) {
    // 1. Output and signals.
    std::vector<pollfd> fds{{signal_pipe[0], POLLIN, 0}};
    std::vector<std::pair<Rank*, bool>> owners{{nullptr, false}};
    for (auto& r : ranks) {
      if (r.out >= 0) fds.push_back({r.out, POLLIN, 0}), owners.emplace_back(&r, true);
      if (r.err >= 0) fds.push_back({r.err, POLLIN, 0}), owners.emplace_back(&r, false);
    }
    ::poll(fds.data(), fds.size(), 200);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buffer[8192];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (i == 0) {
        for (ssize_t j = 0; j < n; ++j) {
          // Copies of one stop (timeout and `kill -PGID` signal the launcher twice) are forwarded
          // once: a rank takes a second signal kSameStopMs after its first as the user insisting.
          const auto now = std::chrono::steady_clock::now();
          if (forwarded != 0 && now - forwarded_at < std::chrono::milliseconds(kSameStopMs)) continue;
          forwarded_at = now;
          forwarded = static_cast<unsigned char>(buffer[j]);
          stop_others(forwarded); // the ranks save at the next step and stop (stop_signal.h)
        }
        continue;
      }
      auto [rank, is_out] = owners[i];
      std::string& buf = is_out ? rank->out_buf : rank->err_buf;
      const std::string prefix = "[rank " + std::to_string(rank->rank) + "] ";
      if (n > 0) {
        buf.append(buffer, static_cast<std::size_t>(n));
        emit(is_out ? STDOUT_FILENO : STDERR_FILENO, prefix, buf, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit(is_out ? STDOUT_FILENO : STDERR_FILENO, prefix, buf, true);
        ::close(fds[i].fd);
        (is_out ? rank->out : rank->err) = -1;
      }
    }
    // 2. Exits. The first failure stops the rest; they may hang in a collective with the lost rank.
    for (auto& r : ranks) {
      if (r.done || ::waitpid(r.pid, &r.status, WNOHANG) != r.pid) continue;
      r.done = true;
      const bool ok = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
      if (!ok && failed < 0) {
        failed = r.rank;
        failed_status = r.status;
        if (forwarded == 0 && stop_signal_of(r.status) != 0) {
          // A stop signal sent to this rank alone (a node preempted, a user's kill): the ranks
          // agreed on it and saved at one step (run_control.h), so it is a stop, not a failure
          // (cluster trial F8). Forwarding it reaches a rank still starting up, where no
          // agreement runs yet; a rank that already agreed takes it as the same stop.
          forwarded = stop_signal_of(r.status);
          forwarded_at = std::chrono::steady_clock::now();
          std::fprintf(stderr, "host: rank %d (pid %d) stopped by signal %d sent to it alone; forwarding it to the other ranks\n",
                       r.rank, static_cast<int>(r.pid), forwarded);
          stop_others(forwarded);
        } else if (forwarded == 0) {
          std::fprintf(stderr, "host: rank %d (pid %d) %s; stopping the other ranks\n", r.rank, static_cast<int>(r.pid),
                       describe(r.status).c_str());
          stop_others(SIGTERM);
        }
        kill_at = std::chrono::steady_clock::now() + kGrace;
      }
    }
    if (kill_at && std::chrono::steady_clock::now() > *kill_at) {
      stop_others(SIGKILL);
      kill_at.reset();
    }
    bool all_done = true, pipes_open = false;
    for (auto& r : ranks) all_done &= r.done, pipes_open |= r.out >= 0 || r.err >= 0;
    if (all_done && !pipes_open) break;
  }
  if (failed < 0) return kExitOk;
  // The ranks' command (a flag first means `host train`'s short form), so a failed 2-rank
  // prediction is not reported as a failed training.
  const std::string command = o.args.size() > 1 && !o.args[1].starts_with("-") ? o.args[1] : "train";
  if (forwarded == 0) {
    // A rank killed by SIGKILL had no chance to say anything: the cause is outside it.
    const bool silent = WIFSIGNALED(failed_status) && WTERMSIG(failed_status) == SIGKILL;
    std::fprintf(stderr, "host: %s failed: rank %d %s %s\n", command.c_str(), failed, describe(failed_status).c_str(),
                 silent ? "from outside the host, so it could not say why: the kernel's out-of-memory killer "
                          "(`dmesg` or `journalctl -k` names it), a scheduler or a user"
                        : "(its own output above says why)");
    return exit_code_of(failed_status);
  }
  // A stop: the signal sent (to the launcher, or to one rank) is the answer, as for one process,
  // when every rank saved for a stop signal or had finished; a rank that failed otherwise gives
  // its own status and the failure line, not the stop's code (a crash must not read as a
  // resumable stop to a requeue script or host sweep).
  const auto stopped_or_done = [](const Rank& r) {
    return stop_signal_of(r.status) != 0 || (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  };
  const auto failing = std::find_if_not(ranks.begin(), ranks.end(), stopped_or_done);
  if (failing == ranks.end()) {
    std::fprintf(stderr, "host: %s stopped by signal %d on every rank (a stop, not a failure: each rank's last line says what it saved)\n",
                 command.c_str(), forwarded);
    return exit_code_for_signal(forwarded);
  }
  std::fprintf(stderr, "host: %s failed: rank %d %s while the ranks stopped for signal %d (its own output above says why)\n",
               command.c_str(), failing->rank, describe(failing->status).c_str(), forwarded);
  return exit_code_of(failing->status);
}

}  // namespace tp::cli
