/* sources.c — the inbound source cache (see sources.h). */
#include "daemon/sources.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/secretbox.h"
#include "core/strmap.h"
#include "daemon/log.h"

struct hookd_source_cache {
  const hookd_keyring *keyring;
  pthread_rwlock_t lock;
  hookd_strmap map;  /* id → hookd_source_rt* */
  hookd_strmap tomb; /* id → generation of its removal (as a pointer), until a sync has seen it */
  uint64_t gen;      /* under lock */
};

static void rt_free(hookd_source_rt *rt) {
  for (size_t i = 0; i < rt->n_secrets; i++) hookd_secret_free(rt->secrets[i]);
  free(rt->secrets);
  free(rt->secret_expires_ms);
  json_decref(rt->generic_json);
  hookd_source_free(&rt->src);
  free(rt);
}

void hookd_source_rt_release(hookd_source_rt *rt) {
  if (rt && atomic_fetch_sub(&rt->refs, 1) == 1) rt_free(rt);
}

const char *hookd_generic_parse(const json_t *v, hookd_generic_hmac *g) {
  memset(g, 0, sizeof *g);
  if (!json_is_object(v)) return "generic must be an object";
  const char *alg = "sha256", *enc = "hex";
  if (hookd_json_get_str(v, "algorithm", &alg) < 0) return "generic.algorithm is invalid";
  bool basic = !strcasecmp(alg, "basic"), token = !strcasecmp(alg, "token");
  int hrc = hookd_json_get_str(v, "header", &g->header);
  if (basic && hrc == 1) g->header = "Authorization"; /* (absent: Basic's own) */
  else if (hrc != 0 || !*g->header) return "generic.header is missing or invalid";
  if (basic && strcasecmp(g->header, "Authorization"))
    return "generic.header must be Authorization (or absent) with algorithm basic";
  if (hookd_json_get_str(v, "prefix", &g->prefix) < 0) return "generic.prefix is invalid";
  if (hookd_json_get_str(v, "encoding", &enc) < 0) return "generic.encoding is invalid";
  if (hookd_json_get_str(v, "template", &g->template) < 0) return "generic.template is invalid";
  if (hookd_json_get_str(v, "id_header", &g->id_header) < 0) return "generic.id_header is invalid";
  if (hookd_json_get_str(v, "timestamp_header", &g->timestamp_header) < 0)
    return "generic.timestamp_header is invalid";
  if (basic || token) {
    /* a credential, not a signature: nothing to encode, sign or time */
    g->mode = basic ? HOOKD_GENERIC_BASIC : HOOKD_GENERIC_TOKEN;
    /* (each message begins with its field's path: the error's param) */
    static const char *const none[][3] = {
        {"encoding", "generic.encoding does not apply to algorithm token (a credential: nor do "
                     "template and timestamp_header)",
         "generic.encoding does not apply to algorithm basic (a credential: nor do template and "
         "timestamp_header)"},
        {"template", "generic.template does not apply to algorithm token (a credential: nor do "
                     "encoding and timestamp_header)",
         "generic.template does not apply to algorithm basic (a credential: nor do encoding and "
         "timestamp_header)"},
        {"timestamp_header", "generic.timestamp_header does not apply to algorithm token (a "
                             "credential: nor do encoding and template)",
         "generic.timestamp_header does not apply to algorithm basic (a credential: nor do "
         "encoding and template)"},
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
      if (json_object_get(v, none[i][0])) return none[i][basic ? 2 : 1];
    if (basic && g->prefix) return "generic.prefix does not apply to algorithm basic";
  } else if (!strcasecmp(alg, "sha1")) g->algorithm = HOOKD_MD_SHA1;
  else if (!strcasecmp(alg, "sha256")) g->algorithm = HOOKD_MD_SHA256;
  else if (!strcasecmp(alg, "sha512")) g->algorithm = HOOKD_MD_SHA512;
  else return "generic.algorithm must be sha1, sha256, sha512, token or basic";
  if (!strcasecmp(enc, "hex")) g->encoding = HOOKD_ENC_HEX;
  else if (!strcasecmp(enc, "base64")) g->encoding = HOOKD_ENC_BASE64;
  else return "generic.encoding must be hex or base64";
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    if (strcmp(k, "header") && strcmp(k, "prefix") && strcmp(k, "algorithm") &&
        strcmp(k, "encoding") && strcmp(k, "template") && strcmp(k, "id_header") &&
        strcmp(k, "timestamp_header"))
      return "generic has an unknown field";
  }
  if (g->mode != HOOKD_GENERIC_HMAC) return NULL;
  /* What the template leaves out of the MAC reaches the handler unsigned: the body, a timestamp
   * that would vouch for freshness, an id that would deduplicate. */
  const char *tpl = g->template && *g->template ? g->template : "{body}";
  bool has_ts = g->timestamp_header && *g->timestamp_header;
  bool has_id = g->id_header && *g->id_header;
  if (!strstr(tpl, "{body}")) return "generic.template must contain {body}";
  if (has_ts != (strstr(tpl, "{timestamp}") != NULL))
    return "generic.template must contain {timestamp} if and only if timestamp_header is set";
  if (has_id != (strstr(tpl, "{id}") != NULL))
    return "generic.template must contain {id} if and only if id_header is set";
  /* placeholders that touch, or one after {body}: its signed bytes could be split anew (a
   * captured request sent again as a new event); a source stored so before no longer loads */
  const char *tp = hookd_in_generic_template_problem(tpl);
  if (tp) {
    static _Thread_local char why[160];
    snprintf(why, sizeof why, "generic.template %s", tp);
    return why;
  }
  return NULL;
}

