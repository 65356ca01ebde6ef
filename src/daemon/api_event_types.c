/* api_event_types.c — the catalog of event types (docs/api.md "Event types"), shared by every
 * tenant:
 *   POST   /v1/event-types {name, description?, schemas?}     (admin of every tenant)
 *   GET    /v1/event-types?include_archived=true&with_content=false&limit=&after=
 *                                             (any reader; by name)
 *   GET    /v1/event-types/{name}
 *   PATCH  /v1/event-types/{name} {description?, schemas?, archived?}
 *   DELETE /v1/event-types/{name} {reason?}            archives it
 * schemas: the payload's JSON Schemas by schema version, kept (compact) for docs and portals,
 * neither checked as JSON Schema nor applied to what is published (as Svix's).
 * While it holds a type not archived, an endpoint's event_types patterns must each match one
 * (api_endpoints.c asks the store's event_types_check). */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/shown_text.h"
#include "daemon/api.h"

typedef struct et_op {
  hookd_api_op base;
  hookd_event_type t;          /* create: borrowed strings; update: the row (owned) */
  char name[272], description[1040];
  char *schemas;               /* the body's, compact ("" clears); NULL: not given */
  bool has_description, loaded, archived_too, with_content;
  int limit;                   /* list: a page's; one more is read to know there is more */
  int archived;                /* update: -1 kept, 0, 1 */
  hookd_event_type *list;
  size_t n;
} et_op;

/* frees the row read (a redone batch reads it again) */
static void et_unload(et_op *op) {
  if (op->loaded) {
    free(op->t.name);
    free(op->t.description);
    free(op->t.schemas);
    op->loaded = false;
  }
}

static void et_cleanup(hookd_api_op *base) {
  et_op *op = (et_op *)base;
  et_unload(op);
  free(op->schemas);
  if (op->list) hookd_event_types_free(op->list, op->n);
}

/* the type as answered; its schemas left out when !with_schemas */
static json_t *et_json(const hookd_event_type *t, bool with_schemas) {
  json_t *v = json_pack("{s:s,s:s,s:b,s:o,s:o}", "name", t->name, "description",
                        t->description ? t->description : "", "archived", t->archived_ms != 0,
                        "created_at", hookd_json_time(t->created_ms), "updated_at",
                        hookd_json_time(t->updated_ms));
  if (v && with_schemas) {
    json_t *s = t->schemas ? json_loads(t->schemas, 0, NULL) : NULL;
    if (!json_is_object(s)) { /* (none) */
      json_decref(s);
      s = json_object();
    }
    json_object_set_new(v, "schemas", s);
  }
  return v;
}

/* body's schemas into op->schemas (absent: NULL; null or {}: ""); false once answered */
static bool take_schemas(hookd_req *r, const json_t *body, et_op *op) {
  const json_t *v = json_object_get(body, "schemas");
  if (!v) return true;
  if (!json_is_null(v)) {
    bool ok = json_is_object(v) && json_object_size(v) <= 16;
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
      if (!ok) break;
      if (!hookd_id_valid(k, 64)) {
        hookd_req_field_error(r, 422, "invalid_field", "schemas",
                              "schemas' names are schema versions, as an event's "
                              "schema_version: 1-64 of letters, digits, '_', '-', '.', ':'");
        return false;
      }
      if (!json_is_object(x) && !json_is_boolean(x)) {
        char field[80];
        snprintf(field, sizeof field, "schemas.%s", k);
        hookd_req_field_error(r, 422, "invalid_field", field,
                              "%s must be a JSON Schema: an object or a boolean", field);
        return false;
      }
    }
    if (!ok) {
      hookd_req_field_error(r, 422, "invalid_field", "schemas",
                            "schemas must be null or an object of at most 16 schema versions, "
                            "each a JSON Schema");
      return false;
    }
  }
  op->schemas = json_is_object(v) && json_object_size(v) ? json_dumps(v, JSON_COMPACT)
                                                           : strdup("");
  if (!op->schemas) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return false;
  }
  size_t len = strlen(op->schemas);
  if (len > 65536) {
    hookd_req_field_error(r, 422, "invalid_field", "schemas",
                          "schemas are %zu bytes as compact JSON: at most 65536 together", len);
    return false;
  }
  return true;
}

