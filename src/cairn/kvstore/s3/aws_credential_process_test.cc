// credential_process (aws_credential_process.h): its output parsed as the AWS
// CLI does, the command run under /bin/sh with its failures (exit status,
// signal, timeout, too much output) named by profile and never echoing the
// output, and the chain of aws_credentials.h taking it from a profile in the
// order of the AWS CLI (credentials-file keys, then the process, then
// config-file keys).
#include "cairn/kvstore/s3/aws_credential_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cairn/kvstore/s3/aws_credentials.h"

namespace cairn::s3 {
namespace {

bool Contains(const Status& s, std::string_view part) {
  return s.message().find(part) != std::string_view::npos;
}

TEST(CredentialProcessTest, ParsesVersionOneWithAndWithoutExpiration) {
  auto c = ParseCredentialProcessOutput(
      R"({"Version": 1, "AccessKeyId": "AK", "SecretAccessKey": "SK", "SessionToken": "T",
          "Expiration": "2030-01-02T03:04:05Z"})",
      "/cfg [p]");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "AK");
  EXPECT_EQ(c->credentials.secret_access_key, "SK");
  EXPECT_EQ(c->credentials.session_token, "T");
  ASSERT_TRUE(c->expiration.has_value());
  EXPECT_EQ(WallClock::to_time_t(*c->expiration), 1893553445);
  EXPECT_EQ(c->credentials.source, "credential_process of /cfg [p]");

  auto forever = ParseCredentialProcessOutput(R"({"Version":1,"AccessKeyId":"A","SecretAccessKey":"S"})", "w");
  ASSERT_TRUE(forever.ok());
  EXPECT_FALSE(forever->expiration.has_value());
  EXPECT_TRUE(forever->credentials.session_token.empty());

  for (const char* bad : {R"({"AccessKeyId":"A","SecretAccessKey":"S"})",
                          R"({"Version":2,"AccessKeyId":"A","SecretAccessKey":"S"})",
                          R"({"Version":1,"AccessKeyId":"A"})",
                          R"({"Version":1,"AccessKeyId":"A","SecretAccessKey":""})",
                          R"({"Version":1,"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"soon"})",
                          "secret-looking-text", "[1]"}) {
    auto r = ParseCredentialProcessOutput(bad, "/cfg [p]");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(r.status(), "credential_process of /cfg [p]")) << r.status().ToString();
    EXPECT_FALSE(Contains(r.status(), "secret-looking-text")) << r.status().ToString();
  }
}

TEST(CredentialProcessTest, RunsTheCommandAndNamesItsFailures) {
  auto ok = RunCredentialProcess(
      R"(echo ignored >&2; printf '{"Version": 1, "AccessKeyId": "%s", "SecretAccessKey": "S"}' "$HOME")",
      "w");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->credentials.access_key_id, getenv("HOME"));  // the environment is passed on

  auto exit7 = RunCredentialProcess("exit 7", "/cfg [p]");
  ASSERT_FALSE(exit7.ok());
  EXPECT_EQ(exit7.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(exit7.status(), "credential_process of /cfg [p]: the command exited with status 7"))
      << exit7.status().ToString();

  auto killed = RunCredentialProcess("kill -9 $$", "w");
  ASSERT_FALSE(killed.ok());
  EXPECT_TRUE(Contains(killed.status(), "killed by signal 9")) << killed.status().ToString();

  auto start = std::chrono::steady_clock::now();
  auto slow = RunCredentialProcess("sleep 30", "w", std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(slow.status(), "it was killed")) << slow.status().ToString();

  auto flood = RunCredentialProcess("yes", "w");  // endless output: bounded, then killed
  ASSERT_FALSE(flood.ok());
  EXPECT_EQ(flood.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(flood.status(), "more than 64 KiB")) << flood.status().ToString();

  auto stdin_closed = RunCredentialProcess("cat", "w");  // stdin is /dev/null: no hang
  ASSERT_FALSE(stdin_closed.ok());
  EXPECT_TRUE(Contains(stdin_closed.status(), "not a JSON object (0 bytes)")) << stdin_closed.status().ToString();
}

// True while `pid` runs (a zombie, or no process, is not running).
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

pid_t ReadPid(const std::string& path) {
  long pid = 0;
  std::ifstream(path) >> pid;
  return static_cast<pid_t>(pid);
}

