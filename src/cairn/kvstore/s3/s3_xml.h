// The few pieces of S3's XML responses the driver reads (ListObjectsV2,
// InitiateMultipartUpload, errors), found by tag name. S3 responses are flat
// enough that no general XML parser is needed; entities are decoded.
// Untrusted input: every lookup is bounded by the text given.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::s3 {

// The decoded text of the first <tag>...</tag> in `xml`, or nullopt.
std::optional<std::string> XmlText(std::string_view xml, std::string_view tag);

// The raw inner text of every <tag>...</tag> in `xml`, in order.
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);

// Decodes &amp; &lt; &gt; &quot; &apos; &#N; &#xN; (UTF-8 out); nullopt for
// a malformed entity.
std::optional<std::string> XmlDecode(std::string_view s);

// Escapes & < > " ' for an XML text node.
std::string XmlEscape(std::string_view s);

}  // namespace cairn::s3