static hookd_source_rt *build(hookd_source_cache *s, const hookd_source *src) {
  hookd_source_rt *rt = calloc(1, sizeof *rt);
  if (!rt) return NULL;
  atomic_init(&rt->refs, 1);
  rt->src = *src;
  rt->src.id = strdup(src->id);
  rt->src.tenant_id = strdup(src->tenant_id);
  rt->src.provider = strdup(src->provider);
  rt->src.secrets = NULL;
#define DUP(f) rt->src.f = src->f ? strdup(src->f) : NULL
  DUP(event_types);
  DUP(identity_paths);
  DUP(business_paths);
  DUP(business_operation);
  DUP(version_object_path);
  DUP(version_path);
  DUP(version_header);
  DUP(generic);
  DUP(prior_identity_paths);
  DUP(business_types);
#undef DUP
  if (hookd_provider_parse(src->provider, &rt->provider) != 0) goto fail;
  json_t *arr = hookd_keyring_open_json(s->keyring, src->secrets, src->id);
  if (!json_is_array(arr)) {
    json_decref(arr);
    goto fail;
  }
  rt->secrets = calloc(json_array_size(arr) + 1, sizeof *rt->secrets);
  rt->secret_expires_ms = calloc(json_array_size(arr) + 1, sizeof *rt->secret_expires_ms);
  size_t i;
  json_t *x;
  json_array_foreach(arr, i, x) { /* a string, or {"secret", "expires_at": ms} */
    const char *v = json_string_value(json_is_object(x) ? json_object_get(x, "secret") : x);
    char *copy = v && rt->secrets && rt->secret_expires_ms ? strdup(v) : NULL;
    if (!copy) continue; /* (out of memory: verified by the others) */
    rt->secret_expires_ms[rt->n_secrets] = json_integer_value(json_object_get(x, "expires_at"));
    rt->secrets[rt->n_secrets++] = copy;
  }
  json_decref(arr);
  if (src->generic) {
    rt->generic_json = json_loads(src->generic, 0, NULL);
    if (!rt->generic_json || hookd_generic_parse(rt->generic_json, &rt->generic) != NULL) goto fail;
    rt->has_generic = true;
  }
  return rt;
fail:
  HLOG(HOOKD_LOG_ERROR, "source.unusable", KV_S("source_id", src->id),
       KV_S("tenant_id", src->tenant_id), KV_S("reason", "secrets or settings do not load"));
  rt_free(rt);
  return NULL;
}

hookd_source_cache *hookd_source_cache_new(const hookd_keyring *keyring) {
  hookd_source_cache *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->keyring = keyring;
  pthread_rwlock_init(&s->lock, NULL);
  hookd_strmap_init(&s->map);
  hookd_strmap_init(&s->tomb);
  return s;
}

void hookd_source_cache_free(hookd_source_cache *s) {
  if (!s) return;
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&s->map, i, &k, &v)) != 0;) hookd_source_rt_release(v);
  hookd_strmap_free(&s->map);
  hookd_strmap_free(&s->tomb);
  pthread_rwlock_destroy(&s->lock);
  free(s);
}

uint64_t hookd_source_cache_generation(hookd_source_cache *s) {
  pthread_rwlock_rdlock(&s->lock);
  uint64_t g = s->gen;
  pthread_rwlock_unlock(&s->lock);
  return g;
}

/* Whether this node changed id after generation `since` (call with the lock held). */
static bool changed_since(hookd_source_cache *s, const char *id, uint64_t since) {
  hookd_source_rt *cur = hookd_strmap_get(&s->map, id);
  if (cur) return cur->gen > since;
  void *t = hookd_strmap_get(&s->tomb, id);
  return t && (uint64_t)(uintptr_t)t > since;
}

