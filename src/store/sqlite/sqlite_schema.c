/* sqlite_schema.c — the SQLite schema as numbered migrations, applied in order at start.
 * A migration is never edited once released: add a new one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/secretbox.h"
#include "store/sqlite/sqlite_int.h"

static const struct {
  int version;
  const char *sql;
} migrations[] = {
    {1,
     "CREATE TABLE tenants ("
     "  id TEXT PRIMARY KEY,"
     "  name TEXT NOT NULL DEFAULT '',"
     "  created_at INTEGER NOT NULL"
     ") WITHOUT ROWID;"

     /* Immutable policy versions: an endpoint points at its current one, each delivery at the
      * one it started with. */
     "CREATE TABLE retry_policies ("
     "  id INTEGER PRIMARY KEY,"
     "  max_attempts INTEGER NOT NULL,"
     "  base_ms INTEGER NOT NULL,"
     "  cap_ms INTEGER NOT NULL,"
     "  max_age_ms INTEGER NOT NULL,"
     "  retry_after_cap_ms INTEGER NOT NULL,"
     "  created_at INTEGER NOT NULL"
     ");"

     "CREATE TABLE endpoints ("
     "  id TEXT PRIMARY KEY,"
     "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
     "  url TEXT NOT NULL,"
     "  description TEXT NOT NULL DEFAULT '',"
     "  event_types TEXT,"
     "  enabled INTEGER NOT NULL DEFAULT 1,"
     "  disabled_reason TEXT,"
     "  max_in_flight INTEGER NOT NULL,"
     "  timeout_ms INTEGER NOT NULL,"
     "  policy_id INTEGER NOT NULL REFERENCES retry_policies(id),"
     "  secret TEXT NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL,"
     "  deleted_at INTEGER"
     ");"
     "CREATE INDEX endpoints_tenant ON endpoints(tenant_id, id) WHERE deleted_at IS NULL;"
     "CREATE INDEX endpoints_updated ON endpoints(updated_at);"

     /* The payload is stored once, as the exact envelope bytes. (id, tenant_id) serves lookups
      * by id alone and by tenant + id. */
     "CREATE TABLE events ("
     "  seq INTEGER PRIMARY KEY,"
     "  id TEXT NOT NULL,"
     "  tenant_id TEXT NOT NULL,"
     "  type TEXT NOT NULL,"
     "  body BLOB NOT NULL,"
     "  request_hash BLOB NOT NULL,"
     "  occurred_at INTEGER NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  expires_at INTEGER,"
     "  UNIQUE (id, tenant_id)"
     ");"

     "CREATE TABLE deliveries ("
     "  seq INTEGER PRIMARY KEY,"
     "  id TEXT NOT NULL UNIQUE,"
     "  event_seq INTEGER NOT NULL REFERENCES events(seq),"
     "  endpoint_id TEXT NOT NULL,"
     "  tenant_id TEXT NOT NULL,"
     /* CHECK written with OR, not IN: for an IN list of more than two constants SQLite builds
      * a temporary b-tree on every INSERT and UPDATE of the row (measured in bench/) */
     "  state TEXT NOT NULL CHECK (state = 'pending' OR state = 'retrying' OR"
     "    state = 'delivered' OR state = 'dead' OR state = 'cancelled' OR state = 'unknown'),"
     "  attempt_count INTEGER NOT NULL DEFAULT 0,"
     "  cycle_base INTEGER NOT NULL DEFAULT 0,"
     "  cycle_kind TEXT NOT NULL DEFAULT 'live',"
     "  cycle_started_at INTEGER NOT NULL,"
     "  next_attempt_at INTEGER,"
     "  lease_owner TEXT,"
     "  lease_token INTEGER NOT NULL DEFAULT 0,"
     "  leased_until INTEGER,"
     "  last_error TEXT,"
     "  last_status INTEGER,"
     "  policy_id INTEGER NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL,"
     "  delivered_at INTEGER,"
     "  dead_at INTEGER,"
     "  dead_reason TEXT,"
     "  UNIQUE (event_seq, endpoint_id)"
     ");"
     /* Only deliveries that may still be sent are in the due index. */
     "CREATE INDEX deliveries_due ON deliveries(endpoint_id, next_attempt_at)"
     "  WHERE state IN ('pending','retrying');"
     "CREATE INDEX deliveries_leased ON deliveries(leased_until) WHERE leased_until IS NOT NULL;"
     "CREATE INDEX deliveries_tenant ON deliveries(tenant_id, id);"

     /* Append-only history. */
     "CREATE TABLE attempts ("
     "  delivery_seq INTEGER NOT NULL,"
     "  attempt_number INTEGER NOT NULL,"
     "  started_at INTEGER NOT NULL,"
     "  finished_at INTEGER NOT NULL,"
     "  outcome TEXT NOT NULL,"
     "  http_status INTEGER,"
     "  latency_ms INTEGER NOT NULL,"
     "  error TEXT,"
     "  response BLOB,"
     "  lease_token INTEGER NOT NULL,"
     "  kind TEXT NOT NULL,"
     "  PRIMARY KEY (delivery_seq, attempt_number)"
     ") WITHOUT ROWID;"
     "CREATE TRIGGER attempts_no_update BEFORE UPDATE ON attempts"
     "  BEGIN SELECT RAISE(ABORT, 'attempts are append-only'); END;"
     "CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts"
     "  BEGIN SELECT RAISE(ABORT, 'attempts are append-only'); END;"

     "CREATE TABLE idempotency_keys ("
     "  tenant_id TEXT NOT NULL,"
     "  key TEXT NOT NULL,"
     "  request_hash BLOB NOT NULL,"
     "  event_seq INTEGER,"
     "  created_at INTEGER NOT NULL,"
     "  PRIMARY KEY (tenant_id, key)"
     ") WITHOUT ROWID;"

     "CREATE TABLE api_keys ("
     "  id TEXT PRIMARY KEY,"
     "  hash BLOB NOT NULL UNIQUE,"
     "  role TEXT NOT NULL,"
     "  tenants TEXT,"
     "  name TEXT NOT NULL DEFAULT '',"
     "  created_at INTEGER NOT NULL,"
     "  revoked_at INTEGER"
     ");"},
    {2,
     /* Signing scheme (hmac: whsec_, ed25519: whsk_), the secret being rotated out and when it
      * stops being sent; secrets are sealed by the daemon before they reach the store. */
     "ALTER TABLE endpoints ADD COLUMN signing TEXT NOT NULL DEFAULT 'hmac';"
     "ALTER TABLE endpoints ADD COLUMN previous_secret TEXT;"
     "ALTER TABLE endpoints ADD COLUMN previous_expires_at INTEGER;"
     /* Append-only record of every mutating administrative action. */
     "CREATE TABLE audit_log ("
     "  seq INTEGER PRIMARY KEY,"
     "  at INTEGER NOT NULL,"
     "  actor TEXT NOT NULL,"
     "  action TEXT NOT NULL,"
     "  target TEXT,"
     "  tenant_id TEXT,"
     "  reason TEXT,"
     "  detail TEXT"
     ");"
     "CREATE INDEX audit_log_tenant ON audit_log(tenant_id, seq);"
     "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log"
     "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
     "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log"
     "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"},
    {3,
     /* Inbound webhooks (docs/inbound.md). A destination is an endpoint owned by a source. */
     "ALTER TABLE endpoints ADD COLUMN source_id TEXT;"
     "ALTER TABLE endpoints ADD COLUMN idempotent INTEGER NOT NULL DEFAULT 1;"
     "CREATE INDEX endpoints_source ON endpoints(source_id) WHERE source_id IS NOT NULL;"
     /* an inbound event stores the provider's raw body, its content type, and the header lines
      * forwarded with it */
     "ALTER TABLE events ADD COLUMN kind TEXT NOT NULL DEFAULT 'outbound';"
     "ALTER TABLE events ADD COLUMN content_type TEXT;"
     "ALTER TABLE events ADD COLUMN meta TEXT;"
     "ALTER TABLE deliveries ADD COLUMN result_ref TEXT;"
     "CREATE TABLE sources ("
     "  id TEXT PRIMARY KEY,"
     "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
     "  provider TEXT NOT NULL,"
     "  secrets TEXT NOT NULL,"
     "  tolerance_s INTEGER NOT NULL,"
     "  event_types TEXT,"
     "  identity_paths TEXT,"
     "  business_paths TEXT,"
     "  business_operation TEXT,"
     "  version_object_path TEXT,"
     "  version_path TEXT,"
     "  version_header TEXT,"
     "  generic TEXT,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL,"
     "  deleted_at INTEGER"
     ");"
     "CREATE INDEX sources_tenant ON sources(tenant_id, id);"
     /* The dedup record. UNIQUE(source_id, identity_key) is the arbiter of duplicates; conflict
      * and semantic-duplicate rows keep NULL keys. */
     "CREATE TABLE inbox ("
     "  seq INTEGER PRIMARY KEY,"
     "  id TEXT NOT NULL UNIQUE,"
     "  source_id TEXT NOT NULL,"
     "  tenant_id TEXT NOT NULL,"
     "  provider TEXT NOT NULL,"
     "  identity_key TEXT,"
     "  identity_kind TEXT NOT NULL,"
     "  provider_event_id TEXT,"
     "  business_key TEXT,"
     "  event_type TEXT,"
     "  payload_hash TEXT NOT NULL,"
     "  status TEXT NOT NULL CHECK (status = 'received' OR status = 'retryable_failed' OR"
     "    status = 'completed' OR status = 'dead_lettered' OR status = 'unknown' OR"
     "    status = 'filtered' OR status = 'stale' OR status = 'conflict' OR status = 'duplicate'),"
     "  conflict_of TEXT,"
     "  event_seq INTEGER,"
     "  attempt_count INTEGER NOT NULL DEFAULT 0,"
     "  received_at INTEGER NOT NULL,"
     "  completed_at INTEGER,"
     "  result_ref TEXT,"
     "  last_error TEXT,"
     "  UNIQUE (source_id, identity_key)"
     ");"
     /* Every index is written on each receive: only those a query needs. Partial where most
      * rows have NULL (business keys are optional; conflict, filtered and stale rows link no
      * event). Retention walks seq, which grows with received_at: no index on received_at. */
     "CREATE UNIQUE INDEX inbox_business ON inbox(source_id, business_key)"
     "  WHERE business_key IS NOT NULL;"
     "CREATE INDEX inbox_tenant_status ON inbox(tenant_id, status, seq);"
     "CREATE INDEX inbox_event ON inbox(event_seq) WHERE event_seq IS NOT NULL;"
     "CREATE TABLE object_versions ("
     "  source_id TEXT NOT NULL,"
     "  object_key TEXT NOT NULL,"
     "  version TEXT NOT NULL,"
     "  numeric INTEGER NOT NULL,"
     "  PRIMARY KEY (source_id, object_key)"
     ") WITHOUT ROWID;"},
    {4,
     /* Isolation (docs/isolation.md): tenant and endpoint limits, ordering lanes, how long an
      * endpoint has been failing, and a due index that keeps live work apart from replays. */
     "ALTER TABLE tenants ADD COLUMN max_in_flight INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE tenants ADD COLUMN rate_limit REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE tenants ADD COLUMN weight INTEGER NOT NULL DEFAULT 1;"
     "ALTER TABLE tenants ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE endpoints ADD COLUMN rate_limit REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE endpoints ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE endpoints ADD COLUMN lane_policy TEXT NOT NULL DEFAULT 'skip';"
     "ALTER TABLE endpoints ADD COLUMN failing_since INTEGER;"
     "ALTER TABLE events ADD COLUMN ordering_key TEXT;"
     "ALTER TABLE events ADD COLUMN ordering_version INTEGER;"
     "ALTER TABLE deliveries ADD COLUMN ordering_key TEXT;"
     "DROP INDEX deliveries_due;"
     "CREATE INDEX deliveries_due ON deliveries(endpoint_id, cycle_kind, next_attempt_at)"
     "  WHERE state IN ('pending','retrying');"
     "CREATE INDEX deliveries_lane ON deliveries(endpoint_id, ordering_key, seq)"
     "  WHERE ordering_key IS NOT NULL;"},
    {5,
     /* Versions in order (docs/isolation.md): the highest ordering_version each lane of an
      * ordered endpoint has been given; a lower one is superseded. */
     "CREATE TABLE lane_versions ("
     "  endpoint_id TEXT NOT NULL,"
     "  ordering_key TEXT NOT NULL,"
     "  version INTEGER NOT NULL,"
     "  PRIMARY KEY (endpoint_id, ordering_key)"
     ") WITHOUT ROWID;"},
    {6,
     /* Lane heads without a scan (docs/isolation.md "Ordering lanes"): a delivery known to wait
      * behind an open one of its lane has lane_wait = 1 and is left out of the due index, so a
      * claim never visits a lane's blocked backlog; the open rows of each lane have an index of
      * their own, so finding an earlier open one (or the next head) is one probe, whatever the
      * lane's delivered history. */
     "ALTER TABLE deliveries ADD COLUMN lane_wait INTEGER NOT NULL DEFAULT 0;"
     "DROP INDEX deliveries_due;"
     "CREATE INDEX deliveries_due ON deliveries(endpoint_id, cycle_kind, next_attempt_at)"
     "  WHERE state IN ('pending','retrying') AND lane_wait = 0;"
     "CREATE INDEX deliveries_lane_open ON deliveries(endpoint_id, ordering_key, seq)"
     "  WHERE ordering_key IS NOT NULL AND state IN ('pending','retrying','unknown');"
     "CREATE INDEX deliveries_lane_dead ON deliveries(endpoint_id, ordering_key, seq)"
     "  WHERE ordering_key IS NOT NULL AND state = 'dead' AND dead_reason IS NOT 'superseded';"},
    {7,
     /* A head that expired blocks nothing either (it can never be sent, nor replayed); and the
      * rows that wait get an index, so hints can be cleared per endpoint in bounded steps. */
     "DROP INDEX deliveries_lane_dead;"
     "CREATE INDEX deliveries_lane_dead ON deliveries(endpoint_id, ordering_key, seq)"
     "  WHERE ordering_key IS NOT NULL AND state = 'dead'"
     "  AND dead_reason NOT IN ('superseded','expired');"
     "CREATE INDEX deliveries_lane_wait ON deliveries(endpoint_id, seq) WHERE lane_wait = 1;"},
    {8,
     /* One in flight per lane, whatever the order of seqs: a replayed delivery is earlier than
      * the lane's later ones, one of which may be in flight; the lanes' leased rows (at most the
      * deliveries in flight) get an index, so the claim's check is one probe. */
     "CREATE INDEX deliveries_lane_leased ON deliveries(endpoint_id, ordering_key)"
     "  WHERE ordering_key IS NOT NULL AND leased_until IS NOT NULL;"},
    {9,
     /* A deleted source keeps no secrets: `keys rotate-master` re-seals live ones only, and a
      * retired master key must not open the deleted ones (delete now blanks them too). */
     "UPDATE sources SET secrets = '' WHERE deleted_at IS NOT NULL;"},
    {10,
     /* Payload retention (--payload-retention-s): a purged event keeps its row, ids and
      * deliveries' history; its body is emptied and it can no longer be replayed. */
     "ALTER TABLE events ADD COLUMN purged_at INTEGER;"},
    {11,
     /* Event retention (--event-retention-s; inbound events go with their dedup record):
      * attempts stay append-only inside the window. A retention job records its cut-off here
      * before it deletes, and the trigger refuses to delete any attempt that finished at or
      * after the recorded cut-off (none at all while no job has run). */
     "CREATE TABLE retention_marks ("
     "  name TEXT PRIMARY KEY,"
     "  before_ms INTEGER NOT NULL"
     ") WITHOUT ROWID;"
     "DROP TRIGGER attempts_no_delete;"
     "CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts"
     "  WHEN OLD.finished_at >= COALESCE((SELECT before_ms FROM retention_marks"
     "    WHERE name = 'attempts'), 0)"
     "  BEGIN SELECT RAISE(ABORT, 'attempts are append-only inside the retention window'); END;"},
    {12,
     /* 4xx statuses a policy retries instead of giving up ("409,423"; NULL = none, O6). */
     "ALTER TABLE retry_policies ADD COLUMN retry_statuses TEXT;"},
    {13,
     /* One cut-off per kind of event: the inbox's retention (inbound) and the event retention
      * (outbound) have windows of their own, and one shared mark protected an outbound attempt
      * only as long as the shorter inbound window. */
     "DELETE FROM retention_marks;"
     "DROP TRIGGER attempts_no_delete;"
     "CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts"
     "  WHEN OLD.finished_at >= COALESCE((SELECT m.before_ms FROM deliveries d, events e,"
     "    retention_marks m WHERE d.seq = OLD.delivery_seq AND e.seq = d.event_seq"
     "    AND m.name = e.kind), 0)"
     "  BEGIN SELECT RAISE(ABORT, 'attempts are append-only inside the retention window'); END;"},
    {14,
     /* Replay jobs (O12, docs/replay.md): a job and the snapshot of the deliveries it replays,
      * item n = 1..total in the order they go; next_item is the job's cursor, next_item_at its
      * token bucket. An item names its delivery by seq and id (a seq freed by retention may be
      * taken again) with its attempt count then (one attempted since is not the job's to send).
      * result: NULL while queued, then "replayed" or why it was skipped. The DEAD
      * queue gets an index of its own (a job's usual filter; few rows, written only when a
      * delivery dies or leaves that state). IF NOT EXISTS: only new objects, so running it again
      * on a store that has them (a restored schema_migrations) changes nothing. */
     "CREATE TABLE IF NOT EXISTS replay_jobs ("
     "  seq INTEGER PRIMARY KEY,"
     "  id TEXT NOT NULL UNIQUE,"
     "  tenant_id TEXT NOT NULL,"
     "  state TEXT NOT NULL,"
     "  filter TEXT NOT NULL,"
     "  filter_state TEXT NOT NULL,"
     "  actor TEXT,"
     "  reason TEXT NOT NULL,"
     "  rate_per_s REAL NOT NULL,"
     "  total INTEGER NOT NULL,"
     "  replayed INTEGER NOT NULL DEFAULT 0,"
     "  skipped INTEGER NOT NULL DEFAULT 0,"
     "  next_item INTEGER NOT NULL DEFAULT 1,"
     "  next_item_at INTEGER NOT NULL DEFAULT 0,"
     "  created_at INTEGER NOT NULL,"
     "  confirmed_at INTEGER,"
     "  updated_at INTEGER NOT NULL,"
     "  finished_at INTEGER,"
     "  items_purged_at INTEGER"
     ");"
     "CREATE INDEX IF NOT EXISTS replay_jobs_tenant ON replay_jobs(tenant_id, id);"
     "CREATE INDEX IF NOT EXISTS replay_jobs_running ON replay_jobs(next_item_at)"
     "  WHERE state = 'running';"
     "CREATE TABLE IF NOT EXISTS replay_items ("
     "  job_seq INTEGER NOT NULL,"
     "  n INTEGER NOT NULL,"
     "  delivery_seq INTEGER NOT NULL,"
     "  delivery_id TEXT NOT NULL,"
     "  attempts INTEGER NOT NULL,"
     "  result TEXT,"
     "  PRIMARY KEY (job_seq, n)"
     ") WITHOUT ROWID;"
     "CREATE INDEX IF NOT EXISTS deliveries_dead ON deliveries(tenant_id, created_at)"
     "  WHERE state = 'dead';"},
    {15,
     /* An item's lease token as of the snapshot. Every claim, replay and lease reclaim bumps a
      * delivery's token, so a token that moved says the delivery was touched since — even by a
      * cycle that left its attempt count as it was (a claim whose lease lapsed, held unknown,
      * then resolved dead). NULL for items snapshotted before this migration: their attempt
      * count alone decides, as before. */
     "ALTER TABLE replay_items ADD COLUMN lease_token INTEGER;"},
    {16,
     /* A tenant's events newest first (GET /v1/tenants/{t}/events): each tenant's newest
      * entries sit together at its end of the index, one page a commit or so per tenant
      * publishing. Built once on an existing store: ~0.5 s per million events (warm cache). */
     "CREATE INDEX IF NOT EXISTS events_tenant ON events(tenant_id, seq);"},
    {17,
     /* A deleted endpoint keeps no signing secret, as a deleted source keeps none (9): nothing
      * is signed for it again, and a retired master key must not open its secret (delete now
      * blanks it too). */
     "UPDATE endpoints SET secret = '', previous_secret = NULL, previous_expires_at = NULL"
     "  WHERE deleted_at IS NOT NULL;"},
    {18,
     /* The identity rule a source's PATCH replaced, looked up until the inbox's retention has
      * passed (docs/inbound.md "Changing the identity rule"). */
     "ALTER TABLE sources ADD COLUMN prior_identity_paths TEXT;"
     "ALTER TABLE sources ADD COLUMN prior_identity_until INTEGER NOT NULL DEFAULT 0;"},
    {19,
     /* A receiver's Retry-After pause of its endpoint outlives a restart (docs/isolation.md). */
     "ALTER TABLE endpoints ADD COLUMN paused_until INTEGER;"},
    {20,
     /* The event types a source's business key applies to (NULL: every type, as before). */
     "ALTER TABLE sources ADD COLUMN business_types TEXT;"},
    {21,
     /* When the endpoint last moved to another URL or was enabled again: an answer to a request
      * sent before says nothing of its health (failing window, pause, disable). */
     "ALTER TABLE endpoints ADD COLUMN health_since INTEGER;"},
    {22,
     /* A DEAD lane delivery its lane was attempted past (docs/isolation.md "Ordering lanes"):
      * the first later delivery that did, kept on the row so that it outlives the deliveries
      * that showed it, which retention deletes — written here for the rows already there. */
     "ALTER TABLE deliveries ADD COLUMN lane_passed_by INTEGER;"
     "UPDATE deliveries SET lane_passed_by = (SELECT MIN(q.seq) FROM deliveries q"
     "  WHERE q.endpoint_id = deliveries.endpoint_id"
     "  AND q.ordering_key = deliveries.ordering_key AND q.seq > deliveries.seq"
     "  AND ((q.state = 'dead' AND q.dead_reason NOT IN ('superseded','expired')"
     "  AND q.dead_at >= deliveries.dead_at) OR EXISTS (SELECT 1 FROM attempts a"
     "  WHERE a.delivery_seq = q.seq AND a.started_at >= deliveries.dead_at)))"
     "  WHERE ordering_key IS NOT NULL AND state = 'dead'"
     "  AND dead_reason NOT IN ('superseded','expired');"},
    {23,
     /* The send mark: the lease token under which a request to a destination that is not
      * idempotent was about to go out, committed before it does (docs/inbound.md "Ambiguous
      * outcomes"). A lease held at the upgrade may have been sent by the hookd before: marked. */
     "ALTER TABLE deliveries ADD COLUMN sent_token INTEGER;"
     "UPDATE deliveries SET sent_token = lease_token WHERE leased_until IS NOT NULL;"},
    {24,
     /* The URL an attempt was sent to: an endpoint's URL changes (a PATCH), and support reading
      * a delivery's attempts must see which went where. NULL for the attempts made before. */
     "ALTER TABLE attempts ADD COLUMN url TEXT;"},
    {25,
     /* Whether the last attempt may have reached the receiver, as judged when it ended (the
      * request went out, then a timeout, a cut connection, a 502 or 504): a retry of it is held
      * for an operator once its destination is made not idempotent. 0 for those made before. */
     "ALTER TABLE deliveries ADD COLUMN last_ambiguous INTEGER NOT NULL DEFAULT 0;"},
    {26,
     /* An endpoint's custom request headers (an API gateway's Authorization, X-Api-Key): one
      * JSON object, sealed like the signing secret since its values may be credentials. NULL:
      * none, as every endpoint before. */
     "ALTER TABLE endpoints ADD COLUMN headers TEXT;"},
    {27,
     /* A no-op: its forms in builds never released did what 28 and 29 do. */
     "SELECT 1;"},
    {28,
     /* Whether a forward cut off by its destination's delete was replaced: set, by a replay
      * of its record that forwarded it to the destinations added since (sq_inbox_reforward),
      * on the forwards of deleted destinations made before, and read by sq_inbox_follow, which
      * took a forward made later than a cut one, even beside it (in the same receive, or by a
      * replay before its destination's delete), for its replacement and left records
      * completed. The rows already there: 29. */
     "ALTER TABLE deliveries ADD COLUMN replaced INTEGER NOT NULL DEFAULT 0;"},
    {29,
     /* For the rows already there: a forward of a deleted destination is replaced when a
      * forward of its event was made after the delete (by the clock: nothing else says so); a
      * cancelled one says why, as a delete writes it now; and the records a forward not
      * replaced holds are dead-lettered — left completed by the rule 28 replaces, or received
      * / retryable_failed by builds from before a cut-off forward counted as dead-lettered
      * (dead-lettered outranks them, as at run time). Only the records of sources that lost a
      * destination are looked at. Every statement may run again: a store that builds never
      * released took part of the way gets the rest. */
     "CREATE TEMP TABLE m29 AS SELECT event_seq FROM inbox WHERE event_seq IS NOT NULL"
     "  AND source_id IN (SELECT source_id FROM endpoints"
     "  WHERE source_id IS NOT NULL AND deleted_at IS NOT NULL);"
     "UPDATE deliveries SET replaced = 1 WHERE event_seq IN (SELECT event_seq FROM m29)"
     "  AND NOT replaced AND EXISTS (SELECT 1 FROM endpoints g"
     "  WHERE g.id = deliveries.endpoint_id AND g.deleted_at IS NOT NULL"
     "  AND EXISTS (SELECT 1 FROM deliveries y WHERE y.event_seq = deliveries.event_seq"
     "  AND y.seq > deliveries.seq AND y.created_at > g.deleted_at));"
     "UPDATE deliveries SET last_error = 'destination deleted'"
     "  WHERE event_seq IN (SELECT event_seq FROM m29) AND state = 'cancelled'"
     "  AND last_error IS NOT 'destination deleted' AND EXISTS (SELECT 1 FROM endpoints g"
     "  WHERE g.id = deliveries.endpoint_id AND g.deleted_at IS NOT NULL);"
     "UPDATE inbox SET status = 'dead_lettered', completed_at = NULL,"
     "  last_error = COALESCE((SELECT x.last_error FROM deliveries x"
     "  WHERE x.event_seq = inbox.event_seq AND (x.state = 'dead' OR x.state = 'cancelled')"
     "  AND NOT x.replaced ORDER BY x.updated_at DESC, x.seq DESC LIMIT 1), last_error)"
     "  WHERE event_seq IN (SELECT event_seq FROM m29)"
     "  AND (status = 'completed' OR status = 'received' OR status = 'retryable_failed')"
     "  AND EXISTS (SELECT 1 FROM deliveries x WHERE x.event_seq = inbox.event_seq"
     "  AND (x.state = 'dead' OR x.state = 'cancelled') AND NOT x.replaced);"
     /* and the dead-lettered ones name the forward that decides them, as at run time */
     "UPDATE inbox SET last_error = (SELECT x.last_error FROM deliveries x"
     "  WHERE x.event_seq = inbox.event_seq AND (x.state = 'dead' OR x.state = 'cancelled')"
     "  AND NOT x.replaced ORDER BY x.updated_at DESC, x.seq DESC LIMIT 1)"
     "  WHERE event_seq IN (SELECT event_seq FROM m29) AND status = 'dead_lettered'"
     "  AND EXISTS (SELECT 1 FROM deliveries x WHERE x.event_seq = inbox.event_seq"
     "  AND (x.state = 'dead' OR x.state = 'cancelled') AND NOT x.replaced);"
     "DROP TABLE m29;"},
    {30,
     /* The answers of API requests sent with an Idempotency-Key (the inbox's write routes): a
      * request sent again gets its first answer, kept in the transaction of what it changed.
      * scope: the API key that sent it; kept 24 hours (sq_answer_put drops older ones). */
     "CREATE TABLE api_answers ("
     "  scope TEXT NOT NULL,"
     "  key TEXT NOT NULL,"
     "  request_hash TEXT NOT NULL,"
     "  status INTEGER NOT NULL,"
     "  answer TEXT NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  PRIMARY KEY (scope, key)"
     ") WITHOUT ROWID;"
     "CREATE INDEX api_answers_created ON api_answers(created_at);"},
    {31,
     /* When each object's and each lane's newest version was raised: retention forgets an
      * object not updated for the inbox's retention, and a lane of expired events not raised
      * for the event retention (docs/inbound.md "Retention", docs/isolation.md). Rows there
      * already count from the upgrade. The lanes' index is made by their first purge (as
      * events_outbound): a store without event retention does not keep it at each publish. */
     "ALTER TABLE object_versions ADD COLUMN seen_at INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE lane_versions ADD COLUMN seen_at INTEGER NOT NULL DEFAULT 0;"
     "UPDATE object_versions SET seen_at = CAST((julianday('now') - 2440587.5) * 86400000"
     "  AS INTEGER);"
     "UPDATE lane_versions SET seen_at = CAST((julianday('now') - 2440587.5) * 86400000"
     "  AS INTEGER);"
     "CREATE INDEX object_versions_seen ON object_versions(seen_at);"},
    {32,
     /* An event's schema_version (O3) as published: the JSON text of a string or an integer
      * (kept as given, shown and sent as given); NULL when not given, and for inbound events. */
     "ALTER TABLE events ADD COLUMN schema_version TEXT;"},
    {33,
     /* A deleted tenant (DELETE /v1/tenants/{id}): gone wherever a tenant is named, its id
      * still taken; what it left is read by id until retention removes it. */
     "ALTER TABLE tenants ADD COLUMN deleted_at INTEGER;"},
    {34,
     /* A replay job over the events an endpoint never got (filter.state "missing"): the
      * endpoint its items go to; its items name events (delivery_seq, delivery_id hold the
      * event's seq and id until its delivery is made, then the delivery's). */
     "ALTER TABLE replay_jobs ADD COLUMN filter_endpoint TEXT;"},
    {35,
     /* Channels (docs/api.md "Endpoints"): an endpoint listing some receives only the events
      * published to one of them; comma-separated names, NULL = none. */
     "ALTER TABLE endpoints ADD COLUMN channels TEXT;"
     "ALTER TABLE events ADD COLUMN channels TEXT;"},
    {36,
     /* The API's own labels on endpoints and tenants (metadata: compact JSON, NULL = none). */
     "ALTER TABLE endpoints ADD COLUMN metadata TEXT;"
     "ALTER TABLE tenants ADD COLUMN metadata TEXT;"},
    {37,
     /* The catalog of event types (docs/api.md "Event types"): shared by every tenant; an
      * archived one stays for the events that name it. */
     "CREATE TABLE IF NOT EXISTS event_types ("
     "  name TEXT PRIMARY KEY,"
     "  description TEXT NOT NULL DEFAULT '',"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL,"
     "  archived_at INTEGER"
     ") WITHOUT ROWID;"},
    {38,
     /* A test event's endpoint (POST …/endpoints/{id}/test): it goes to that endpoint alone —
      * no "missing" replay job, republish or delivery by hand takes it elsewhere. */
     "ALTER TABLE events ADD COLUMN test_endpoint TEXT;"},
    {39,
     /* Bounded deletes (docs/architecture.md "Deletes"): a deleted endpoint whose deliveries are
      * not all cancelled yet is flagged, and the delete walk finds it by this index. */
     "ALTER TABLE endpoints ADD COLUMN cancel_pending INTEGER NOT NULL DEFAULT 0;"
     "CREATE INDEX endpoints_cancel_pending ON endpoints(id) WHERE cancel_pending = 1;"},
    {40,
     /* Payload filters (docs/api.md "Payload filters"): an endpoint takes only the events whose
      * payload matches its filter (compact JSON; NULL: every payload). */
     "ALTER TABLE endpoints ADD COLUMN payload_filter TEXT;"},
    {41,
     /* The master key the store's values are sealed with, by its id (a fingerprint): a start
      * given another is refused before it seals anything (docs/security.md "Keys at rest"). */
     "CREATE TABLE IF NOT EXISTS master_key ("
     "  one INTEGER PRIMARY KEY CHECK (one = 1),"
     "  key_id TEXT NOT NULL,"
     "  recorded_at INTEGER NOT NULL"
     ");"},
    {42,
     /* An inbox record reads dead_lettered only once each forward is settled (docs/inbound.md
      * "Inbox states"): the records stored so beside a forward still retried or waiting read as
      * that forward now, its error with them. It may run again. */
     "UPDATE inbox SET status = CASE WHEN EXISTS (SELECT 1 FROM deliveries x"
     "  WHERE x.event_seq = inbox.event_seq AND x.state = 'retrying' AND NOT x.replaced)"
     "  THEN 'retryable_failed' ELSE 'received' END,"
     "  last_error = (SELECT x.last_error FROM deliveries x WHERE x.event_seq = inbox.event_seq"
     "  AND (x.state = 'retrying' OR x.state = 'pending') AND NOT x.replaced"
     "  ORDER BY x.state = 'retrying' DESC, x.updated_at DESC, x.seq DESC LIMIT 1)"
     "  WHERE status = 'dead_lettered' AND EXISTS (SELECT 1 FROM deliveries x"
     "  WHERE x.event_seq = inbox.event_seq AND (x.state = 'retrying' OR x.state = 'pending')"
     "  AND NOT x.replaced);"},
    {43,
     /* The lists' ranges (docs/api.md "Inbox", "Deliveries"): a page is read from an index's
      * ranges, one per status or state, merged — not a walk of every record newest first. A
      * source's records by status, a provider's event id (partial: the records without one are
      * not in it), a tenant's and an endpoint's deliveries by state. Each is written at every
      * receive (the inbox's two) or delivery made, and moved by a change of status or state. */
     "CREATE INDEX IF NOT EXISTS inbox_source_status ON inbox(source_id, status, seq);"
     "CREATE INDEX IF NOT EXISTS inbox_provider_event ON inbox(provider_event_id)"
     "  WHERE provider_event_id IS NOT NULL;"
     "CREATE INDEX IF NOT EXISTS deliveries_tenant_state ON deliveries(tenant_id, state, id);"
     "CREATE INDEX IF NOT EXISTS deliveries_endpoint_state"
     "  ON deliveries(endpoint_id, state, id);"},
    {44,
     /* A replay job's moves (docs/replay.md "Taking back"): what each move changed in its
      * delivery, as it was, and the delivery's lease token after it — for a pause or a cancel
      * to put back a moved delivery not sent yet. made: the move made the delivery (a
      * `missing` job's), then deleted by a take-back; event_seq/event_id are what its item
      * named before. Purged with the job's items. */
     "CREATE TABLE IF NOT EXISTS replay_moves ("
     "  job_seq INTEGER NOT NULL,"
     "  n INTEGER NOT NULL,"
     "  delivery_seq INTEGER NOT NULL,"
     "  delivery_id TEXT NOT NULL,"
     "  token INTEGER NOT NULL,"
     "  attempts INTEGER NOT NULL,"
     "  made INTEGER NOT NULL DEFAULT 0,"
     "  event_seq INTEGER,"
     "  event_id TEXT,"
     "  state TEXT,"
     "  cycle_base INTEGER,"
     "  cycle_kind TEXT,"
     "  cycle_started_at INTEGER,"
     "  policy_id INTEGER,"
     "  next_attempt_at INTEGER,"
     "  dead_at INTEGER,"
     "  dead_reason TEXT,"
     "  delivered_at INTEGER,"
     "  PRIMARY KEY (job_seq, n)"
     ") WITHOUT ROWID;"},
    {45,
     /* The release's mark: the lease token of a claim given back unsent (sq_release_lease). A
      * replay job's take-back takes a delivery claimed since its move only when that claim was
      * given back so (docs/replay.md "Taking back"); a lease reclaimed, whose request may have
      * gone out, has no mark. */
     "ALTER TABLE deliveries ADD COLUMN released_token INTEGER;"},
    {46,
     /* A pause's or a cancel's take-back still to walk, from this item on (NULL: none), by the
      * replayer a chunk a step (docs/replay.md "Taking back", "In chunks"). */
     "ALTER TABLE replay_jobs ADD COLUMN back_from INTEGER;"},
    {47,
     /* The jobs with a take-back to walk, read at every replayer step: the rows marked, not
      * every job ever made (their rows stay, like the audit log). */
     "CREATE INDEX IF NOT EXISTS replay_jobs_back ON replay_jobs(seq)"
     "  WHERE back_from IS NOT NULL;"},
    {48,
     /* A running job held behind an endpoint that fell behind (docs/replay.md "Held behind an
      * endpoint"): which one, and since when (NULL: moving). Written by each step. */
     "ALTER TABLE replay_jobs ADD COLUMN held_endpoint TEXT;"
     "ALTER TABLE replay_jobs ADD COLUMN held_since INTEGER;"},
    {49,
     /* A running job's walk goes on past the items of an endpoint that fell behind (docs/replay.md
      * "Held behind an endpoint"): where it goes on (below it, next_item on: done or passed),
      * and the open items, an index of their own, which the walk and next_item are read from
      * (an item leaves it when decided: the items passed cost nothing to step over). */
     "ALTER TABLE replay_jobs ADD COLUMN scan_item INTEGER NOT NULL DEFAULT 1;"
     "CREATE INDEX IF NOT EXISTS replay_items_open ON replay_items(job_seq, n)"
     "  WHERE result IS NULL;"},
    {50,
     /* An event type's JSON Schemas by version (docs/api.md "Event types"): compact JSON,
      * NULL = none. */
     "ALTER TABLE event_types ADD COLUMN schemas TEXT;"},
    {51,
     /* A key that expires (docs/api.md "API keys", "Portal access"): NULL = never. */
     "ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;"
     "CREATE INDEX IF NOT EXISTS api_keys_expiry ON api_keys(expires_at)"
     "  WHERE expires_at IS NOT NULL;"},
    {52,
     /* The store's heartbeat (docs/architecture.md "Clocks"): the main loop's stamp, every
      * minute and at a clean stop; a start reads how long hookd did not run. */
     "CREATE TABLE IF NOT EXISTS heartbeat ("
     "  one INTEGER PRIMARY KEY CHECK (one = 1),"
     "  at INTEGER NOT NULL"
     ");"},
    {53,
     /* The change stamps of the API keys and of the sources (docs/architecture.md "Shutdown"):
      * moved in the transaction of any change to their table, whoever writes it (the API, the
      * CLI, a retention walk, a hand edit), so that the periodic reload reads a table again
      * only when it changed. */
     "CREATE TABLE IF NOT EXISTS config_stamps ("
     "  what TEXT PRIMARY KEY,"
     "  n INTEGER NOT NULL"
     ") WITHOUT ROWID;"
     "INSERT OR IGNORE INTO config_stamps(what, n) VALUES ('api_keys', 0), ('sources', 0);"
     "CREATE TRIGGER IF NOT EXISTS api_keys_stamp_insert AFTER INSERT ON api_keys BEGIN"
     "  UPDATE config_stamps SET n = n + 1 WHERE what = 'api_keys'; END;"
     "CREATE TRIGGER IF NOT EXISTS api_keys_stamp_update AFTER UPDATE ON api_keys BEGIN"
     "  UPDATE config_stamps SET n = n + 1 WHERE what = 'api_keys'; END;"
     "CREATE TRIGGER IF NOT EXISTS api_keys_stamp_delete AFTER DELETE ON api_keys BEGIN"
     "  UPDATE config_stamps SET n = n + 1 WHERE what = 'api_keys'; END;"
     "CREATE TRIGGER IF NOT EXISTS sources_stamp_insert AFTER INSERT ON sources BEGIN"
     "  UPDATE config_stamps SET n = n + 1 WHERE what = 'sources'; END;"
     "CREATE TRIGGER IF NOT EXISTS sources_stamp_update AFTER UPDATE ON sources BEGIN"
     "  UPDATE config_stamps SET n = n + 1 WHERE what = 'sources'; END;"
     "CREATE TRIGGER IF NOT EXISTS sources_stamp_delete AFTER DELETE ON sources BEGIN"
     "  UPDATE config_stamps SET n = n + 1 WHERE what = 'sources'; END;"},
    {54,
     /* An attempt's response excerpt may be erased — its event's payload deleted on demand
      * (docs/api.md): a receiver may have echoed the payload in its answer —, nothing else of
      * an attempt changes (every other column compared: a column added to attempts later is to
      * be added here too). */
     "DROP TRIGGER IF EXISTS attempts_no_update;"
     "CREATE TRIGGER attempts_no_update BEFORE UPDATE ON attempts"
     "  WHEN NOT (NEW.response IS NULL AND NEW.delivery_seq IS OLD.delivery_seq"
     "    AND NEW.attempt_number IS OLD.attempt_number AND NEW.started_at IS OLD.started_at"
     "    AND NEW.finished_at IS OLD.finished_at AND NEW.outcome IS OLD.outcome"
     "    AND NEW.http_status IS OLD.http_status AND NEW.latency_ms IS OLD.latency_ms"
     "    AND NEW.error IS OLD.error AND NEW.lease_token IS OLD.lease_token"
     "    AND NEW.kind IS OLD.kind AND NEW.url IS OLD.url)"
     "  BEGIN SELECT RAISE(ABORT, 'attempts are append-only (but an erased excerpt)'); END;"},
    {55,
     /* The URL walk (docs/architecture.md "Deletes"): a deleted endpoint's attempts' URLs cut to
      * their origin (a path or query may hold a credential), reached through its tenant's
      * deliveries by id; a tenant's cursor here. An attempt's URL may become its origin as its
      * response excerpt may become NULL — nothing else of it changes (every other column
      * compared: a column added to attempts later is to be added here too). The endpoints
      * deleted before: their URLs cut now, their attempts' by the first start's walk. */
     "CREATE TABLE IF NOT EXISTS url_cuts ("
     "  tenant_id TEXT PRIMARY KEY,"
     "  after TEXT NOT NULL,"     /* the cursor: the last delivery id done */
     "  again INTEGER NOT NULL,"  /* another pass owed (a delete during this one) */
     "  turn INTEGER NOT NULL,"   /* the tenants take turns, a step each */
     "  cut INTEGER NOT NULL"     /* attempts cut so far */
     ") WITHOUT ROWID;"
     "INSERT OR IGNORE INTO url_cuts(tenant_id, after, again, turn, cut)"
     "  SELECT DISTINCT tenant_id, '', 0, 0, 0 FROM endpoints WHERE deleted_at IS NOT NULL;"
     "UPDATE endpoints SET url = " SQ_URL_ORIGIN("url") " WHERE deleted_at IS NOT NULL"
     "  AND url IS NOT " SQ_URL_ORIGIN("url") ";"
     "DROP TRIGGER IF EXISTS attempts_no_update;"
     "CREATE TRIGGER attempts_no_update BEFORE UPDATE ON attempts"
     "  WHEN NOT ((NEW.response IS NULL OR NEW.response IS OLD.response)"
     "    AND (NEW.url IS OLD.url OR NEW.url IS " SQ_URL_ORIGIN("OLD.url") ")"
     "    AND NEW.delivery_seq IS OLD.delivery_seq"
     "    AND NEW.attempt_number IS OLD.attempt_number AND NEW.started_at IS OLD.started_at"
     "    AND NEW.finished_at IS OLD.finished_at AND NEW.outcome IS OLD.outcome"
     "    AND NEW.http_status IS OLD.http_status AND NEW.latency_ms IS OLD.latency_ms"
     "    AND NEW.error IS OLD.error AND NEW.lease_token IS OLD.lease_token"
     "    AND NEW.kind IS OLD.kind)"
     "  BEGIN SELECT RAISE(ABORT, 'attempts are append-only (but an erased excerpt, a URL cut"
     " to its origin)'); END;"},
    {56,
     /* When an endpoint was last disabled, by its answers or an operator (docs/api.md
      * "Endpoints"): NULL while enabled. The ones disabled before: their last change's time,
      * the nearest known. */
     "ALTER TABLE endpoints ADD COLUMN disabled_at INTEGER;"
     "UPDATE endpoints SET disabled_at = updated_at WHERE enabled = 0 AND deleted_at IS NULL;"},
    {57,
     /* A delivery's replay-job moves, found by the delivery: an operator's replay by hand drops
      * them (sq_retry_now) — without it, that statement read every move of a week's jobs on
      * the writer. */
     "CREATE INDEX IF NOT EXISTS replay_moves_delivery ON replay_moves(delivery_seq);"},
    {58,
     /* What an endpoint is sent (docs/api.md "Endpoints", body_format): the envelope, or its
      * data alone — Svix's message as published, for receivers migrated from it. */
     "ALTER TABLE endpoints ADD COLUMN body_format TEXT NOT NULL DEFAULT 'envelope';"},
};

