#include "cairn/kvstore/testing/moto_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace cairn {
namespace {

pid_t server_pid = 0;

void StopServer() {
  if (server_pid > 0) {
    kill(server_pid, SIGTERM);
    waitpid(server_pid, nullptr, 0);
    server_pid = 0;
  }
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

Result<std::string> Start() {
  const char* cmd = std::getenv("CAIRN_MOTO_SERVER");
  std::string command = cmd != nullptr && *cmd != '\0' ? cmd : "moto_server";
  int port = FreePort();
  if (port <= 0) return UnavailableError("no free localhost port for moto_server");
  std::string port_str = std::to_string(port);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    execlp(command.c_str(), command.c_str(), "-H", "127.0.0.1", "-p", port_str.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid < 0) return UnavailableError("cannot fork to start " + command);
  server_pid = pid;
  std::atexit(StopServer);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Accepts(port)) return "http://127.0.0.1:" + port_str;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      server_pid = 0;
      return UnavailableError("`" + command + "` exited (status " + std::to_string(status) +
                              "); install it with `pip install moto[server]` "
                              "(requirements-dev.txt) or set CAIRN_MOTO_SERVER");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return UnavailableError("`" + command + "` did not listen on port " + port_str + " within 30 s");
}

}  // namespace

Result<std::string> MotoEndpoint() {
  static std::mutex mu;
  static Result<std::string>* endpoint = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (endpoint == nullptr) endpoint = new Result<std::string>(Start());
  return *endpoint;
}

}  // namespace cairn
