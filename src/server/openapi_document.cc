// The OpenAPI 3 document of the HTTP API, served at GET /api/v1/openapi.json.
#include "src/server/openapi_document.h"

namespace gnomon::server {
namespace {

const char kOpenApi[] = R"json({
 "openapi": "3.0.3",
 "info": {"title": "gnomon HTTP API", "version": "@VERSION@",
          "description": "Distributed cron. See docs/http-api.md."},
 "components": {
  "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
  "schemas": {
   "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
     "required": ["code", "message"], "properties": {"code": {"type": "string"},
     "message": {"type": "string"}, "field": {"type": "string"}}}}},
   "JobSpec": {"type": "object", "additionalProperties": false, "required": ["id", "schedule"],
    "properties": {"id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"},
     "schedule": {"type": "string"}, "timezone": {"type": "string"},
     "command": {"type": "string"}, "argv": {"type": "array", "items": {"type": "string"}},
     "http": {"type": "object", "properties": {"url": {"type": "string"},
       "method": {"type": "string", "enum": ["GET", "POST"]},
       "headers": {"type": "object", "additionalProperties": {"type": "string"}}}},
     "timeout": {"type": "string"}, "retries": {"type": "integer"},
     "retry_backoff": {"type": "string"},
     "overlap": {"type": "string", "enum": ["forbid", "allow", "replace"]},
     "misfire": {"type": "string", "enum": ["skip", "once", "all"]},
     "catchup_window": {"type": "string"},
     "on_lost": {"type": "string", "enum": ["fail", "rerun"]},
     "shards": {"type": "integer"}, "max_consecutive_failures": {"type": "integer"},
     "enabled": {"type": "boolean"}, "description": {"type": "string"},
     "env": {"type": "object", "additionalProperties": {"type": "string"}},
     "kill_grace": {"type": "string"}, "history_keep": {"type": "integer"},
     "history_max_age": {"type": "string"}, "queue": {"type": "string"},
     "run_as": {"type": "string", "description": "user[:group] the process runs as"},
     "inherit_env": {"type": "array", "items": {"type": "string"}},
     "memory_max": {"type": "integer", "description": "bytes; 0 = none"},
     "cpu_max": {"type": "string"}, "pids_max": {"type": "integer"},
     "open_files": {"type": "integer"}, "version": {"type": "integer",
       "description": "PUT only: the version being replaced (or If-Match)"}}},
   "Job": {"type": "object", "properties": {"id": {"type": "string"},
     "spec": {"$ref": "#/components/schemas/JobSpec"}, "executor": {"type": "string"},
     "schedule_description": {"type": "string"}, "timezone": {"type": "string"},
     "next_fire": {"type": "string", "format": "date-time", "nullable": true},
     "paused": {"type": "boolean"}, "pause_reason": {"type": "string"},
     "running": {"type": "integer"}, "read_only": {"type": "boolean"},
     "source": {"type": "string"}, "version": {"type": "integer", "nullable": true},
     "last_run": {"$ref": "#/components/schemas/Run"}}},
   "Run": {"type": "object", "nullable": true, "properties": {"run_id": {"type": "string"},
     "job_id": {"type": "string"}, "scheduled_at": {"type": "string", "format": "date-time"},
     "shard": {"type": "integer"}, "shard_count": {"type": "integer"},
     "attempt": {"type": "integer"}, "fencing_token": {"type": "integer"},
     "node_id": {"type": "string"}, "started_at": {"type": "string", "format": "date-time"},
     "finished_at": {"type": "string", "format": "date-time", "nullable": true},
     "outcome": {"type": "string", "enum": ["running", "succeeded", "failed", "timed_out",
       "cancelled", "skipped", "lost"]},
     "exit_code": {"type": "integer", "nullable": true}, "error": {"type": "string"},
     "skip_reason": {"type": "string"}, "output": {"type": "string"}}}
  },
  "responses": {"Error": {"description": "error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
  "parameters": {"id": {"name": "id", "in": "path", "required": true,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"}}}
 },
 "security": [{"bearer": []}],
 "paths": {
  "/healthz": {"get": {"summary": "Liveness", "security": [],
    "responses": {"200": {"description": "alive"}}}},
  "/readyz": {"get": {"summary": "Readiness: the backend answers", "security": [],
    "responses": {"200": {"description": "ready"}, "503": {"$ref": "#/components/responses/Error"}}}},
  "/metrics": {"get": {"summary": "Prometheus metrics (text format 0.0.4); role read",
    "responses": {"200": {"description": "metrics", "content": {"text/plain": {}}}}}},
  "/api/v1/openapi.json": {"get": {"summary": "This document", "security": [],
    "responses": {"200": {"description": "OpenAPI 3 document"}}}},
  "/api/v1/jobs": {
   "get": {"summary": "List jobs, sorted by id, a page at a time; role read",
    "parameters": [
     {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
     {"name": "cursor", "in": "query", "description": "the previous page's next_cursor (opaque)", "schema": {"type": "string"}},
     {"name": "q", "in": "query", "description": "only jobs whose id contains this (ASCII case ignored)", "schema": {"type": "string", "maxLength": 128}}],
    "responses": {"200": {"description": "{jobs: [Job], next_cursor} (next_cursor empty on the last page)"},
     "400": {"$ref": "#/components/responses/Error"}}},
   "post": {"summary": "Create a dynamic job; role admin",
    "requestBody": {"required": true, "content": {"application/json": {"schema":
      {"$ref": "#/components/schemas/JobSpec"}}}},
    "responses": {"201": {"description": "created (Job, ETag = version)"},
     "400": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"},
     "413": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}": {
   "parameters": [{"$ref": "#/components/parameters/id"}],
   "get": {"summary": "One job with its last run; role read",
    "responses": {"200": {"description": "Job"}, "404": {"$ref": "#/components/responses/Error"}}},
   "put": {"summary": "Replace a dynamic job (If-Match: <version> or body version); role admin",
    "parameters": [{"name": "If-Match", "in": "header", "schema": {"type": "string"}}],
    "requestBody": {"required": true, "content": {"application/json": {"schema":
      {"$ref": "#/components/schemas/JobSpec"}}}},
    "responses": {"200": {"description": "Job"}, "400": {"$ref": "#/components/responses/Error"},
     "404": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"},
     "412": {"$ref": "#/components/responses/Error"}, "428": {"$ref": "#/components/responses/Error"}}},
   "delete": {"summary": "Delete a dynamic job (optional If-Match); role admin",
    "responses": {"204": {"description": "deleted"}, "404": {"$ref": "#/components/responses/Error"},
     "409": {"$ref": "#/components/responses/Error"}, "412": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}/pause": {"parameters": [{"$ref": "#/components/parameters/id"}],
   "post": {"summary": "Pause cluster-wide; role operate",
    "responses": {"200": {"description": "{id, paused}"}, "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}/resume": {"parameters": [{"$ref": "#/components/parameters/id"}],
   "post": {"summary": "Resume; role operate",
    "responses": {"200": {"description": "{id, paused}"}, "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}/trigger": {"parameters": [{"$ref": "#/components/parameters/id"}],
   "post": {"summary": "Fire now through a normal claim; role operate",
    "responses": {"202": {"description": "{run_id}"}, "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/runs": {"get": {"summary": "Run history, newest first; role read",
    "parameters": [
     {"name": "job", "in": "query", "schema": {"type": "string"}},
     {"name": "outcome", "in": "query", "schema": {"type": "string"}},
     {"name": "from", "in": "query", "schema": {"type": "string", "format": "date-time"}},
     {"name": "until", "in": "query", "schema": {"type": "string", "format": "date-time"}},
     {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}},
     {"name": "cursor", "in": "query", "schema": {"type": "string"}}],
    "responses": {"200": {"description": "{runs: [Run], next_cursor}"},
     "400": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/runs/{run_id}": {"get": {"summary": "All attempts of one fire, with output; role read",
    "parameters": [{"name": "run_id", "in": "path", "required": true, "schema": {"type": "string"}}],
    "responses": {"200": {"description": "{run_id, job_id, attempts: [Run]}"},
     "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/nodes": {"get": {"summary": "Live nodes; role read",
    "responses": {"200": {"description": "{nodes: [...]}"}}}},
  "/api/v1/cron/preview": {"get": {"summary": "Next fires of an expression; role read",
    "parameters": [
     {"name": "expr", "in": "query", "required": true, "schema": {"type": "string"}},
     {"name": "tz", "in": "query", "schema": {"type": "string", "default": "UTC"}},
     {"name": "n", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 5}},
     {"name": "from", "in": "query", "schema": {"type": "string", "format": "date-time"}},
     {"name": "job", "in": "query", "schema": {"type": "string"}}],
    "responses": {"200": {"description": "{expr, timezone, description, next: [date-time]}"},
     "400": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/audit": {"get": {"summary": "The cluster's audit log of mutating calls (kept in the backend), newest first; role admin",
    "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "default": 100, "maximum": 1000}},
                   {"name": "before", "in": "query", "description": "only records with a smaller seq (the previous page's next_before)", "schema": {"type": "integer"}}],
    "responses": {"200": {"description": "{entries: [{seq, at, who, action, target, status, before, after}], next_before?}"}}}}
 }
})json";

}  // namespace

std::string OpenApiDocument(std::string_view version) {
  std::string doc = kOpenApi;
  const size_t at = doc.find("@VERSION@");
  doc.replace(at, 9, version);
  return doc;
}

}  // namespace gnomon::server