/* A query answering non-zero when migration `version`'s change is there already (a store whose
 * schema_migrations was restored from a backup older than its tables): it is then recorded, not
 * run again. For changes SQLite cannot write as IF NOT EXISTS, such as ADD COLUMN. */
static const char *migration_done_if(int version) {
  switch (version) {
  case 15:
    return "SELECT COUNT(*) FROM pragma_table_info('replay_items')"
           " WHERE name = 'lease_token'";
  case 18:
    return "SELECT COUNT(*) FROM pragma_table_info('sources')"
           " WHERE name = 'prior_identity_paths'";
  case 19:
    return "SELECT COUNT(*) FROM pragma_table_info('endpoints') WHERE name = 'paused_until'";
  case 20:
    return "SELECT COUNT(*) FROM pragma_table_info('sources') WHERE name = 'business_types'";
  case 21:
    return "SELECT COUNT(*) FROM pragma_table_info('endpoints') WHERE name = 'health_since'";
  case 22:
    return "SELECT COUNT(*) FROM pragma_table_info('deliveries') WHERE name = 'lane_passed_by'";
  case 23:
    return "SELECT COUNT(*) FROM pragma_table_info('deliveries') WHERE name = 'sent_token'";
  case 24:
    return "SELECT COUNT(*) FROM pragma_table_info('attempts') WHERE name = 'url'";
  case 25:
    return "SELECT COUNT(*) FROM pragma_table_info('deliveries') WHERE name = 'last_ambiguous'";
  case 26:
    return "SELECT COUNT(*) FROM pragma_table_info('endpoints') WHERE name = 'headers'";
  case 28:
    return "SELECT COUNT(*) FROM pragma_table_info('deliveries') WHERE name = 'replaced'";
  case 30:
    return "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'api_answers'";
  case 31:
    return "SELECT COUNT(*) FROM pragma_table_info('object_versions') WHERE name = 'seen_at'";
  case 32:
    return "SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'schema_version'";
  case 33:
    return "SELECT COUNT(*) FROM pragma_table_info('tenants') WHERE name = 'deleted_at'";
  case 34:
    return "SELECT COUNT(*) FROM pragma_table_info('replay_jobs') WHERE name = 'filter_endpoint'";
  case 35:
    return "SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'channels'";
  case 36:
    return "SELECT COUNT(*) FROM pragma_table_info('tenants') WHERE name = 'metadata'";
  case 37:
    return "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'event_types'";
  case 38:
    return "SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'test_endpoint'";
  case 39:
    return "SELECT COUNT(*) FROM pragma_table_info('endpoints') WHERE name = 'cancel_pending'";
  case 40:
    return "SELECT COUNT(*) FROM pragma_table_info('endpoints') WHERE name = 'payload_filter'";
  case 45:
    return "SELECT COUNT(*) FROM pragma_table_info('deliveries') WHERE name = 'released_token'";
  case 46:
    return "SELECT COUNT(*) FROM pragma_table_info('replay_jobs') WHERE name = 'back_from'";
  case 48: /* (both columns in one transaction: one there, both are) */
    return "SELECT COUNT(*) FROM pragma_table_info('replay_jobs') WHERE name = 'held_endpoint'";
  case 49: /* (the index is IF NOT EXISTS: with the column, both are there) */
    return "SELECT COUNT(*) FROM pragma_table_info('replay_jobs') WHERE name = 'scan_item'";
  case 50:
    return "SELECT COUNT(*) FROM pragma_table_info('event_types') WHERE name = 'schemas'";
  case 51:
    return "SELECT COUNT(*) FROM pragma_table_info('api_keys') WHERE name = 'expires_at'";
  case 56:
    return "SELECT COUNT(*) FROM pragma_table_info('endpoints') WHERE name = 'disabled_at'";
  case 58:
    return "SELECT COUNT(*) FROM pragma_table_info('endpoints') WHERE name = 'body_format'";
  default: return NULL;
  }
}