TEST(CredentialProcessTest, TimeoutKillsTheCommandAndEveryChildItStarted) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("cairn-aws-group-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  const std::string script = dir + "/slow.sh";
  // The script starts a child in the background, writes both pids, and
  // waits (the shell, not exec'd: a process of its own).
  std::ofstream(script) << "sleep 300 &\necho $! > " << dir << "/child.pid\necho $$ > " << dir
                        << "/script.pid\nsleep 300\necho done\n";
  auto start = std::chrono::steady_clock::now();
  auto slow = RunCredentialProcess("sh " + script, "w", std::chrono::milliseconds(500));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(slow.status(), "credential_process of w: the command printed no complete answer"))
      << slow.status().ToString();
  const pid_t child = ReadPid(dir + "/child.pid");
  const pid_t script_pid = ReadPid(dir + "/script.pid");
  ASSERT_GT(child, 0) << "the script did not run";
  ASSERT_GT(script_pid, 0) << "the script did not run";
  // SIGKILL is delivered asynchronously: give it a moment.
  for (int i = 0; i < 100 && (Running(child) || Running(script_pid)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(Running(script_pid)) << "the script " << script_pid << " survived the timeout";
  EXPECT_FALSE(Running(child)) << "the script's child " << child << " survived the timeout";
  if (Running(child)) kill(child, SIGKILL);
  if (Running(script_pid)) kill(script_pid, SIGKILL);
  std::filesystem::remove_all(dir);
}

// The AWS variables of one test, restored after.
class ScopedAwsEnv {
 public:
  explicit ScopedAwsEnv(std::initializer_list<std::pair<const char*, std::string>> vars) {
    for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                             "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"}) {
      if (const char* v = getenv(name)) saved_.emplace_back(name, v);
      unsetenv(name);
      names_.push_back(name);
    }
    for (auto& [k, v] : vars) setenv(k, v.c_str(), 1);
  }
  ~ScopedAwsEnv() {
    for (const char* n : names_) unsetenv(n);
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::vector<const char*> names_;
  std::vector<std::pair<std::string, std::string>> saved_;
};

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("cairn-aws-" + std::to_string(getpid()) + "-" + name)).string();
  std::ofstream(path) << text;
  return path;
}

TEST(CredentialProcessTest, ChainTakesKeysThenProcessThenConfigKeys) {
  const std::string process = R"(printf '{"Version":1,"AccessKeyId":"PROC","SecretAccessKey":"S"}')";
  const std::string creds = WriteFile("credentials", "[p]\naws_access_key_id = FILE\naws_secret_access_key = s\n");
  const std::string config = WriteFile(
      "config", "[profile p]\ncredential_process = " + process + "\naws_access_key_id = CONF\n"
                "aws_secret_access_key = s\n[profile keys]\naws_access_key_id = CONF\naws_secret_access_key = s\n"
                "[profile half]\naws_access_key_id = CONF\n");
  const std::string empty = WriteFile("empty", "");
  auto key_of = [](bool* ok) -> std::string {
    auto p = AwsCredentialProviderFromEnvironment(true, "");
    *ok = p.ok();
    if (!p.ok()) return p.status().ToString();
    auto c = (*p)->Get();
    return c.ok() ? c->access_key_id : c.status().ToString();
  };
  bool ok = false;
  {
    ScopedAwsEnv env({{"AWS_PROFILE", "p"}, {"AWS_SHARED_CREDENTIALS_FILE", creds}, {"AWS_CONFIG_FILE", config}});
    EXPECT_EQ(key_of(&ok), "FILE");
  }
  {
    ScopedAwsEnv env({{"AWS_PROFILE", "p"}, {"AWS_SHARED_CREDENTIALS_FILE", empty}, {"AWS_CONFIG_FILE", config}});
    EXPECT_EQ(key_of(&ok), "PROC");
    auto p = AwsCredentialProviderFromEnvironment(true, "");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ((*p)->description(), "credential_process of " + config + " [p]");
  }
  {
    ScopedAwsEnv env({{"AWS_PROFILE", "keys"}, {"AWS_SHARED_CREDENTIALS_FILE", empty}, {"AWS_CONFIG_FILE", config}});
    EXPECT_EQ(key_of(&ok), "CONF");
  }
  {
    ScopedAwsEnv env({{"AWS_PROFILE", "half"}, {"AWS_SHARED_CREDENTIALS_FILE", empty}, {"AWS_CONFIG_FILE", config}});
    std::string error = key_of(&ok);
    EXPECT_FALSE(ok);
    EXPECT_NE(error.find("AWS config file " + config + ", profile `half`"), std::string::npos) << error;
  }
  {
    ScopedAwsEnv env({{"AWS_PROFILE", "nowhere"}, {"AWS_SHARED_CREDENTIALS_FILE", creds}, {"AWS_CONFIG_FILE", config}});
    std::string error = key_of(&ok);
    EXPECT_FALSE(ok);
    EXPECT_NE(error.find(creds), std::string::npos) << error;
    EXPECT_NE(error.find(config), std::string::npos) << error;
  }
  {
    // A config file far larger than any real one is refused after reading
    // 1 MiB of it, not read whole.
    ScopedAwsEnv env({{"AWS_SHARED_CREDENTIALS_FILE", empty}, {"AWS_CONFIG_FILE", "/dev/zero"}});
    std::string error = key_of(&ok);
    EXPECT_FALSE(ok);
    EXPECT_NE(error.find("/dev/zero is larger than 1 MiB"), std::string::npos) << error;
  }
  for (const std::string& f : {creds, config, empty}) std::filesystem::remove(f);
}

}  // namespace
}  // namespace cairn::s3
