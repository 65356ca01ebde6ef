/* inbound_sign.c — pre-signs Stripe-style webhook requests for the inbound benchmark's wrk
 * script (bench/inbound.lua): wrk's LuaJIT has no HMAC, so the signatures are computed here,
 * just before the run (Stripe's timestamp tolerance is 300 s by default).
 *
 *   inbound_sign -k SECRET -n COUNT -g TAG [-b BODY_BYTES] [-t UNIX_SECONDS] > FILE
 *
 * Output, one item per line:
 *   line 1: the timestamp t used in every signature
 *   line 2: the body's prefix (before the event id)
 *   line 3: the body's suffix (after the event id)
 *   then COUNT lines "EVENT_ID HEX_SIGNATURE": request i's body is prefix + id + suffix and its
 *   header is "Stripe-Signature: t=<t>,v1=<signature>". Ids are distinct (evt_<TAG>_<i>). */
#include <time.h>

#include "stripe_event.h"

int main(int argc, char **argv) {
  const char *secret = NULL, *tag = NULL;
  long long count = 0, ts = (long long)time(NULL);
  long bytes = 1024;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-k") && i + 1 < argc) secret = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) count = atoll(argv[++i]);
    else if (!strcmp(argv[i], "-g") && i + 1 < argc) tag = argv[++i];
    else if (!strcmp(argv[i], "-b") && i + 1 < argc) bytes = atol(argv[++i]);
    else if (!strcmp(argv[i], "-t") && i + 1 < argc) ts = atoll(argv[++i]);
    else {
      fprintf(stderr, "usage: %s -k SECRET -n COUNT -g TAG [-b BODY_BYTES] [-t UNIX_SECONDS]\n",
              argv[0]);
      return 2;
    }
  }
  stripe_template t;
  if (!secret || !tag || strlen(tag) != 8 || count < 1 ||
      stripe_template_init(&t, (size_t)bytes, ts) != 0) {
    fprintf(stderr, "inbound_sign: bad arguments (TAG is 8 characters, BODY_BYTES >= 512)\n");
    return 2;
  }
  static char obuf[1 << 20];
  setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
  printf("%lld\n%s\n%s\n", ts, t.prefix, t.suffix);
  char *body = malloc(t.bytes + 1), id[STRIPE_ID_LEN + 1], sig[65];
  for (long long i = 0; i < count; i++) {
    stripe_event_id(id, tag, (unsigned long long)i);
    stripe_body(&t, id, body);
    stripe_sign(secret, ts, body, t.bytes, sig);
    printf("%s %s\n", id, sig);
  }
  free(body);
  free(t.suffix);
  return fflush(stdout) == 0 ? 0 : 1;
}
