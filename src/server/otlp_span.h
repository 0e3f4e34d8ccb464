// OtlpSpan: a finished span as OtlpExporter (tracing.h) queues it, and its encoding as an
// OTLP/HTTP JSON export request (opentelemetry/proto/collector/trace/v1, one resource, one scope
// "gnomon"). Ids are lower-case hex; times are whole milliseconds written as unix nanoseconds.
//
// Thread safety: plain values and a pure function.
#ifndef GNOMON_SRC_SERVER_OTLP_SPAN_H_
#define GNOMON_SRC_SERVER_OTLP_SPAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gnomon/time.h"

namespace gnomon::server {

struct OtlpAttribute {
  std::string key;
  std::string string_value;  // used when !is_int
  int64_t int_value = 0;
  bool is_int = false;
};

struct OtlpSpan {
  std::string trace_id;
  std::string span_id;
  std::string parent_span_id;  // empty for a root span
  std::string name;
  Instant start;
  Instant end;
  std::vector<OtlpAttribute> attributes;
  bool error = false;
  std::string status_message;
};

// The resource attributes of every batch.
struct OtlpResource {
  std::string service_name;  // service.name
  std::string node_id;       // service.instance.id; omitted when empty
  std::string host_name;     // host.name; omitted when empty
};

// The JSON body of one export request holding `spans`. Invalid UTF-8 in any string is replaced,
// not thrown; nlohmann::json may still throw (e.g. out of memory): the caller catches
// std::exception (OtlpExporter::Send turns it into a dropped batch).
std::string EncodeOtlpBatch(const std::vector<OtlpSpan>& spans, const OtlpResource& resource);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_OTLP_SPAN_H_
