/* cmd_verify.c — `hookd verify`: check a Standard Webhooks signature, the way a receiver must.
 *
 *   hookd verify --secret whsec_… --id msg_… --timestamp 1614265330 \
 *                --signature 'v1,…' --body body.json [--tolerance 300] [--now UNIX]
 * Headers may instead be given as --header 'webhook-id: …' (repeatable, svix-* too). --secret is
 * repeatable (during a rotation either may match); HOOKD_VERIFY_SECRET (several separated by
 * spaces) keeps secrets off the command line. An Ed25519 endpoint's signatures (v1a) are checked
 * with --public-key whpk_… instead.
 * --tolerance is a positive number of seconds (the replay window is never off by a typo).
 * Exit 0: valid; 1: invalid (the reason on stderr); 2: usage. */
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/num.h"
#include "core/sign.h"

static void usage(FILE *to) {
  fprintf(to,
          "usage: hookd verify (--secret whsec_… [--secret …] | --public-key whpk_…) --body FILE"
          " (--id ID --timestamp TS --signature SIG | --header 'webhook-id: …' …)"
          " [--tolerance SECONDS] [--now UNIX]\n"
          "  HOOKD_VERIFY_SECRET=\"whsec_… [whsec_…]\" instead of --secret keeps it out of ps\n");
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

/* The file's bytes, or NULL with *why set (unreadable, a directory, over 64 MiB). */
static char *read_file(const char *path, size_t *len, const char **why) {
  FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
  *why = "cannot read";
  if (!f) return NULL;
  hookd_buf b;
  hookd_buf_init(&b, 64 << 20);
  char chunk[8192];
  size_t n;
  int rc = 0;
  while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0) rc = hookd_buf_append(&b, chunk, n);
  bool failed = ferror(f) != 0; /* a directory opens, then fails to read */
  if (f != stdin) fclose(f);
  if (rc || failed) {
    if (rc == HOOKD_BUF_TOOBIG) *why = "cannot verify a body over 64 MiB";
    hookd_buf_free(&b);
    return NULL;
  }
  *len = b.len;
  return hookd_buf_steal(&b);
}

/* A header value as a receiver's HTTP parser gives it: without surrounding blanks, nor the
 * \r or \n a line pasted from a capture ends with. */
static char *header_value(const char *v) {
  while (*v == ' ' || *v == '\t') v++;
  size_t n = strlen(v);
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n')) n--;
  return strndup(v, n);
}

#define MAX_SECRETS 8

