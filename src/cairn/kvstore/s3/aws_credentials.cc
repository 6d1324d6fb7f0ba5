#include "cairn/kvstore/s3/aws_credentials.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cairn/kvstore/http/environment.h"
#include "cairn/kvstore/s3/aws_assume_role.h"
#include "cairn/kvstore/s3/aws_credential_process.h"
#include "cairn/kvstore/s3/aws_profile.h"
#include "cairn/kvstore/s3/aws_instance_metadata.h"
#include "cairn/kvstore/s3/aws_shared_file.h"
#include "cairn/kvstore/s3/aws_web_identity.h"

namespace cairn::s3 {

Result<AwsCredentials> ParseAwsCredentialsFile(std::string_view text, std::string_view path,
                                               std::string_view profile, bool profile_required,
                                               std::string_view what) {
  CAIRN_ASSIGN_OR_RETURN(auto values, AwsFileProfile(text, what, path, profile));
  if (!values) {
    if (profile_required) {
      return InvalidArgumentError(std::string(what) + " " + std::string(path) + " has no profile `" +
                                  std::string(profile) + "` (AWS_PROFILE)");
    }
    return AwsCredentials{};
  }
  AwsCredentials out;
  auto take = [&](const char* name, std::string* to) {
    if (auto it = values->find(name); it != values->end()) *to = it->second;
  };
  take("aws_access_key_id", &out.access_key_id);
  take("aws_secret_access_key", &out.secret_access_key);
  take("aws_session_token", &out.session_token);
  if (out.access_key_id.empty() != out.secret_access_key.empty()) {
    return InvalidArgumentError(std::string(what) + " " + std::string(path) + ", profile `" +
                                std::string(profile) +
                                "`: aws_access_key_id and aws_secret_access_key must both be set");
  }
  out.source = std::string(path) + " [" + std::string(profile) + "]";
  return out;
}

Result<AwsCredentials> EnvironmentAwsCredentials() {
  std::string id = http::EnvString("AWS_ACCESS_KEY_ID");
  std::string secret = http::EnvString("AWS_SECRET_ACCESS_KEY");
  if (id.empty() && secret.empty()) return AwsCredentials{};
  if (id.empty() || secret.empty()) {
    return InvalidArgumentError(
        "AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set (only " +
        std::string(id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") + " is)");
  }
  return AwsCredentials{id, secret, http::EnvString("AWS_SESSION_TOKEN"), "environment"};
}

namespace {

// The provider of a profile's recipe (step 2), the source of a role first.
std::shared_ptr<AwsCredentialProvider> ProfileProvider(const AwsProfileRecipe& r,
                                                       const std::shared_ptr<http::HttpClient>& client,
                                                       const http::RetryPolicy& retry, const std::string& region,
                                                       const std::string& sts_endpoint) {
  switch (r.kind) {
    case AwsProfileRecipe::Kind::kNone:
      return AwsCredentialProvider::Fixed(AwsCredentials{});
    case AwsProfileRecipe::Kind::kKeys:
      return AwsCredentialProvider::Fixed(r.keys);
    case AwsProfileRecipe::Kind::kProcess:
      return CredentialProcessProvider(r.process, r.where);
    case AwsProfileRecipe::Kind::kAssumeRole:
      break;
  }
  AssumeRoleConfig config;
  config.role_arn = r.role_arn;
  config.session_name = r.session_name;
  config.external_id = r.external_id;
  config.duration_seconds = r.duration_seconds;
  config.sts_endpoint = sts_endpoint;
  config.region = region;
  config.where = r.where;
  return AssumeRoleProvider(std::move(config), ProfileProvider(*r.source, client, retry, region, sts_endpoint),
                            client, retry);
}

}  // namespace

Result<std::shared_ptr<AwsCredentialProvider>> AwsCredentialProviderFromEnvironment(
    bool emulator, const std::string& region) {
  // 1 and the keys of 2: read at every open (cheap, never expire).
  CAIRN_ASSIGN_OR_RETURN(AwsCredentials environment, EnvironmentAwsCredentials());
  if (!environment.anonymous()) return AwsCredentialProvider::Fixed(std::move(environment));
  CAIRN_ASSIGN_OR_RETURN(AwsSharedFiles files, ReadAwsSharedFiles());
  CAIRN_ASSIGN_OR_RETURN(AwsProfileRecipe profile,
                         ResolveAwsProfile(files, AwsProfileName(), !http::EnvString("AWS_PROFILE").empty()));
  if (profile.kind == AwsProfileRecipe::Kind::kKeys) return AwsCredentialProvider::Fixed(profile.keys);

  WebIdentityConfig web;
  web.token_file = http::EnvString("AWS_WEB_IDENTITY_TOKEN_FILE");
  web.role_arn = http::EnvString("AWS_ROLE_ARN");
  web.session_name = http::EnvString("AWS_ROLE_SESSION_NAME");
  const std::string sts_endpoint = StsEndpointFromEnvironment(region);
  if (!web.token_file.empty()) web.sts_endpoint = sts_endpoint;
  CAIRN_ASSIGN_OR_RETURN(std::string container, ContainerCredentialsUrlFromEnvironment());
  std::string imds = http::EnvString("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  std::string disabled = http::EnvString("AWS_EC2_METADATA_DISABLED");
  for (char& c : disabled) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool imds_disabled = disabled == "true";

  // Processes, roles and 3 to 5 are shared by the stores opened under the
  // same environment.
  const std::string key = profile.CacheKey() + '\0' + region + '\0' + sts_endpoint + '\0' + web.token_file +
                          '\0' + web.role_arn + '\0' + web.session_name + '\0' + container + '\0' + imds +
                          '\0' + (imds_disabled ? "d" : "") + (emulator ? "e" : "");
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::shared_ptr<AwsCredentialProvider>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  CAIRN_ASSIGN_OR_RETURN(http::RetryPolicy retry, http::RetryPolicyFromEnvironment());
  std::shared_ptr<http::HttpClient> client = http::HttpClient::Default();
  std::shared_ptr<AwsCredentialProvider> found;
  if (profile.kind != AwsProfileRecipe::Kind::kNone) {  // 2: a process or a role
    found = ProfileProvider(profile, client, retry, region, sts_endpoint);
  } else if (!web.token_file.empty()) {  // 3
    if (web.role_arn.empty()) {
      return InvalidArgumentError("AWS_WEB_IDENTITY_TOKEN_FILE is set (`" + web.token_file +
                                  "`) but AWS_ROLE_ARN is not");
    }
    found = WebIdentityProvider(std::move(web), client, retry);
  } else if (!container.empty()) {  // 4
    found = ContainerCredentialsProvider(container, client, retry);
  } else if (!imds_disabled && !imds.empty() && ProbeInstanceMetadata(imds)) {  // 5, named
    found = InstanceMetadataProvider(imds, client, retry);
  } else if (!imds_disabled && imds.empty() && !emulator && ProbeInstanceMetadata(kDefaultImdsEndpoint)) {
    found = InstanceMetadataProvider(kDefaultImdsEndpoint, client, retry);  // 5, found
  } else {
    found = AwsCredentialProvider::Fixed(AwsCredentials{});  // 6
  }
  (*cache)[key] = found;
  return found;
}

}  // namespace cairn::s3
