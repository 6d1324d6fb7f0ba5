#include "cairn/kvstore/s3/aws_profile.h"

#include <cstdlib>
#include <map>
#include <vector>

#include "cairn/kvstore/s3/aws_credentials.h"
#include "cairn/kvstore/s3/aws_shared_file.h"

namespace cairn::s3 {
namespace {

using Values = std::map<std::string, std::string>;

// The profile's values in one file (nullopt: not there).
struct InFile {
  const std::string* path = nullptr;
  const std::optional<std::string>* text = nullptr;
  const char* what = "";
  std::optional<Values> values;

  std::string Get(const char* key) const {
    if (!values) return "";
    auto it = values->find(key);
    return it == values->end() ? "" : it->second;
  }
  std::string Where(const std::string& profile) const { return *path + " [" + profile + "]"; }
};

Result<InFile> Lookup(const std::string& path, const std::optional<std::string>& text, const char* what,
                      const std::string& profile) {
  InFile f{&path, &text, what, std::nullopt};
  if (text) {
    CAIRN_ASSIGN_OR_RETURN(f.values, AwsFileProfile(*text, what, path, profile));
  }
  return f;
}

Result<AwsProfileRecipe> Resolve(const AwsSharedFiles& files, const std::string& profile, bool required,
                                 std::vector<std::string>& chain);

// Rule 1.
Result<AwsProfileRecipe> AssumeRole(const AwsSharedFiles& files, const std::string& profile,
                                    const InFile& from, const InFile& credentials, const InFile& config,
                                    std::vector<std::string>& chain) {
  const std::string where = from.Where(profile);
  AwsProfileRecipe r;
  r.kind = AwsProfileRecipe::Kind::kAssumeRole;
  r.where = where;
  auto get = [&](const char* key) {
    std::string v = config.Get(key);
    return v.empty() ? credentials.Get(key) : v;
  };
  r.role_arn = get("role_arn");
  r.session_name = get("role_session_name");
  r.external_id = get("external_id");
  if (std::string d = get("duration_seconds"); !d.empty()) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(d.c_str(), &end, 10);
    if (*end != '\0' || n < 900 || n > 43200) {
      return InvalidArgumentError(where + ": duration_seconds `" + d + "` is not a number of seconds from 900 to 43200");
    }
    r.duration_seconds = n;
  }
  if (!get("credential_source").empty()) {
    return InvalidArgumentError(where + ": credential_source is not supported by cairn; name a source_profile");
  }
  const std::string source = get("source_profile");
  if (source.empty()) return InvalidArgumentError(where + ": role_arn without source_profile");
  if (source == profile) {  // its own keys sign the AssumeRole
    AwsProfileRecipe own;
    for (const InFile* f : {&credentials, &config}) {
      if (!f->values) continue;
      CAIRN_ASSIGN_OR_RETURN(own.keys, ParseAwsCredentialsFile(**f->text, *f->path, profile, false, f->what));
      if (!own.keys.anonymous()) break;
    }
    if (own.keys.anonymous()) {
      return InvalidArgumentError(where + ": source_profile is the profile itself, which has no keys");
    }
    own.kind = AwsProfileRecipe::Kind::kKeys;
    own.where = where;
    r.source = std::make_shared<AwsProfileRecipe>(std::move(own));
    return r;
  }
  for (const std::string& seen : chain) {
    if (seen == source) {
      std::string cycle;
      for (const std::string& p : chain) cycle += p + " -> ";
      return InvalidArgumentError(where + ": source_profile makes a cycle (" + cycle + source + ")");
    }
  }
  if (static_cast<int>(chain.size()) > kMaxRoleChain) {
    return InvalidArgumentError(where + ": more than " + std::to_string(kMaxRoleChain) +
                                " roles chained by source_profile");
  }
  CAIRN_ASSIGN_OR_RETURN(AwsProfileRecipe src, Resolve(files, source, /*required=*/true, chain));
  if (src.kind == AwsProfileRecipe::Kind::kNone) {
    return InvalidArgumentError(where + ": source_profile `" + source + "` has no credentials");
  }
  r.source = std::make_shared<AwsProfileRecipe>(std::move(src));
  return r;
}

Result<AwsProfileRecipe> Resolve(const AwsSharedFiles& files, const std::string& profile, bool required,
                                 std::vector<std::string>& chain) {
  CAIRN_ASSIGN_OR_RETURN(InFile credentials, Lookup(files.credentials_path, files.credentials_text,
                                                    "AWS credentials file", profile));
  CAIRN_ASSIGN_OR_RETURN(InFile config, Lookup(files.config_path, files.config_text, "AWS config file", profile));
  if (!credentials.values && !config.values) {
    if (!required) return AwsProfileRecipe{};
    return InvalidArgumentError("AWS profile `" + profile + "` is in neither the credentials file " +
                                (files.credentials_path.empty() ? "(no HOME)" : files.credentials_path) +
                                " nor the config file " +
                                (files.config_path.empty() ? "(no HOME)" : files.config_path));
  }
  chain.push_back(profile);
  if (!config.Get("role_arn").empty() || !credentials.Get("role_arn").empty()) {  // 1
    return AssumeRole(files, profile, config.Get("role_arn").empty() ? credentials : config, credentials,
                      config, chain);
  }
  AwsProfileRecipe r;
  if (credentials.values) {  // 2
    CAIRN_ASSIGN_OR_RETURN(r.keys, ParseAwsCredentialsFile(**credentials.text, *credentials.path, profile,
                                                           false, credentials.what));
    if (!r.keys.anonymous()) {
      r.kind = AwsProfileRecipe::Kind::kKeys;
      r.where = credentials.Where(profile);
      return r;
    }
  }
  for (const InFile* f : {&credentials, &config}) {  // 3
    if (std::string process = f->Get("credential_process"); !process.empty()) {
      r.kind = AwsProfileRecipe::Kind::kProcess;
      r.process = std::move(process);
      r.where = f->Where(profile);
      return r;
    }
  }
  if (config.values) {  // 4
    CAIRN_ASSIGN_OR_RETURN(r.keys, ParseAwsCredentialsFile(**config.text, *config.path, profile, false,
                                                           config.what));
    if (!r.keys.anonymous()) {
      r.kind = AwsProfileRecipe::Kind::kKeys;
      r.where = config.Where(profile);
    }
  }
  return r;
}

}  // namespace

