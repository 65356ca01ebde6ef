/* main.c — `hookd <command>`: dispatch to the subcommands. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void usage(FILE *out) {
  fprintf(out, "usage: hookd <command> [options]\n\n"
               "commands:\n"
               "  serve     run the daemon (hookd serve --help lists every option)\n"
               "  verify    check a Standard Webhooks signature (receivers' kit)\n"
               "  keys      API keys (create, list, revoke) and master-key rotation\n"
               "  inbox     replay a stored inbound request at a local handler\n"
               "  backup    copy a live embedded store (consistent, 0600)\n"
               "  version   print the version\n");
}

/* `--name=value` read as `--name value`, as serve's options are (hookd_config_load), for the
 * other commands: their parsers took `--secret=whsec_…` for an unknown option — and echoed
 * it. Only where an option is expected: a value is never split. out holds 2 * argc + 1
 * entries; names[] the copies made (freed by the caller). */
static int split_eq(int argc, char **argv, char **out, char **names) {
  int n = 0, nn = 0;
  bool value_next = false;
  for (int i = 0; i < argc; i++) {
    char *a = argv[i], *eq = strchr(a, '=');
    if (value_next || strncmp(a, "--", 2) != 0) {
      out[n++] = a;
      value_next = false;
    } else if (eq && eq > a + 2) {
      char *name = strndup(a, (size_t)(eq - a));
      if (!name) {
        out[n++] = a; /* (out of memory: left as given, refused as unknown) */
        continue;
      }
      names[nn++] = out[n++] = name;
      out[n++] = eq + 1;
    } else {
      out[n++] = a;
      /* every option of verify, keys, inbox and backup takes a value but these */
      value_next = strcmp(a, "--allow-remote") && strcmp(a, "--sign") && strcmp(a, "--help");
    }
  }
  out[n] = NULL;
  return n;
}

int main(int argc, char **argv) {
  /* started with stdin, stdout or stderr closed (`hookd serve >&-`), the next file opened would
   * take that number — the store's lock or database — and a printf would write into it */
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (n != fd) return 70; /* (EX_SOFTWARE) cannot even hold the numbers */
    }
  }
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "serve")) return hookd_cmd_serve(argc - 2, argv + 2);
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) return hookd_cmd_version(argc - 2, argv + 2);
  int (*sub)(int, char **) = !strcmp(cmd, "verify") ? hookd_cmd_verify
                             : !strcmp(cmd, "keys")  ? hookd_cmd_keys
                             : !strcmp(cmd, "inbox") ? hookd_cmd_inbox
                             : !strcmp(cmd, "backup") ? hookd_cmd_backup
                                                     : NULL;
  if (sub) {
    char **args = calloc(2 * (size_t)argc + 1, sizeof *args);
    char **names = calloc((size_t)argc + 1, sizeof *names);
    if (!args || !names) {
      free(args);
      free(names);
      return sub(argc - 2, argv + 2);
    }
    int rc = sub(split_eq(argc - 2, argv + 2, args, names), args);
    for (char **p = names; *p; p++) free(*p);
    free(names);
    free(args);
    return rc;
  }
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "hookd: unknown command \"%s\"\n", cmd);
  usage(stderr);
  return 2;
}
