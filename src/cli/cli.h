/* cli.h — the subcommands of the `hookd` program. Each returns the process exit code. */
#ifndef HOOKD_CLI_CLI_H
#define HOOKD_CLI_CLI_H

int hookd_cmd_serve(int argc, char **argv);
int hookd_cmd_version(int argc, char **argv);
int hookd_cmd_verify(int argc, char **argv);
int hookd_cmd_keys(int argc, char **argv);
int hookd_cmd_inbox(int argc, char **argv);

#endif
