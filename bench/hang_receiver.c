/* hang_receiver.c — the webhook receiver of the isolation benchmark: many "endpoints" on one
 * loopback port, each chosen by path, that either answer at once or hang.
 *
 *   hang_receiver -l LOGFILE [-p PORT] [-H HOLD_SECONDS]
 *
 *   POST /ok/N     200 "ok" as soon as the body is read
 *   POST /hang/N   no answer: the connection is suspended (libmicrohttpd suspend/resume, no
 *                  thread per request) and only resumed after HOLD_SECONDS (default 60, longer
 *                  than any client timeout used here), when it is answered 200 if the client is
 *                  still there — by then it has long given up and closed the connection
 *   anything else  200 at once (endpoint -1)
 *
 * One libmicrohttpd thread with poll(). Not epoll: libmicrohttpd 0.9.75's epoll mode sometimes
 * never read the requests of a burst of a few hundred connections opened at once — every socket
 * accepted, data queued, the thread asleep in epoll_wait(-1) — and MHD_USE_TURBO only made it
 * rarer: on a faster host it stalled 3 of 6 drains for 10-40 s (hookd timed the requests out,
 * healthy endpoints included); with poll(), 6 of 6 ran clean. Prints "port=P" on stdout once
 * listening. Every request is logged when its headers have arrived, one line each:
 *   <CLOCK_REALTIME microseconds> <o|h|x> <N> <webhook-id header or ->
 * The log is flushed every second and at exit (SIGTERM / SIGINT), when a summary line
 *   hang_receiver requests=N ok=N hang=N other=N
 * goes to stderr. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

typedef struct req {
  char kind; /* 'o', 'h', 'x' */
  int hung;  /* suspended, waiting on the hold list */
  int resumed;
  double since;
  struct MHD_Connection *conn;
  struct req *next;
} req;

static FILE *logf;
static struct MHD_Response *ok_response;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static req *held_head, *held_tail; /* suspended, oldest first */
static volatile sig_atomic_t stop;
static unsigned long long n_req, n_ok, n_hang, n_other;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)c;
  (void)toe;
  free(*con_cls);
  *con_cls = NULL;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls) {
  (void)cls;
  (void)method;
  (void)version;
  (void)upload_data;
  req *r = *con_cls;
  if (!r) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    *con_cls = r;
    int n = -1;
    if (!strncmp(url, "/ok/", 4)) {
      r->kind = 'o';
      n = atoi(url + 4);
      n_ok++;
    } else if (!strncmp(url, "/hang/", 6)) {
      r->kind = 'h';
      n = atoi(url + 6);
      n_hang++;
    } else {
      r->kind = 'x';
      n_other++;
    }
    n_req++;
    const char *id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "webhook-id");
    fprintf(logf, "%lld %c %d %s\n",
            (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000, r->kind, n, id ? id : "-");
    if (r->kind == 'h') {
      r->conn = c;
      r->since = now_s();
      r->hung = 1;
      pthread_mutex_lock(&mu);
      if (held_tail) held_tail->next = r;
      else held_head = r;
      held_tail = r;
      pthread_mutex_unlock(&mu);
      MHD_suspend_connection(c);
    }
    return MHD_YES;
  }
  if (*upload_data_size) { /* the body: read and dropped */
    *upload_data_size = 0;
    return MHD_YES;
  }
  return MHD_queue_response(c, MHD_HTTP_OK, ok_response);
}

int main(int argc, char **argv) {
  const char *log_path = NULL;
  int port = 0;
  double hold = 60;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-l") && i + 1 < argc) log_path = argv[++i];
    else if (!strcmp(argv[i], "-p") && i + 1 < argc) port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-H") && i + 1 < argc) hold = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: %s -l LOGFILE [-p PORT] [-H HOLD_SECONDS]\n", argv[0]);
      return 2;
    }
  }
  if (!log_path || !(logf = fopen(log_path, "w"))) {
    fprintf(stderr, "hang_receiver: cannot open the log file\n");
    return 2;
  }
  static char logbuf[1 << 20];
  setvbuf(logf, logbuf, _IOFBF, sizeof logbuf);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only */
  ok_response = MHD_create_response_from_buffer(3, (void *)"ok\n", MHD_RESPMEM_PERSISTENT);
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
          MHD_USE_ERROR_LOG,
      (uint16_t)port, NULL, NULL, handler, NULL, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned int)20000, MHD_OPTION_LISTEN_BACKLOG_SIZE,
      (unsigned int)4096, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)0,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "hang_receiver: cannot start the daemon\n");
    return 1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  printf("port=%u\n", info ? (unsigned)info->port : 0u);
  fflush(stdout);

  double last_flush = now_s();
  while (!stop) {
    usleep(100 * 1000);
    double now = now_s();
    pthread_mutex_lock(&mu);
    while (held_head && now - held_head->since >= hold) {
      req *r = held_head;
      held_head = r->next;
      if (!held_head) held_tail = NULL;
      r->resumed = 1;
      MHD_resume_connection(r->conn);
    }
    pthread_mutex_unlock(&mu);
    if (now - last_flush >= 1) {
      fflush(logf);
      last_flush = now;
    }
  }
  /* resume what is still held so the daemon can close those connections */
  pthread_mutex_lock(&mu);
  for (req *r = held_head; r; r = r->next) MHD_resume_connection(r->conn);
  held_head = held_tail = NULL;
  pthread_mutex_unlock(&mu);
  MHD_stop_daemon(d);
  MHD_destroy_response(ok_response);
  fflush(logf);
  fclose(logf);
  fprintf(stderr, "hang_receiver requests=%llu ok=%llu hang=%llu other=%llu\n", n_req, n_ok,
          n_hang, n_other);
  return 0;
}
