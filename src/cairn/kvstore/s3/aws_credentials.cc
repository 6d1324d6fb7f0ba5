#include "cairn/kvstore/s3/aws_credentials.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cairn/kvstore/http/environment.h"
#include "cairn/kvstore/s3/aws_instance_metadata.h"
#include "cairn/kvstore/s3/aws_shared_file.h"
#include "cairn/kvstore/s3/aws_web_identity.h"

namespace cairn::s3 {

Result<AwsCredentials> ParseAwsCredentialsFile(std::string_view text, std::string_view path,
                                               std::string_view profile, bool profile_required) {
  CAIRN_ASSIGN_OR_RETURN(auto values, AwsFileProfile(text, "AWS credentials file", path, profile));
  if (!values) {
    if (profile_required) {
      return InvalidArgumentError("AWS credentials file " + std::string(path) + " has no profile `" +
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
    return InvalidArgumentError("AWS credentials file " + std::string(path) + ", profile `" +
                                std::string(profile) +
                                "`: aws_access_key_id and aws_secret_access_key must both be set");
  }
  out.source = std::string(path) + " [" + std::string(profile) + "]";
  return out;
}

Result<AwsCredentials> LoadAwsCredentials() {
  std::string id = http::EnvString("AWS_ACCESS_KEY_ID");
  std::string secret = http::EnvString("AWS_SECRET_ACCESS_KEY");
  if (!id.empty() || !secret.empty()) {
    if (id.empty() || secret.empty()) {
      return InvalidArgumentError(
          "AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set (only " +
          std::string(id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") + " is)");
    }
    return AwsCredentials{id, secret, http::EnvString("AWS_SESSION_TOKEN"), "environment"};
  }
  const std::string path = AwsSharedFilePath("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  if (path.empty()) return AwsCredentials{};
  const bool required = !http::EnvString("AWS_PROFILE").empty();
  const std::string profile = AwsProfileName();
  CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadAwsSharedFile(path, "AWS credentials file"));
  if (!text) {
    if (required) {
      return InvalidArgumentError("AWS_PROFILE is `" + profile + "` but the credentials file " +
                                  path + " cannot be read");
    }
    return AwsCredentials{};
  }
  return ParseAwsCredentialsFile(*text, path, profile, required);
}

Result<std::shared_ptr<AwsCredentialProvider>> AwsCredentialProviderFromEnvironment(
    bool emulator, const std::string& region) {
  // 1, 2: read at every open (cheap, never expire).
  CAIRN_ASSIGN_OR_RETURN(AwsCredentials fixed, LoadAwsCredentials());
  if (!fixed.anonymous()) return AwsCredentialProvider::Fixed(std::move(fixed));

  WebIdentityConfig web;
  web.token_file = http::EnvString("AWS_WEB_IDENTITY_TOKEN_FILE");
  web.role_arn = http::EnvString("AWS_ROLE_ARN");
  web.session_name = http::EnvString("AWS_ROLE_SESSION_NAME");
  if (!web.token_file.empty()) web.sts_endpoint = StsEndpointFromEnvironment(region);
  CAIRN_ASSIGN_OR_RETURN(std::string container, ContainerCredentialsUrlFromEnvironment());
  std::string imds = http::EnvString("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  std::string disabled = http::EnvString("AWS_EC2_METADATA_DISABLED");
  for (char& c : disabled) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool imds_disabled = disabled == "true";

  // 3 to 5 are shared by the stores opened under the same environment.
  const std::string key = web.token_file + '\0' + web.role_arn + '\0' + web.session_name + '\0' +
                          web.sts_endpoint + '\0' + container + '\0' + imds + '\0' +
                          (imds_disabled ? "d" : "") + (emulator ? "e" : "");
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::shared_ptr<AwsCredentialProvider>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  CAIRN_ASSIGN_OR_RETURN(http::RetryPolicy retry, http::RetryPolicyFromEnvironment());
  std::shared_ptr<http::HttpClient> client = http::HttpClient::Default();
  std::shared_ptr<AwsCredentialProvider> found;
  if (!web.token_file.empty()) {  // 3
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
