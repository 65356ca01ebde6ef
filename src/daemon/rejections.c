/* rejections.c — per-source counts and a ring of the latest refusals (see rejections.h). */
#include "daemon/rejections.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "daemon/api.h"

#define MESSAGE_MAX 200

typedef struct refusal {
  int64_t at_ms;
  int status;
  hookd_reject_reason kind;
  char message[MESSAGE_MAX + 1];
} refusal;

typedef struct source_refusals {
  uint64_t by_kind[HOOKD_REJECT__COUNT];
  uint64_t total;
  refusal ring[HOOKD_REJECTIONS_RECENT];
  size_t next; /* the slot the next refusal takes; the ring is full once total reaches its size */
  int64_t log_second;  /* the second of at_ms the log lines below were counted in */
  int log_lines;       /* lines logged in it */
  uint64_t suppressed; /* refusals not logged since the last line */
} source_refusals;

struct hookd_rejections {
  pthread_mutex_t lock;
  hookd_strmap map; /* source id → source_refusals* */
  int64_t since_ms;
};

hookd_rejections *hookd_rejections_new(int64_t since_ms) {
  hookd_rejections *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  pthread_mutex_init(&j->lock, NULL);
  hookd_strmap_init(&j->map);
  j->since_ms = since_ms;
  return j;
}

void hookd_rejections_free(hookd_rejections *j) {
  if (!j) return;
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&j->map, i, &k, &v)) != 0;) free(v);
  hookd_strmap_free(&j->map);
  pthread_mutex_destroy(&j->lock);
  free(j);
}

int64_t hookd_rejections_add(hookd_rejections *j, const char *source_id, int64_t at_ms,
                             int status, hookd_reject_reason kind, const char *message) {
  if (!j || (unsigned)kind >= HOOKD_REJECT__COUNT) return 0;
  int64_t log = 0;
  pthread_mutex_lock(&j->lock);
  source_refusals *s = hookd_strmap_get(&j->map, source_id);
  if (!s && (s = calloc(1, sizeof *s)) && hookd_strmap_put(&j->map, source_id, s) != 0) {
    free(s);
    s = NULL;
  }
  if (s) {
    refusal *f = &s->ring[s->next];
    s->next = (s->next + 1) % HOOKD_REJECTIONS_RECENT;
    s->total++;
    s->by_kind[kind]++;
    *f = (refusal){.at_ms = at_ms, .status = status, .kind = kind};
    size_t n = 0;
    for (const char *m = message ? message : ""; *m && n < MESSAGE_MAX; m++)
      f->message[n++] = *m >= 0x20 && *m < 0x7f ? *m : '?';
    f->message[n] = '\0';
    int64_t second = at_ms / 1000;
    if (second != s->log_second) {
      s->log_second = second;
      s->log_lines = 0;
    }
    if (s->log_lines < HOOKD_REJECTIONS_LOG_PER_S) {
      s->log_lines++;
      log = (int64_t)s->suppressed;
      s->suppressed = 0;
    } else {
      s->suppressed++;
      log = -1;
    }
  }
  pthread_mutex_unlock(&j->lock);
  return log;
}

json_t *hookd_rejections_json(hookd_rejections *j, const char *source_id) {
  json_t *by_kind = json_object(), *recent = json_array();
  uint64_t total = 0;
  if (j && by_kind && recent) {
    pthread_mutex_lock(&j->lock);
    const source_refusals *s = hookd_strmap_get(&j->map, source_id);
    if (s) {
      total = s->total;
      for (int k = 0; k < HOOKD_REJECT__COUNT; k++)
        if (s->by_kind[k])
          json_object_set_new(by_kind, hookd_reject_names[k],
                              json_integer((json_int_t)s->by_kind[k]));
      size_t held = total < HOOKD_REJECTIONS_RECENT ? (size_t)total : HOOKD_REJECTIONS_RECENT;
      for (size_t i = 1; i <= held; i++) { /* newest first: the slot before next, backwards */
        const refusal *f = &s->ring[(s->next + HOOKD_REJECTIONS_RECENT - i) %
                                    HOOKD_REJECTIONS_RECENT];
        json_array_append_new(recent, json_pack("{s:o,s:i,s:s,s:s}", "at",
                                                hookd_json_time(f->at_ms), "status", f->status,
                                                "kind", hookd_reject_names[f->kind], "message",
                                                f->message));
      }
    }
    pthread_mutex_unlock(&j->lock);
  }
  if (!by_kind || !recent) {
    json_decref(by_kind);
    json_decref(recent);
    return NULL;
  }
  return json_pack("{s:o,s:I,s:o,s:o}", "since", hookd_json_time(j ? j->since_ms : 0), "total",
                   (json_int_t)total, "by_kind", by_kind, "recent", recent);
}

void hookd_rejections_prune(hookd_rejections *j, bool (*alive)(const char *id, void *arg),
                            void *arg) {
  if (!j) return;
  pthread_mutex_lock(&j->lock);
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&j->map, i, &k, &v)) != 0;) {
    if (alive(k, arg)) continue;
    char id[256];
    snprintf(id, sizeof id, "%s", k); /* the key goes with the entry */
    free(hookd_strmap_del(&j->map, id));
  }
  pthread_mutex_unlock(&j->lock);
}

void hookd_rejections_forget(hookd_rejections *j, const char *source_id) {
  if (!j) return;
  pthread_mutex_lock(&j->lock);
  free(hookd_strmap_del(&j->map, source_id));
  pthread_mutex_unlock(&j->lock);
}