int hookd_cmd_verify(int argc, char **argv) {
  const char *secrets[MAX_SECRETS], *pubkey = NULL, *id = NULL, *ts = NULL, *sig = NULL,
                                    *body_path = NULL;
  size_t nsecrets = 0;
  long long tolerance = 300, now = (long long)time(NULL);
  char *hv[3] = {NULL, NULL, NULL};
  char *env_copy = NULL;
  int ret = 2;
  bool seen[9] = {false}; /* by the index in names[] below */
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout); /* asked for: the answer, on stdout */
      ret = 0;
      goto out;
    }
    static const char *const names[] = {"--secret", "--public-key", "--id", "--timestamp",
                                        "--signature", "--body", "--tolerance", "--now",
                                        "--header"};
    size_t k = 0;
    while (k < sizeof names / sizeof *names && strcmp(a, names[k])) k++;

    if (!v && k < sizeof names / sizeof *names) {
      fprintf(stderr, "hookd verify: %.40s needs a value\n", a);
      goto usage_out;
    }
    if (k >= 2 && k <= 7) { /* --id … --now: one value each (the last taken would judge another
                             * request than meant; --id and a webhook-id --header are one) */
      if (seen[k]) {
        fprintf(stderr, "hookd verify: %s given twice\n", names[k]);
        goto usage_out;
      }
      seen[k] = true;
    }
    if (!strcmp(a, "--secret")) {
      /* repeatable: during a rotation a receiver holds both secrets, and either may match */
      if (nsecrets == MAX_SECRETS) {
        fprintf(stderr, "hookd verify: at most %d secrets\n", MAX_SECRETS);
        goto out;
      }
      secrets[nsecrets++] = v;
    } else if (!strcmp(a, "--public-key")) {
      if (pubkey) { /* one key per check: a second one silently taken over the first misleads */
        fprintf(stderr, "hookd verify: --public-key given twice: check with one key at a time\n");
        goto out;
      }
      pubkey = v;
    } else if (!strcmp(a, "--id")) {
      id = v;
    } else if (!strcmp(a, "--timestamp")) {
      ts = v;
    } else if (!strcmp(a, "--signature")) {
      sig = v;
    } else if (!strcmp(a, "--body")) {
      body_path = v;
    } else if (!strcmp(a, "--tolerance")) {
      if (number_arg(a, v, 1, 315360000, &tolerance)) goto out;
    } else if (!strcmp(a, "--now")) {
      if (number_arg(a, v, 0, 253402300799LL, &now)) goto out;
    } else if (!strcmp(a, "--header")) {
      const char *colon = strchr(v, ':');
      if (!colon) {
        /* (not repeated: a secret given as --header's value is not to land in a log) */
        fprintf(stderr, "hookd verify: --header takes \"Name: value\" (no colon in the value "
                        "given, not shown: it may be a secret)\n");
        goto usage_out;
      }
      size_t nl = (size_t)(colon - v);
      int slot = -1;
      if ((nl == 10 && !strncasecmp(v, "webhook-id", nl)) ||
          (nl == 7 && !strncasecmp(v, "svix-id", nl)))
        slot = 0;
      else if ((nl == 17 && !strncasecmp(v, "webhook-timestamp", nl)) ||
               (nl == 14 && !strncasecmp(v, "svix-timestamp", nl)))
        slot = 1;
      else if ((nl == 17 && !strncasecmp(v, "webhook-signature", nl)) ||
               (nl == 14 && !strncasecmp(v, "svix-signature", nl)))
        slot = 2;
      if (slot >= 0 && seen[2 + slot]) {
        fprintf(stderr, "hookd verify: %s given twice\n", names[2 + slot]);
        goto usage_out;
      }
      if (slot >= 0) {
        seen[2 + slot] = true;
        free(hv[slot]);
        if (!(hv[slot] = header_value(colon + 1))) goto out;
        if (slot == 0) id = hv[0];
        if (slot == 1) ts = hv[1];
        if (slot == 2) sig = hv[2];
      }
    } else {
      if (!strncmp(a, "--", 2)) fprintf(stderr, "hookd verify: unknown option %.40s\n", a);
      else fprintf(stderr, "hookd verify: %s\n", HOOKD_CLI_NOT_SHOWN);
      goto usage_out;
    }
    i++;
  }
  /* the secret(s) from the environment keeps them out of `ps`: HOOKD_VERIFY_SECRET, several
   * separated by spaces */
  const char *env = getenv("HOOKD_VERIFY_SECRET");
  if (!nsecrets && !pubkey && env && *env) {
    if (!(env_copy = strdup(env))) goto out;
    for (char *save = NULL, *t = strtok_r(env_copy, " \t", &save); t;
         t = strtok_r(NULL, " \t", &save)) {
      if (nsecrets == MAX_SECRETS) {
        fprintf(stderr, "hookd verify: at most %d secrets\n", MAX_SECRETS);
        goto out;
      }
      secrets[nsecrets++] = t;
    }
  }
  if (!nsecrets == !pubkey || !id || !ts || !sig || !body_path) {
    fprintf(stderr, "hookd verify: %s\n",
            !nsecrets == !pubkey ? "give --secret (or HOOKD_VERIFY_SECRET) or --public-key, one"
            : !id                ? "the webhook-id is missing (--id or --header)"
            : !ts                ? "the webhook-timestamp is missing (--timestamp or --header)"
            : !sig               ? "the webhook-signature is missing (--signature or --header)"
                                 : "--body FILE is missing");
    goto usage_out;
  }
  hookd_hmac_key keys[MAX_SECRETS];
  for (size_t k = 0; k < nsecrets; k++) {
    if (hookd_secret_parse(secrets[k], &keys[k]) != 0) {
      fprintf(stderr, "hookd verify: a secret is not whsec_<base64>%s\n",
              strncmp(secrets[k], "whpk_", 5) ? "" : " (a whpk_ key goes with --public-key)");
      OPENSSL_cleanse(keys, sizeof keys);
      goto out;
    }
  }
  if (pubkey && !hookd_ed25519_public_ok(pubkey)) {
    fprintf(stderr, "hookd verify: the public key is not whpk_<base64 of 32 bytes>\n");
    goto out;
  }
  size_t len = 0;
  const char *why;
  char *body = read_file(body_path, &len, &why);
  if (!body) {
    fprintf(stderr, "hookd verify: %s: %s\n", body_path, why);
    OPENSSL_cleanse(keys, sizeof keys);
    goto out;
  }
  int rc = nsecrets ? hookd_verify_v1(keys, nsecrets, id, ts, sig, body, len, now, tolerance)
                    : hookd_verify_v1a(pubkey, id, ts, sig, body, len, now, tolerance);
  OPENSSL_cleanse(keys, sizeof keys);
  free(body);
  if (rc == HOOKD_VERIFY_OK) {
    printf("valid\n");
    ret = 0;
  } else {
    /* a header of the other scheme's signatures alone: which option checks them */
    bool v1 = false, v1a = false;
    for (const char *p = sig; (p = strstr(p, "v1")) != NULL; p += 2)
      if (p == sig || p[-1] == ' ') *(p[2] == 'a' ? &v1a : &v1) |= p[2] == ',' || p[2] == 'a';
    const char *hint = nsecrets && v1a && !v1   ? " (its signatures are v1a, Ed25519: check them "
                                                  "with --public-key whpk_…)"
                       : !nsecrets && v1 && !v1a ? " (its signatures are v1, HMAC: check them "
                                                   "with --secret whsec_…)"
                                                 : "";
    fprintf(stderr, "invalid: %s%s\n", hookd_verify_strerror(rc), hint);
    ret = 1;
  }
  goto out;
usage_out:
  usage(stderr);
out:
  for (int k = 0; k < 3; k++) free(hv[k]);
  free(env_copy);
  return ret;
}
