/* cli.h — the subcommands of the `hookd` program. Each returns the process exit code. */
#ifndef HOOKD_CLI_CLI_H
#define HOOKD_CLI_CLI_H

int hookd_cmd_serve(int argc, char **argv);
int hookd_cmd_version(int argc, char **argv);
int hookd_cmd_verify(int argc, char **argv);
int hookd_cmd_keys(int argc, char **argv);
int hookd_cmd_inbox(int argc, char **argv);

#include <stdbool.h>
/* false (and a message on stderr naming `who`) when url names an embedded store that does not
 * exist: commands that read or change a store never create an empty one by mistake. */
bool hookd_cli_store_exists(const char *who, const char *url);

#endif