/* since: UINT64_MAX for the API's own changes (always applied), else a sync's generation. */
static int put_since(hookd_source_cache *s, const hookd_source *src, uint64_t since) {
  hookd_source_rt *rt = build(s, src);
  hookd_source_rt *old = NULL;
  pthread_rwlock_wrlock(&s->lock);
  if (since != UINT64_MAX && changed_since(s, src->id, since)) {
    pthread_rwlock_unlock(&s->lock); /* newer here than in the list: kept */
    hookd_source_rt_release(rt);
    return 0;
  }
  old = hookd_strmap_del(&s->map, src->id);
  hookd_strmap_del(&s->tomb, src->id);
  if (rt) rt->gen = ++s->gen;
  if (rt && hookd_strmap_put(&s->map, src->id, rt) != 0) {
    hookd_source_rt_release(rt);
    rt = NULL;
  }
  pthread_rwlock_unlock(&s->lock);
  hookd_source_rt_release(old);
  return rt ? 0 : -1;
}

static void remove_since(hookd_source_cache *s, const char *id, uint64_t since) {
  hookd_source_rt *old = NULL;
  pthread_rwlock_wrlock(&s->lock);
  if (since == UINT64_MAX || !changed_since(s, id, since)) {
    old = hookd_strmap_del(&s->map, id);
    uint64_t g = ++s->gen;
    /* (out of memory: no tombstone, and a sync may bring the source back until the next) */
    (void)hookd_strmap_put(&s->tomb, id, (void *)(uintptr_t)g);
  }
  pthread_rwlock_unlock(&s->lock);
  hookd_source_rt_release(old);
}

int hookd_source_cache_put(hookd_source_cache *s, const hookd_source *src) {
  if (src->deleted_ms) {
    hookd_source_cache_remove(s, src->id);
    return 0;
  }
  return put_since(s, src, UINT64_MAX);
}

void hookd_source_cache_remove(hookd_source_cache *s, const char *id) {
  remove_since(s, id, UINT64_MAX);
}

/* The keys of m for which keep(key, value, arg) holds, copied (*n of them; free each, then the
 * array): a map is not changed while it is walked. What memory does not allow is left out (the
 * next refresh gets it). Call with the lock held. */
static char **keys_where(const hookd_strmap *m, bool (*keep)(const char *, void *, const void *),
                         const void *arg, size_t *n) {
  const char *k;
  void *v;
  char **out = NULL;
  size_t cap = 0;
  *n = 0;
  for (size_t i = 0; (i = hookd_strmap_next(m, i, &k, &v)) != 0;) {
    if (!keep(k, v, arg)) continue;
    if (*n == cap) {
      char **g = realloc(out, (cap = cap ? cap * 2 : 16) * sizeof *g);
      if (!g) break;
      out = g;
    }
    if (!(out[*n] = strdup(k))) break;
    ++*n;
  }
  return out;
}

static bool not_listed(const char *k, void *v, const void *listed) {
  (void)v;
  return !hookd_strmap_get((const hookd_strmap *)listed, k);
}

static bool seen_by(const char *k, void *v, const void *since) {
  (void)k;
  return (uint64_t)(uintptr_t)v <= *(const uint64_t *)since;
}

void hookd_source_cache_sync(hookd_source_cache *s, const hookd_source *list, size_t n,
                             uint64_t since) {
  /* rebuild only what changed */
  for (size_t i = 0; i < n; i++) {
    hookd_source_rt *cur = hookd_source_cache_get(s, list[i].id);
    bool same = cur && cur->src.updated_ms == list[i].updated_ms;
    hookd_source_rt_release(cur);
    if (!same) put_since(s, &list[i], since); /* the list holds live sources only */
  }
  /* and drop what is gone: one pass over a map of the listed ids (this runs every 2 s; a
   * search of the list per cached source was quadratic in the number of sources) */
  hookd_strmap listed;
  hookd_strmap_init(&listed);
  for (size_t i = 0; i < n; i++)
    if (hookd_strmap_put(&listed, list[i].id, (void *)&list[i]) != 0) {
      hookd_strmap_free(&listed); /* out of memory: drop nothing this time */
      return;
    }
  size_t ng;
  pthread_rwlock_rdlock(&s->lock);
  char **gone = keys_where(&s->map, not_listed, &listed, &ng);
  pthread_rwlock_unlock(&s->lock);
  hookd_strmap_free(&listed);
  for (size_t i = 0; i < ng; i++) {
    remove_since(s, gone[i], since);
    free(gone[i]);
  }
  free(gone);
  /* the tombstones of removals the list has seen are no longer needed */
  pthread_rwlock_wrlock(&s->lock);
  char **seen = keys_where(&s->tomb, seen_by, &since, &ng);
  for (size_t i = 0; i < ng; i++) {
    hookd_strmap_del(&s->tomb, seen[i]);
    free(seen[i]);
  }
  pthread_rwlock_unlock(&s->lock);
  free(seen);
}

hookd_source_rt *hookd_source_cache_get(hookd_source_cache *s, const char *id) {
  pthread_rwlock_rdlock(&s->lock);
  hookd_source_rt *rt = hookd_strmap_get(&s->map, id);
  if (rt) atomic_fetch_add(&rt->refs, 1);
  pthread_rwlock_unlock(&s->lock);
  return rt;
}
