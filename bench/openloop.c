/* openloop.c — open-loop HTTP load generator for hookd's publish-latency benchmark.
 *
 *   openloop -r RATE -d SECONDS [-w WARMUP_SECONDS] [-c MAX_CONNECTIONS] [-b BODY_BYTES]
 *            [-H "Name: value"]... [-s EXPECTED_STATUS] [-T TYPES]
 *            [-S STRIPE_SECRET -g TAG [-D]] URL [URL...]
 *
 * Sends POST requests at a fixed rate (request i is due at start + i/RATE, whatever happened to
 * earlier ones: open loop, so a slow server cannot slow the offered load down), cycling through
 * the URLs, over at most MAX_CONNECTIONS keep-alive connections (libcurl multi). Each request's
 * latency is measured from the moment it was due, so time spent waiting for a free connection
 * counts (no coordinated omission); requests leave in 1 ms ticks. The body is a JSON event of
 * about BODY_BYTES bytes:
 *   {"type":"order.created","payload":{"order":N,"pad":"xx…"}}
 * With -T TYPES the event type cycles through "t000" … (TYPES-1), request i having type i % TYPES
 * (the isolation benchmark routes each type to one endpoint).
 * With -S the requests are instead Stripe-style webhooks for POST /in/{source}
 * (bench/stripe_event.h): request i carries event id evt_TAG_i (a new event each time; with -D
 * every request repeats id 0, the duplicate path), and a Stripe-Signature header computed as it
 * leaves (t = the current second), so the timestamp is always within the tolerance.
 * Requests due during the warm-up are sent but not counted. Prints one line of key=value pairs:
 *   offered_rps achieved_rps sent ok other errors p50_ms p90_ms p99_ms p999_ms max_ms
 *   service_p50_ms service_p99_ms (latency from the actual send, without connection wait)
 * ok counts responses with EXPECTED_STATUS (default 202); latencies are of those only. */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "stripe_event.h"

typedef struct slot {
  CURL *easy;
  double due, sent;
  int counted;
  char *body;                 /* per-request body (-T, -S) */
  struct curl_slist *headers; /* per-request header list (-S) */
  struct slot *next_free;
} slot;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p) {
  if (!n) return NAN;
  size_t i = (size_t)ceil(p * (double)n) - 1;
  if (i >= n) i = n - 1;
  return v[i];
}

