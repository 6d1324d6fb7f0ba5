// Step 2 of aws_credentials.h: what a profile of the AWS shared files says
// about credentials, worked out before any request is made (a recipe). The
// rules follow the AWS CLI (botocore); the first that applies wins:
//   1. `role_arn`: assume that role at STS (aws_assume_role.h), signing with
//      the credentials of `source_profile`, which is resolved by these same
//      rules. Roles may chain up to kMaxRoleChain profiles deep, and a cycle
//      is an error. A profile that names itself as its source signs with its
//      own keys. `credential_source` is not supported (an error that says
//      so). Optional: `role_session_name` (else "cairn-<unix time>"),
//      `external_id`, `duration_seconds` (900 to 43200).
//   2. `aws_access_key_id` / `aws_secret_access_key` (/ `aws_session_token`)
//      of the credentials file.
//   3. `credential_process` (aws_credential_process.h), the credentials
//      file's before the config file's.
//   4. The keys of the config file.
// A profile may be in either file; `[profile name]` and `[name]` are both
// accepted in both (aws_shared_file.h). Errors are InvalidArgument and name
// the file and profile.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cairn/kvstore/s3/sigv4.h"
#include "cairn/result.h"

namespace cairn::s3 {

inline constexpr int kMaxRoleChain = 4;

// The texts of the two shared files (nullopt: absent or unreadable).
struct AwsSharedFiles {
  std::string credentials_path;  // "" without HOME
  std::string config_path;
  std::optional<std::string> credentials_text;
  std::optional<std::string> config_text;
};

// AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, else ~/.aws/credentials and
// ~/.aws/config, each read at most 1 MiB deep.
Result<AwsSharedFiles> ReadAwsSharedFiles();

struct AwsProfileRecipe {
  enum class Kind { kNone, kKeys, kProcess, kAssumeRole };
  Kind kind = Kind::kNone;
  std::string where;  // "<file> [<profile>]" the setting came from
  AwsCredentials keys;   // kKeys
  std::string process;   // kProcess
  // kAssumeRole:
  std::string role_arn;
  std::string session_name;  // "" -> "cairn-<unix time>"
  std::string external_id;   // "" -> none
  uint64_t duration_seconds = 0;  // 0 -> STS's default (one hour)
  std::shared_ptr<const AwsProfileRecipe> source;

  // Equal for recipes that make the same requests (the providers of such
  // recipes are shared).
  std::string CacheKey() const;
};

// The recipe of `profile`. With `required`, a profile that neither file has
// is an error (AWS_PROFILE was set); otherwise it is kNone.
Result<AwsProfileRecipe> ResolveAwsProfile(const AwsSharedFiles& files, const std::string& profile,
                                           bool required);

}  // namespace cairn::s3
