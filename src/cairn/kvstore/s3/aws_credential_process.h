// `credential_process`: a profile of the AWS shared files may name a command
// that prints credentials (what SSO helpers, vaults and
// `aws configure export-credentials --format process` provide). cairn runs it
// as the AWS CLI and SDKs do:
//   1. The command line runs under `/bin/sh -c` with the process's
//      environment; its stdin is /dev/null and its stderr is ours (so its
//      prompts and errors reach the user).
//   2. Its stdout is read until it closes, at most
//      kCredentialProcessMaxOutput bytes within kCredentialProcessTimeout;
//      past either the command is killed and the run fails
//      (InvalidArgument / Unavailable). The command runs in a process group
//      of its own, and the whole group is killed: the shell, the command
//      and every process they started.
//   3. An exit status other than 0 (or death by a signal) is
//      FailedPrecondition with the status.
//   4. The output is a JSON object {"Version": 1, "AccessKeyId",
//      "SecretAccessKey", "SessionToken"?, "Expiration"?}. Without an
//      Expiration the credentials never expire; with one, the provider runs
//      the command again before they do (aws_credential_provider.h). Any
//      other output is InvalidArgument, never echoing it (it holds secrets).
// Errors name the profile the command comes from, not the command line
// (which may hold secrets too).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/kvstore/s3/aws_credential_provider.h"
#include "cairn/result.h"

namespace cairn::s3 {

inline constexpr size_t kCredentialProcessMaxOutput = 64 << 10;
inline constexpr std::chrono::seconds kCredentialProcessTimeout{60};

// Step 4 on a command's output; `where` names the command in errors.
Result<ExpiringAwsCredentials> ParseCredentialProcessOutput(std::string_view output,
                                                            std::string_view where);

// Steps 1 to 4. `timeout` is for tests.
Result<ExpiringAwsCredentials> RunCredentialProcess(
    const std::string& command, std::string_view where,
    std::chrono::milliseconds timeout = kCredentialProcessTimeout);

// A provider that runs `command` for its first credentials and again before
// they expire. `where` names the profile ("~/.aws/config [sso]").
std::shared_ptr<AwsCredentialProvider> CredentialProcessProvider(std::string command,
                                                                 std::string where);

}  // namespace cairn::s3
