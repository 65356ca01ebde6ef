/* main.c — `hookd <command>`: dispatch to the subcommands. */
#include <errno.h>
#include <fcntl.h>
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
               "  version   print the version\n");
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
  if (!strcmp(cmd, "verify")) return hookd_cmd_verify(argc - 2, argv + 2);
  if (!strcmp(cmd, "keys")) return hookd_cmd_keys(argc - 2, argv + 2);
  if (!strcmp(cmd, "inbox")) return hookd_cmd_inbox(argc - 2, argv + 2);
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "hookd: unknown command \"%s\"\n", cmd);
  usage(stderr);
  return 2;
}
