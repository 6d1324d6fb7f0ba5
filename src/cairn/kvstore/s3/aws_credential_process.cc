#include "cairn/kvstore/s3/aws_credential_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

extern char** environ;

namespace cairn::s3 {
namespace {

// Kills (when `kill_first`) the process group `pid` leads (the shell, the
// command and every child they started), then reaps `pid`; the wait status,
// or -1. `pid` is not reaped before the kill, so its group id cannot have
// been reused.
int Reap(pid_t pid, bool kill_first) {
  if (kill_first) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // namespace

Result<ExpiringAwsCredentials> ParseCredentialProcessOutput(std::string_view output,
                                                            std::string_view where) {
  const std::string what = "credential_process of " + std::string(where);
  auto j = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return InvalidArgumentError(what + ": its output is not a JSON object (" +
                                std::to_string(output.size()) + " bytes)");
  }
  auto version = j.find("Version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return InvalidArgumentError(what + ": its output has no `\"Version\": 1`");
  }
  auto field = [&](const char* name, bool required) -> Result<std::string> {
    auto it = j.find(name);
    if (it == j.end() && !required) return std::string();
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
      return InvalidArgumentError(what + ": `" + name + "` is missing or not a non-empty string");
    }
    return it->get<std::string>();
  };
  ExpiringAwsCredentials out;
  CAIRN_ASSIGN_OR_RETURN(out.credentials.access_key_id, field("AccessKeyId", true));
  CAIRN_ASSIGN_OR_RETURN(out.credentials.secret_access_key, field("SecretAccessKey", true));
  CAIRN_ASSIGN_OR_RETURN(out.credentials.session_token, field("SessionToken", false));
  CAIRN_ASSIGN_OR_RETURN(std::string expiration, field("Expiration", false));
  if (!expiration.empty()) {
    CAIRN_ASSIGN_OR_RETURN(out.expiration, ParseAwsTimestamp(expiration, what + ": `Expiration`"));
  }
  out.credentials.source = what;
  return out;
}

Result<ExpiringAwsCredentials> RunCredentialProcess(const std::string& command,
                                                    std::string_view where,
                                                    std::chrono::milliseconds timeout) {
  const std::string what = "credential_process of " + std::string(where);
  // Step 1.
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoError(errno, what + ": pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  // Its own process group, so that a kill reaches whatever it started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return ErrnoError(spawned, what + ": starting /bin/sh");
  }
  // Step 2.
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Status failure;
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      failure = UnavailableError(what + ": the command printed no complete answer within " +
                                 std::to_string(timeout.count() / 1000.0).substr(0, 5) + " s; it was killed");
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the deadline check above ends it
    ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // closed: the command is done with its output
    if (output.size() + static_cast<size_t>(n) > kCredentialProcessMaxOutput) {
      failure = InvalidArgumentError(what + ": the command printed more than " +
                                     std::to_string(kCredentialProcessMaxOutput >> 10) +
                                     " KiB; it was killed");
      break;
    }
    output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = Reap(pid, !failure.ok());
  if (!failure.ok()) return failure;
  // Step 3.
  if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = status >= 0 && WIFSIGNALED(status)
                          ? "was killed by signal " + std::to_string(WTERMSIG(status))
                          : "exited with status " + std::to_string(status >= 0 ? WEXITSTATUS(status) : -1);
    return FailedPreconditionError(what + ": the command " + how);
  }
  return ParseCredentialProcessOutput(output, where);  // step 4
}

std::shared_ptr<AwsCredentialProvider> CredentialProcessProvider(std::string command,
                                                                 std::string where) {
  std::string description = "credential_process of " + where;
  return std::make_shared<AwsCredentialProvider>(
      std::move(description), [command = std::move(command), where = std::move(where)] {
        return RunCredentialProcess(command, where);
      });
}

}  // namespace cairn::s3