int main(int argc, char **argv) {
  double rate = 1000, duration = 10, warmup = 2;
  long max_conns = 256, body_bytes = 1024, expect = 202;
  struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  const char *urls[64];
  int n_urls = 0;
  long types = 0, dup = 0;
  const char *stripe_secret = NULL, *tag = "openloop";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-r") && i + 1 < argc) rate = atof(argv[++i]);
    else if (!strcmp(argv[i], "-d") && i + 1 < argc) duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "-w") && i + 1 < argc) warmup = atof(argv[++i]);
    else if (!strcmp(argv[i], "-c") && i + 1 < argc) max_conns = atol(argv[++i]);
    else if (!strcmp(argv[i], "-b") && i + 1 < argc) body_bytes = atol(argv[++i]);
    else if (!strcmp(argv[i], "-s") && i + 1 < argc) expect = atol(argv[++i]);
    else if (!strcmp(argv[i], "-H") && i + 1 < argc) headers = curl_slist_append(headers, argv[++i]);
    else if (!strcmp(argv[i], "-T") && i + 1 < argc) types = atol(argv[++i]);
    else if (!strcmp(argv[i], "-S") && i + 1 < argc) stripe_secret = argv[++i];
    else if (!strcmp(argv[i], "-g") && i + 1 < argc) tag = argv[++i];
    else if (!strcmp(argv[i], "-D")) dup = 1;
    else if (argv[i][0] != '-' && n_urls < 64) urls[n_urls++] = argv[i];
    else {
      fprintf(stderr, "usage: %s -r RATE -d SECONDS [-w WARMUP] [-c MAX_CONNECTIONS] "
                      "[-b BODY_BYTES] [-H HEADER]... [-s STATUS] [-T TYPES] "
                      "[-S STRIPE_SECRET -g TAG [-D]] URL [URL...]\n", argv[0]);
      return 2;
    }
  }
  if (!n_urls || rate <= 0 || duration <= 0 || warmup < 0 || max_conns < 1 || body_bytes < 100 ||
      types < 0 || types > 1000 || strlen(tag) != 8 || (stripe_secret && body_bytes < 512)) {
    fprintf(stderr, "openloop: bad arguments\n");
    return 2;
  }

  char *body = malloc((size_t)body_bytes + 1);
  int head = snprintf(body, (size_t)body_bytes + 1,
                      "{\"type\":\"order.created\",\"payload\":{\"order\":12345,\"pad\":\"");
  memset(body + head, 'x', (size_t)body_bytes - (size_t)head - 3);
  memcpy(body + body_bytes - 3, "\"}}", 4);
  stripe_template tpl = {0};
  if (stripe_secret && stripe_template_init(&tpl, (size_t)body_bytes, (long long)time(NULL)) != 0) {
    fprintf(stderr, "openloop: cannot build the Stripe body\n");
    return 2;
  }
  int per_request = stripe_secret || types;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM *m = curl_multi_init();
  curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, max_conns);
  curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, max_conns);

  /* One slot per possible in-flight request; requests beyond that wait in the schedule (their
   * latency keeps growing from their due time, as it should). */
  long n_slots = max_conns;
  slot *slots = calloc((size_t)n_slots, sizeof *slots);
  slot *free_list = NULL;
  for (long i = n_slots - 1; i >= 0; i--) {
    slot *s = &slots[i];
    s->easy = curl_easy_init();
    if (per_request) s->body = malloc((size_t)body_bytes + 1);
    curl_easy_setopt(s->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, per_request ? s->body : body);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_bytes);
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, (char *)s);
    s->next_free = free_list;
    free_list = s;
  }

  size_t total = (size_t)ceil(rate * (warmup + duration));
  double *lat = malloc(total * sizeof *lat), *svc = malloc(total * sizeof *svc);
  size_t n_lat = 0;
  long sent = 0, ok = 0, other = 0, errors = 0, in_flight = 0;
  double t0 = now_s() + 0.05, t_count = t0 + warmup, t_stop = t_count + duration;
  size_t next = 0; /* index of the next request to send */
  double last_done = t0;

  while (next < total || in_flight > 0) {
    double t = now_s();
    /* start every request that is due and has a slot */
    while (next < total && free_list) {
      double due = t0 + (double)next / rate;
      if (due > t) break;
      slot *s = free_list;
      free_list = s->next_free;
      s->due = due;
      s->sent = t;
      s->counted = due >= t_count && due < t_stop;
      curl_easy_setopt(s->easy, CURLOPT_URL, urls[next % (size_t)n_urls]);
      if (stripe_secret) {
        char id[STRIPE_ID_LEN + 1], sig[65], h[128];
        long long ts = (long long)time(NULL);
        stripe_event_id(id, tag, dup ? 0 : (unsigned long long)next);
        stripe_body(&tpl, id, s->body);
        stripe_sign(stripe_secret, ts, s->body, (size_t)body_bytes, sig);
        curl_slist_free_all(s->headers);
        s->headers = NULL;
        for (struct curl_slist *l = headers; l; l = l->next)
          s->headers = curl_slist_append(s->headers, l->data);
        snprintf(h, sizeof h, "Stripe-Signature: t=%lld,v1=%s", ts, sig);
        s->headers = curl_slist_append(s->headers, h);
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
      } else if (types) {
        int hn = snprintf(s->body, (size_t)body_bytes + 1,
                          "{\"type\":\"t%03ld\",\"payload\":{\"order\":%zu,\"pad\":\"",
                          (long)(next % (size_t)types), next);
        memset(s->body + hn, 'x', (size_t)body_bytes - (size_t)hn - 3);
        memcpy(s->body + body_bytes - 3, "\"}}", 4);
      }
      curl_multi_add_handle(m, s->easy);
      next++;
      sent++;
      in_flight++;
    }
    int running;
    curl_multi_perform(m, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      slot *s = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
      double done = now_s();
      long status = 0;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
      CURLcode rc = msg->data.result;
      curl_multi_remove_handle(m, msg->easy_handle);
      in_flight--;
      if (s->counted) {
        if (rc != CURLE_OK) {
          errors++;
        } else if (status == expect) {
          ok++;
          lat[n_lat] = (done - s->due) * 1e3;
          svc[n_lat] = (done - s->sent) * 1e3;
          n_lat++;
          last_done = done;
        } else {
          other++;
        }
      }
      s->next_free = free_list;
      free_list = s;
    }
    /* sleep until the next request is due (rounded up to the next millisecond: sends leave in
     * 1 ms ticks, and a late send counts against the measured latency) or a socket is ready */
    int wait_ms = 100;
    if (next < total && free_list) {
      double due = t0 + (double)next / rate - now_s();
      wait_ms = due <= 0 ? 0 : (int)ceil(due * 1e3);
    }
    if (wait_ms > 0) curl_multi_poll(m, NULL, 0, wait_ms, NULL);
  }

  qsort(lat, n_lat, sizeof *lat, cmp_double);
  qsort(svc, n_lat, sizeof *svc, cmp_double);
  double span = last_done - t_count;
  printf("offered_rps=%.0f achieved_rps=%.0f sent=%ld ok=%ld other=%ld errors=%ld "
         "p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f p999_ms=%.2f max_ms=%.2f "
         "service_p50_ms=%.2f service_p99_ms=%.2f\n",
         rate, span > 0 ? (double)ok / (span > duration ? span : duration) : 0.0, sent, ok, other,
         errors, pct(lat, n_lat, 0.50), pct(lat, n_lat, 0.90), pct(lat, n_lat, 0.99),
         pct(lat, n_lat, 0.999), n_lat ? lat[n_lat - 1] : NAN, pct(svc, n_lat, 0.50),
         pct(svc, n_lat, 0.99));
  for (long i = 0; i < n_slots; i++) {
    curl_easy_cleanup(slots[i].easy);
    curl_slist_free_all(slots[i].headers);
    free(slots[i].body);
  }
  curl_multi_cleanup(m);
  curl_global_cleanup();
  return ok ? 0 : 1;
}
