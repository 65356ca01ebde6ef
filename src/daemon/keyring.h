/* keyring.h — the master key that seals endpoint and source secrets at rest (secretbox.h), and
 * where it comes from: HOOKD_MASTER_KEY (the key), --master-key-file, or by default a key file
 * next to the SQLite database, created at the first start of a store that holds no secret yet.
 * A store that holds sealed secrets never starts without the key that sealed them. */
#ifndef HOOKD_DAEMON_KEYRING_H
#define HOOKD_DAEMON_KEYRING_H

#include <jansson.h>
#include <stddef.h>

#include "core/secretbox.h"
#include "daemon/config.h"
#include "store/store.h"

typedef struct hookd_keyring {
  hookd_master_key key;
} hookd_keyring;

/* HOOKD_MASTER_KEY, or NULL when it is unset or empty (as every other HOOKD_ variable). */
const char *hookd_master_key_env(void);
/* The daemon's start, before any thread runs (setenv and unsetenv are not thread-safe: libpq and
 * libcurl read the environment from other threads): moves HOOKD_MASTER_KEY's text into the
 * process's memory, wipes it where it lay (/proc/<pid>/environ, a core dump) and removes it;
 * hookd_master_key_env reads the copy from then on. */
void hookd_master_key_env_take(void);
/* Wipes that copy (once the keyring holds the key). */
void hookd_master_key_env_forget(void);

/* Loads (or creates) the master key for cfg and checks that it opens the store's secrets.
 * Returns 0, or -1 with a message in err. */
int hookd_keyring_load(const hookd_config *cfg, hookd_store *store, hookd_keyring *out, char *err,
                       size_t errlen);
/* Checks the master key's own settings without the store (HOOKD_MASTER_KEY or
 * --master-key-file, not both; the one given readable and well formed): a start checks them
 * before it touches the store, so that a typo leaves nothing behind. 0, or -1 with err. */
int hookd_keyring_check(const hookd_config *cfg, char *err, size_t errlen);
/* The id of the master key a start on cfg will use, when it is known before the store is open
 * (HOOKD_MASTER_KEY, --master-key-file, a SQLite store's key file): 0 with id, or -1 with why
 * (none configured, a SQLite store's key file missing — one is made for a store without
 * secrets —, or unreadable). For the store's check before it migrates
 * (hookd_store_config.expect_key_id, .no_key_why). */
int hookd_keyring_expected_id(const hookd_config *cfg, char id[HOOKD_KEY_ID_LEN], char *why,
                              size_t why_len);
/* Reads a key from a file or from HOOKD_MASTER_KEY (file == NULL). */
int hookd_keyring_read(const char *file, hookd_master_key *out, char *err, size_t errlen);
/* Syncs a key file and its directory entry to disk (a key written a moment ago, before secrets
 * are sealed with it: after a power cut it must still be there). 0, or -1 with err. */
int hookd_keyring_file_sync(const char *file, char *err, size_t errlen);
/* Whether the key file is readable by others than its owner (group or other permission bits):
 * true with its permission bits in *mode; false too when it cannot be read. */
bool hookd_keyring_file_loose(const char *file, unsigned *mode);

/* Seals a secret for the row `owner_id` (malloc'd; NULL on failure). */
char *hookd_keyring_seal(const hookd_keyring *k, const char *plain, const char *owner_id);
/* Opens a stored secret (malloc'd; NULL when it does not open). A value stored before
 * encryption (not sealed) is returned as is. */
char *hookd_keyring_open(const hookd_keyring *k, const char *stored, const char *owner_id);
/* Opens a JSON value sealed whole (a source's secrets, an endpoint's custom headers) and parses
 * it (NULL when it does not open or is no JSON); the plain text is wiped once parsed. */
json_t *hookd_keyring_open_json(const hookd_keyring *k, const char *stored, const char *owner_id);

#endif