/* Writes are a key of every tenant's: the catalog is every tenant's. */
static bool every_tenant(hookd_req *r) {
  const hookd_principal *p = hookd_api_principal(r);
  if (p && p->tenants[0]) {
    hookd_api_forbid(r, "the event-type catalog is shared by every tenant: an API key of every "
                        "tenant changes it");
    return false;
  }
  return true;
}

/* body's description into op (absent: not given); false once answered */
static bool take_description(hookd_req *r, const json_t *body, et_op *op) {
  const char *d = NULL;
  int rc = hookd_json_get_str(body, "description", &d);
  if (rc < 0 || (d && (strlen(d) > 1024 || !hookd_shown_text_ok(d, true, NULL)))) {
    hookd_req_field_error(r, 422, "invalid_field", "description",
                          "description must be a string of at most 1024 bytes, without control "
                          "characters but tabs and line feeds");
    return false;
  }
  op->has_description = rc == 0;
  snprintf(op->description, sizeof op->description, "%s", d ? d : "");
  return true;
}

/* ---------- create ---------- */

static int run_create(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  et_op *op = (et_op *)base;
  int rc = be->event_type_create(c, &op->t);
  if (rc == HOOKD_STORE_EXISTS)
    snprintf(base->err, sizeof base->err, "event type %.256s is in the catalog already%s",
             op->name, " (an archived one: PATCH it with archived false)");
  return rc ? rc : hookd_api_audit(base, c, be, "event_type.create", op->name, NULL, NULL);
}

static void reply_create(hookd_api_op *base, int rc) {
  et_op *op = (et_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "event type");
    return;
  }
  hookd_req_reply_json(base->req, 201, et_json(&op->t, true));
}

void hookd_api_event_type_create(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"name", "description", "schemas", NULL};
  if (!every_tenant(r)) return;
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  et_op *op = NULL;
  const char *name = NULL;
  if (!hookd_api_known_members(r, body, NULL, names)) goto done;
  if (hookd_json_get_str(body, "name", &name) != 0 || !hookd_id_valid(name, 256)) {
    bool given = json_object_get(body, "name") != NULL; /* (given: "inv.*" read as missing) */
    hookd_req_field_error(r, 422, given ? "invalid_field" : "missing_field", "name",
                          "name %s 1-256 characters of letters, digits, '_', '-', "
                          "'.', ':' (as an event's type)",
                          given ? "must be" : "is required:");
    goto done;
  }
  if (!(op = hookd_api_op_new(sizeof *op, r, app, run_create, reply_create))) goto done;
  op->base.cleanup = et_cleanup;
  if (!take_description(r, body, op) || !take_schemas(r, body, op)) {
    free(op->schemas);
    free(op);
    goto done;
  }
  snprintf(op->name, sizeof op->name, "%s", name);
  op->t.name = op->name;
  op->t.description = op->description;
  op->t.schemas = op->schemas; /* ("": none) */
  op->t.created_ms = op->t.updated_ms = hookd_now_ms();
  hookd_api_submit(&op->base, true);
done:
  json_decref(body);
}

/* ---------- list ---------- */

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  et_op *op = (et_op *)base;
  int rc = hookd_api_after_known(base, c, be, -1, NULL, op->name);
  if (rc) return rc;
  return be->event_type_list(c, op->archived_too, op->with_content, op->name, op->limit + 1,
                             &op->list, &op->n);
}

static void reply_list(hookd_api_op *base, int rc) {
  et_op *op = (et_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "event types");
    return;
  }
  size_t shown = op->n > (size_t)op->limit ? (size_t)op->limit : op->n;
  json_t *data = json_array();
  for (size_t i = 0; i < shown; i++)
    json_array_append_new(data, et_json(&op->list[i], op->with_content));
  const char *next = op->n > shown ? op->list[shown - 1].name : NULL;
  hookd_req_reply_json(base->req, 200, hookd_api_page_body(data, next));
}