int sq_recover(hookd_store_conn *c) {
  /* (the daemon's start does the same, waiting for other processes: sq_migrate) the caller holds
   * the store's lock, so no daemon runs on it; a CLI reader may, and then this is tried once */
  sqlite3_busy_timeout(c->db, 1000);
  int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
  sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
  if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
    return sq_fail(c, "checkpoint the WAL left by the last run");
  return HOOKD_STORE_OK;
}

/* The store's directory synced: the names of the database (a new store's) and of the WAL this
 * start made reach the disk. SQLite syncs the directory as it makes the WAL but ignores a
 * failure there by design, and a WAL whose name never reached the disk takes every commit in it
 * with it at a power cut (a review). A failure stops the start, as a failing disk. */
static int sync_dir(hookd_store_conn *c) {
  const char *db = sqlite3_db_filename(c->db, "main");
  if (!db || !*db) return HOOKD_STORE_OK; /* (an in-memory database: tests) */
  char dir[1100];
  snprintf(dir, sizeof dir, "%s", db);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else slash[slash == dir] = '\0'; /* ("/x.db": the root) */
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return HOOKD_STORE_OK; /* (not openable, as SQLite's own: no sync to ask for) */
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  /* a file system whose directories take no sync (EINVAL: a VM's shared folder) has nothing to
   * lose there; SQLite and PostgreSQL go on so too (a review) */
  if (rc == 0 || e == EINVAL || e == EBADF || e == ENOTSUP) return HOOKD_STORE_OK;
  char eb[128];
  snprintf(c->err, sizeof c->err, "sync the store's directory %s: %s", dir,
           strerror_r(e, eb, sizeof eb));
  return HOOKD_STORE_ERR;
}

