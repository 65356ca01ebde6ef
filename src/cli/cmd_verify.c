/* cmd_verify.c — `hookd verify`: check a Standard Webhooks signature, the way a receiver must.
 *
 *   hookd verify --secret whsec_… --id msg_… --timestamp 1614265330 \
 *                --signature 'v1,…' --body body.json [--tolerance 300] [--now UNIX]
 * Headers may instead be given as --header 'webhook-id: …' (repeatable, svix-* too). An Ed25519
 * endpoint's signatures (v1a) are checked with --public-key whpk_… instead of --secret.
 * --tolerance is a positive number of seconds (the replay window is never off by a typo).
 * Exit 0: valid; 1: invalid (the reason on stderr); 2: usage. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/num.h"
#include "core/sign.h"

static void usage(void) {
  fprintf(stderr,
          "usage: hookd verify (--secret whsec_… | --public-key whpk_…) --body FILE (--id ID"
          " --timestamp TS --signature SIG | --header 'webhook-id: …' …) [--tolerance SECONDS]"
          " [--now UNIX]\n");
}

/* A whole decimal number in [min, max], or -1 (a message on stderr). */
static int number_arg(const char *flag, const char *v, long long min, long long max,
                      long long *out) {
  if (hookd_parse_ll(v, min, max, out) != 0) {
    fprintf(stderr, "hookd verify: %s must be a whole number in [%lld, %lld]\n", flag, min, max);
    return -1;
  }
  return 0;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
  if (!f) return NULL;
  hookd_buf b;
  hookd_buf_init(&b, 64 << 20);
  char chunk[8192];
  size_t n;
  int rc = 0;
  while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0) rc = hookd_buf_append(&b, chunk, n);
  if (f != stdin) fclose(f);
  if (rc) {
    hookd_buf_free(&b);
    return NULL;
  }
  *len = b.len;
  return hookd_buf_steal(&b);
}

int hookd_cmd_verify(int argc, char **argv) {
  const char *secret = NULL, *pubkey = NULL, *id = NULL, *ts = NULL, *sig = NULL,
             *body_path = NULL;
  long long tolerance = 300, now = (long long)time(NULL);
  static char hv[3][1024];
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      usage();
      return 2;
    }
    if (!strcmp(a, "--secret")) secret = v;
    else if (!strcmp(a, "--public-key")) pubkey = v;
    else if (!strcmp(a, "--id")) id = v;
    else if (!strcmp(a, "--timestamp")) ts = v;
    else if (!strcmp(a, "--signature")) sig = v;
    else if (!strcmp(a, "--body")) body_path = v;
    else if (!strcmp(a, "--tolerance")) {
      if (number_arg(a, v, 1, 315360000, &tolerance)) return 2;
    } else if (!strcmp(a, "--now")) {
      if (number_arg(a, v, 0, 253402300799LL, &now)) return 2;
    }
    else if (!strcmp(a, "--header")) {
      const char *colon = strchr(v, ':');
      if (!colon) {
        usage();
        return 2;
      }
      size_t nl = (size_t)(colon - v);
      const char *val = colon + 1;
      while (*val == ' ') val++;
      int slot = -1;
      if ((nl == 10 && !strncasecmp(v, "webhook-id", nl)) || (nl == 7 && !strncasecmp(v, "svix-id", nl))) slot = 0;
      else if ((nl == 17 && !strncasecmp(v, "webhook-timestamp", nl)) || (nl == 14 && !strncasecmp(v, "svix-timestamp", nl))) slot = 1;
      else if ((nl == 17 && !strncasecmp(v, "webhook-signature", nl)) || (nl == 14 && !strncasecmp(v, "svix-signature", nl))) slot = 2;
      if (slot >= 0) {
        snprintf(hv[slot], sizeof hv[slot], "%s", val);
        if (slot == 0) id = hv[0];
        if (slot == 1) ts = hv[1];
        if (slot == 2) sig = hv[2];
      }
    } else {
      usage();
      return 2;
    }
    i++;
  }
  if (!secret == !pubkey || !id || !ts || !sig || !body_path) {
    usage();
    return 2;
  }
  hookd_hmac_key key;
  if (secret && hookd_secret_parse(secret, &key) != 0) {
    fprintf(stderr, "hookd verify: the secret is not whsec_<base64>%s\n",
            strncmp(secret, "whpk_", 5) ? "" : " (a whpk_ key goes with --public-key)");
    return 2;
  }
  if (pubkey && strncmp(pubkey, "whpk_", 5) != 0) {
    fprintf(stderr, "hookd verify: the public key is not whpk_<base64>\n");
    return 2;
  }
  size_t len = 0;
  char *body = read_file(body_path, &len);
  if (!body) {
    fprintf(stderr, "hookd verify: cannot read %s\n", body_path);
    return 2;
  }
  int rc = secret ? hookd_verify_v1(&key, 1, id, ts, sig, body, len, now, tolerance)
                  : hookd_verify_v1a(pubkey, id, ts, sig, body, len, now, tolerance);
  if (secret) OPENSSL_cleanse(&key, sizeof key);
  free(body);
  if (rc == HOOKD_VERIFY_OK) {
    printf("valid\n");
    return 0;
  }
  fprintf(stderr, "invalid: %s\n", hookd_verify_strerror(rc));
  return 1;
}