void hookd_api_event_type_list(hookd_req *r, hookd_app *app) {
  const char *arch = hookd_req_query(r, "include_archived");
  const char *content = hookd_req_query(r, "with_content");
  const char *bad = arch && strcmp(arch, "true") && strcmp(arch, "false") ? "include_archived"
                    : content && strcmp(content, "true") && strcmp(content, "false")
                        ? "with_content"
                        : NULL;
  if (bad) {
    hookd_req_field_error(r, 400, "invalid_parameter", bad, "%s must be true or false", bad);
    return;
  }
  int limit = hookd_api_limit(r, 50, 500);
  if (limit < 0) return;
  const char *after = hookd_req_query(r, "after");
  if (after && !hookd_id_valid(after, 256)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "after",
                          "after must be a next_cursor of this list: an event type's name");
    return;
  }
  et_op *op = hookd_api_op_new(sizeof *op, r, app, run_list, reply_list);
  if (!op) return;
  op->base.cleanup = et_cleanup;
  op->limit = limit;
  snprintf(op->name, sizeof op->name, "%s", after ? after : "");
  op->archived_too = arch && !strcmp(arch, "true");
  op->with_content = !content || !strcmp(content, "true");
  hookd_api_submit(&op->base, false);
}

/* ---------- get one ---------- */

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  et_op *op = (et_op *)base;
  et_unload(op);
  int rc = be->event_type_get(c, op->name, &op->t);
  op->loaded = rc == 0;
  return rc;
}

/* ---------- update, archive ---------- */

static int run_update(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  et_op *op = (et_op *)base;
  et_unload(op);
  int changed;
  int rc = be->event_type_update(c, op->name, op->has_description ? op->description : NULL,
                                 op->schemas, op->archived, hookd_now_ms(), &op->t, &changed);
  op->loaded = rc == 0;
  if (rc || !changed) return rc; /* (as it was: the same answer, nothing audited again) */
  return hookd_api_audit(base, c, be, changed == 1 ? "event_type.archive" : "event_type.update",
                         op->name, NULL, NULL);
}

static void reply_update(hookd_api_op *base, int rc) {
  et_op *op = (et_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "event type");
    return;
  }
  hookd_req_reply_json(base->req, 200, et_json(&op->t, true));
}

static void submit_update(hookd_req *r, hookd_app *app, et_op *op, bool write) {
  op->base.cleanup = et_cleanup;
  snprintf(op->name, sizeof op->name, "%s", hookd_req_param(r, 0));
  hookd_api_submit(&op->base, write);
}

void hookd_api_event_type_get(hookd_req *r, hookd_app *app) {
  et_op *op = hookd_api_op_new(sizeof *op, r, app, run_get, reply_update);
  if (op) submit_update(r, app, op, false);
}

void hookd_api_event_type_patch(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"description", "schemas", "archived", NULL};
  if (!every_tenant(r)) return;
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  et_op *op = NULL;
  bool archived = false;
  int arc = hookd_json_get_bool(body, "archived", &archived);
  if (!hookd_api_known_members(r, body, NULL, names)) goto done;
  if (arc < 0 || json_is_null(json_object_get(body, "archived"))) {
    hookd_req_field_error(r, 422, "invalid_field", "archived", "archived must be a boolean");
    goto done;
  }
  if (json_is_null(json_object_get(body, "description"))) {
    hookd_req_field_error(r, 422, "invalid_field", "description",
                          "description may not be null (\"\" clears it)");
    goto done;
  }
  if (!(op = hookd_api_op_new(sizeof *op, r, app, run_update, reply_update))) goto done;
  if (!take_description(r, body, op) || !take_schemas(r, body, op)) {
    free(op->schemas);
    free(op);
    goto done;
  }
  op->archived = arc == 0 ? archived : -1;
  submit_update(r, app, op, true);
done:
  json_decref(body);
}

void hookd_api_event_type_delete(hookd_req *r, hookd_app *app) {
  char reason[256]; /* a reason in the body, as every other DELETE takes one */
  if (!every_tenant(r) || !hookd_api_reason_only_body(r, app, reason)) return;
  et_op *op = hookd_api_op_new(sizeof *op, r, app, run_update, reply_update);
  if (!op) return;
  if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  op->archived = 1;
  submit_update(r, app, op, true);
}