Result<AwsSharedFiles> ReadAwsSharedFiles() {
  AwsSharedFiles f;
  f.credentials_path = AwsSharedFilePath("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  f.config_path = AwsSharedFilePath("AWS_CONFIG_FILE", "config");
  if (!f.credentials_path.empty()) {
    CAIRN_ASSIGN_OR_RETURN(f.credentials_text, ReadAwsSharedFile(f.credentials_path, "AWS credentials file"));
  }
  if (!f.config_path.empty()) {
    CAIRN_ASSIGN_OR_RETURN(f.config_text, ReadAwsSharedFile(f.config_path, "AWS config file"));
  }
  return f;
}

Result<AwsProfileRecipe> ResolveAwsProfile(const AwsSharedFiles& files, const std::string& profile,
                                           bool required) {
  std::vector<std::string> chain;
  return Resolve(files, profile, required, chain);
}

std::string AwsProfileRecipe::CacheKey() const {
  std::string k = std::to_string(static_cast<int>(kind)) + '\0' + where + '\0';
  switch (kind) {
    case Kind::kNone:
      break;
    case Kind::kKeys:
      k += keys.access_key_id + '\0' + keys.secret_access_key + '\0' + keys.session_token;
      break;
    case Kind::kProcess:
      k += process;
      break;
    case Kind::kAssumeRole:
      k += role_arn + '\0' + session_name + '\0' + external_id + '\0' + std::to_string(duration_seconds) +
           '\0' + (source ? source->CacheKey() : "");
      break;
  }
  return k;
}

}  // namespace cairn::s3
