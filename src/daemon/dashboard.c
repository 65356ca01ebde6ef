/* dashboard.c — serves the operator dashboard (docs/dashboard.md): GET /dashboard is its page,
 * GET /dashboard/{file} its script and style. Public like /healthz — the files hold no data and
 * no secret; the page calls the API with the key the operator types — and locked down by a
 * Content-Security-Policy that allows nothing but this origin's own files and API. */
#include "daemon/dashboard.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/api.h"

const hookd_asset *hookd_dashboard_find(const char *name) {
  for (const hookd_asset *a = hookd_dashboard_assets; a->name; a++)
    if (!strcmp(a->name, name)) return a;
  return NULL;
}

/* NULL for a name of no type the dashboard serves */
static const char *content_type(const char *name) {
  const char *dot = strrchr(name, '.');
  if (!dot) return NULL;
  if (!strcmp(dot, ".js")) return "text/javascript; charset=utf-8";
  if (!strcmp(dot, ".css")) return "text/css; charset=utf-8";
  if (!strcmp(dot, ".html")) return "text/html; charset=utf-8";
  return NULL;
}

static void serve(hookd_req *r, hookd_app *app, const char *name) {
  const hookd_asset *a = hookd_dashboard_find(name);
  if (!a || !content_type(name)) {
    hookd_req_error(r, 404, "not_found", "no dashboard file %.64s", name);
    return;
  }
  char *body = malloc(a->len ? a->len : 1);
  if (!body) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return;
  }
  memcpy(body, a->data, a->len);
  /* framed by no page, but the origins --dashboard-frame-ancestors names (a portal embedded in
   * the platform's own app: checked at start to be origins alone) */
  const char *ancestors = app->cfg->frame_ancestors[0] ? app->cfg->frame_ancestors : "'none'";
  char csp[768];
  snprintf(csp, sizeof csp,
           "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
           "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors %s",
           ancestors);
  hookd_req_add_header(r, "Content-Security-Policy", csp);
  hookd_req_add_header(r, "X-Content-Type-Options", "nosniff");
  hookd_req_add_header(r, "Referrer-Policy", "no-referrer");
  /* (X-Frame-Options names no origin list: left out when frames are allowed, as the CSP says
   * which — browsers take frame-ancestors over it) */
  if (!app->cfg->frame_ancestors[0]) hookd_req_add_header(r, "X-Frame-Options", "DENY");
  /* a new hookd's page is served at once (the files are small) */
  hookd_req_add_header(r, "Cache-Control", "no-cache");
  hookd_req_reply(r, 200, content_type(name), body, a->len);
}

void hookd_api_dashboard(hookd_req *r, hookd_app *app) {
  serve(r, app, "index.html");
}

/* /dashboard/ and /dashboard/index.html: the page is /dashboard itself, one address (its
 * files' relative paths resolve there) — a redirect, not a 404 (a review: a bookmark or a
 * typed trailing slash met a JSON error) */
void hookd_api_dashboard_home(hookd_req *r, hookd_app *app) {
  (void)app;
  hookd_req_add_header(r, "Location", "/dashboard");
  hookd_req_reply(r, 308, NULL, NULL, 0);
}

void hookd_api_dashboard_file(hookd_req *r, hookd_app *app) {
  const char *name = hookd_req_param(r, 0);
  if (!strcmp(name, "index.html")) {
    hookd_api_dashboard_home(r, app);
    return;
  }
  serve(r, app, name);
}
