/* cli.h — the subcommands of the `hookd` program. Each returns the process exit code. */
#ifndef HOOKD_CLI_CLI_H
#define HOOKD_CLI_CLI_H

int hookd_cmd_serve(int argc, char **argv);
int hookd_cmd_version(int argc, char **argv);
int hookd_cmd_verify(int argc, char **argv);
int hookd_cmd_keys(int argc, char **argv);
int hookd_cmd_inbox(int argc, char **argv);
int hookd_cmd_backup(int argc, char **argv);

#include <stdbool.h>
/* false (and a message on stderr naming `who`) when url names an embedded store that does not
 * exist: commands that read or change a store never create an empty one by mistake. */
bool hookd_cli_store_exists(const char *who, const char *url);

#include <stddef.h>
/* The master key file a command reads (*out; NULL: HOOKD_MASTER_KEY), as the daemon picks it:
 * flag_file, HOOKD_MASTER_KEY_FILE, HOOKD_MASTER_KEY, else an embedded store's <db>.key (written
 * into buf). -1 (a message on stderr naming `who`) when a file and HOOKD_MASTER_KEY both name
 * the key. */
int hookd_cli_master_key_file(const char *who, const char *flag_file, const char *store,
                              char *buf, size_t cap, const char **out);

/* An unexpected argument, said without repeating it when it is no option: a secret pasted
 * without its option, two secrets after one --secret — not to a terminal or a CI log. */
#define HOOKD_CLI_NOT_SHOWN                                                                     \
  "an argument that is no option (not shown: it may be a secret; each secret needs its own "  \
  "--secret)"

#endif
