// The AWS shared files: the credentials file (AWS_SHARED_CREDENTIALS_FILE or
// ~/.aws/credentials) and the config file (AWS_CONFIG_FILE or
// ~/.aws/config). Both are INI text: sections `[name]` (the config file
// writes `[profile name]` for every profile but `default`; both spellings
// are accepted in both files), `key = value` lines, and comment lines
// starting with '#' or ';'. Profile: AWS_PROFILE, else `default`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/result.h"

namespace cairn::s3 {

// The `key = value` pairs of `profile` in `text` (keys as written, values
// trimmed); nullopt when no section names that profile. `what` and `path`
// name the file in errors ("AWS credentials file /x line 3: ...").
Result<std::optional<std::map<std::string, std::string>>> AwsFileProfile(
    std::string_view text, std::string_view what, std::string_view path, std::string_view profile);

// The text of a shared file: nullopt when it cannot be opened (absent);
// InvalidArgument when it is larger than 1 MiB.
Result<std::optional<std::string>> ReadAwsSharedFile(const std::string& path, std::string_view what);

// The path of a shared file: `env_var` when set, else $HOME/.aws/<name>;
// empty without either.
std::string AwsSharedFilePath(const char* env_var, std::string_view name);

// AWS_PROFILE, or "default" when unset.
std::string AwsProfileName();

}  // namespace cairn::s3
