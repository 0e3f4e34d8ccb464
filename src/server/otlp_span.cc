#include "src/server/otlp_span.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace gnomon::server {
namespace {

// OTLP span kind and status codes (opentelemetry/proto/trace/v1/trace.proto).
constexpr int kSpanKindInternal = 1;
constexpr int kStatusUnset = 0;
constexpr int kStatusError = 2;

std::string UnixNanos(Instant t) {
  return std::to_string(t.unix_millis()) + "000000";  // ms resolution; string per OTLP JSON
}

}  // namespace

std::string EncodeOtlpBatch(const std::vector<OtlpSpan>& spans, const OtlpResource& resource) {
  using nlohmann::json;
  auto attr = [](const std::string& key, json value) {
    return json{{"key", key}, {"value", std::move(value)}};
  };
  json resource_attrs =
      json::array({attr("service.name", {{"stringValue", resource.service_name}})});
  if (!resource.node_id.empty()) {
    resource_attrs.push_back(attr("service.instance.id", {{"stringValue", resource.node_id}}));
  }
  if (!resource.host_name.empty()) {
    resource_attrs.push_back(attr("host.name", {{"stringValue", resource.host_name}}));
  }
  json out_spans = json::array();
  for (const OtlpSpan& s : spans) {
    json attrs = json::array();
    for (const OtlpAttribute& a : s.attributes) {
      // OTLP JSON encodes 64-bit integers as strings.
      attrs.push_back(attr(a.key, a.is_int ? json{{"intValue", std::to_string(a.int_value)}}
                                           : json{{"stringValue", a.string_value}}));
    }
    json status = {{"code", s.error ? kStatusError : kStatusUnset}};
    if (s.error && !s.status_message.empty()) status["message"] = s.status_message;
    json span = {
        {"traceId", s.trace_id},
        {"spanId", s.span_id},
        {"name", s.name},
        {"kind", kSpanKindInternal},
        {"startTimeUnixNano", UnixNanos(s.start)},
        {"endTimeUnixNano", UnixNanos(s.end)},
        {"attributes", std::move(attrs)},
        {"status", std::move(status)},
    };
    if (!s.parent_span_id.empty()) span["parentSpanId"] = s.parent_span_id;
    out_spans.push_back(std::move(span));
  }
  json body = {{"resourceSpans",
                json::array({{{"resource", {{"attributes", std::move(resource_attrs)}}},
                              {"scopeSpans", json::array({{{"scope", {{"name", "gnomon"}}},
                                                           {"spans", std::move(out_spans)}}})}}})}};
  // Job ids and error details may hold invalid UTF-8: replaced rather than thrown.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gnomon::server