/* How long a start waits for other processes to let go of the store before copying the WAL. */
#define STARTUP_CKPT_S 30

int sq_first_sealed(hookd_store_conn *c, char id[17]) {
  for (size_t i = 0; i < HOOKD_SEALED_COLUMNS; i++) {
    char sql[160];
    hookd_sealed_column_sql(i, sql, sizeof sql);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) { /* not in this version */
      sqlite3_finalize(st);
      continue;
    }
    int rc = sqlite3_step(st);
    const char *v = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    bool found = v && hookd_sealed_key_id(v, id) == 0;
    sqlite3_finalize(st);
    if (found) return 1;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "read a sealed value");
  }
  return 0;
}

int sq_migrate(hookd_store_conn *c, bool apply, bool (*stop)(void),
               void (*migrating)(int64_t from, int64_t to), int64_t *from, int64_t *to) {
  if (apply) {
    /* A daemon starting: the WAL its last run left (after a crash) is copied into the database
     * and synced, and starts over, before anything new is written. Its frames were read back
     * through the OS's cache, and after the failed fsync a last run may have exited on, some may
     * never have reached the disk: commits appended behind them would go with them at a power
     * cut, as WAL recovery stops at the first bad frame. Another process on the store (a CLI
     * command reading it) only delays it: each try waits out the busy timeout, for up to
     * STARTUP_CKPT_S in all — writing behind those frames is not an option (it was taken
     * before an audit). A failure to write is a failing disk, and nothing is started on it. */
    int64_t until = hookd_mono_ms() + STARTUP_CKPT_S * 1000;
    int rc;
    /* each try waits in SQLite's busy handler, a quarter of a second here so that a stop asked
     * for meanwhile (SIGTERM from a supervisor) is heard at once; one answered BUSY at once (a
     * lock it does not wait on) is tried again after a nap, not in a loop that spins */
    sqlite3_busy_timeout(c->db, 250);
    for (;;) {
      rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
      if (((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) ||
          hookd_mono_ms() >= until)
        break;
      if (stop && stop()) {
        sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
        snprintf(c->err, sizeof c->err, "stopped while another process held the store");
        return HOOKD_STORE_STOPPED;
      }
      sqlite3_sleep(100);
    }
    sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
      snprintf(c->err, sizeof c->err,
               "another process has held the store for %d s: the WAL the last run left must be "
               "copied into the database before anything is written (stop that process, or "
               "start again later)", STARTUP_CKPT_S);
      return HOOKD_STORE_ERR;
    }
    if (rc != SQLITE_OK) return sq_fail(c, "checkpoint the WAL left by the last run");
    if (sync_dir(c) != HOOKD_STORE_OK) return HOOKD_STORE_ERR;
  }
  /* a command that does not migrate writes nothing: no table made in a store that has none */
  if (!apply && sqlite3_table_column_metadata(c->db, NULL, "schema_migrations", "version", NULL,
                                              NULL, NULL, NULL, NULL) != SQLITE_OK) {
    snprintf(c->err, sizeof c->err,
             "no hookd schema in this database: start `hookd serve` on it once before using "
             "this command");
    return HOOKD_STORE_ERR;
  }
  if (apply && sq_exec(c, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                          " version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)") != 0)
    return HOOKD_STORE_ERR;
  int64_t current = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(c->db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", -1,
                         &st, NULL) != SQLITE_OK)
    return sq_fail(c, "read schema version");
  if (sqlite3_step(st) == SQLITE_ROW) current = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);

  int latest = migrations[sizeof migrations / sizeof migrations[0] - 1].version;
  *from = *to = current;
  if (current > latest) {
    snprintf(c->err, sizeof c->err,
             "database schema version %lld is newer than this hookd's (%d): use a hookd of "
             "that version or later on it",
             (long long)current, latest);
    return HOOKD_STORE_ERR;
  }
  if (!apply && current < latest) {
    snprintf(c->err, sizeof c->err,
             "database schema version %lld is older than this hookd's (%d): start `hookd serve` "
             "of this version on it once (it migrates the store) before using this command",
             (long long)current, latest);
    return HOOKD_STORE_ERR;
  }
  if (migrating && current > 0 && current < latest) migrating(current, latest);
  for (size_t i = 0; i < sizeof migrations / sizeof migrations[0]; i++) {
    if (migrations[i].version <= current) continue;
    if (sq_exec(c, "BEGIN IMMEDIATE") != 0) return HOOKD_STORE_ERR;
    char record[128];
    snprintf(record, sizeof record,
             "INSERT INTO schema_migrations(version, applied_at) VALUES (%d, %lld)",
             migrations[i].version, (long long)hookd_now_ms());
    int done = 0;
    const char *done_if = migration_done_if(migrations[i].version);
    if (done_if) {
      if (sqlite3_prepare_v2(c->db, done_if, -1, &st, NULL) != SQLITE_OK) {
        sq_fail(c, "check a migration");
        sq_exec(c, "ROLLBACK");
        return HOOKD_STORE_ERR;
      }
      if (sqlite3_step(st) == SQLITE_ROW) done = sqlite3_column_int(st, 0) != 0;
      sqlite3_finalize(st);
    }
    if ((!done && sq_exec(c, migrations[i].sql) != 0) || sq_exec(c, record) != 0) {
      char keep[256];
      snprintf(keep, sizeof keep, "migration %d: %s", migrations[i].version, c->err);
      sq_exec(c, "ROLLBACK");
      snprintf(c->err, sizeof c->err, "%s", keep);
      return HOOKD_STORE_ERR;
    }
    if (sq_exec(c, "COMMIT") != 0) return HOOKD_STORE_ERR;
    *to = migrations[i].version;
    /* a stop asked for meanwhile ends the start here, the migrations done so far kept (each
     * with its version: the next start goes on from it) */
    if (*to < latest && stop && stop()) {
      snprintf(c->err, sizeof c->err,
               "stopped while migrating the store, at version %lld of %lld (the next start "
               "finishes it)", (long long)*to, (long long)latest);
      return HOOKD_STORE_STOPPED;
    }
  }
  return HOOKD_STORE_OK;
}
