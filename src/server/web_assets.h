// The dashboard (web/), embedded at build time: cmake/EmbedWeb.cmake turns every file under web/
// into a table compiled into gnomon_server, so `gnomon serve` needs no files beside the binary.
#ifndef GNOMON_SRC_SERVER_WEB_ASSETS_H_
#define GNOMON_SRC_SERVER_WEB_ASSETS_H_

#include <span>
#include <string_view>

namespace gnomon::server {

// One embedded file. All views point into static storage (valid for the whole program).
struct WebAsset {
  std::string_view path;          // URL path: "/" + the path under web/, e.g. "/assets/app.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view etag;          // quoted strong validator: a prefix of the SHA-256 of the bytes
  std::string_view body;          // the file's bytes
};

// Every embedded file, sorted by path. Generated (web_assets.cc in the build directory).
std::span<const WebAsset> WebAssets();

// The asset served at `path`, or nullptr. "/" is "/index.html".
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_WEB_ASSETS_H_
