/* cmd_version.c — `hookd version`. */
#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int hookd_cmd_version(int argc, char **argv) {
  if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
    printf("usage: hookd version\n\nPrints hookd's version and those of the libraries it runs "
           "on.\n");
    return 0; /* as every other command's --help */
  }
  if (argc > 0) { /* it takes none: a stray one is a mistake, not ignored */
    fprintf(stderr, "usage: hookd version\n");
    return 2;
  }
  printf("hookd %s\n", HOOKD_VERSION);
  printf("  libcurl %s, libmicrohttpd %s, SQLite %s, jansson %s, %s\n",
         curl_version_info(CURLVERSION_NOW)->version, MHD_get_version(), sqlite3_libversion(),
         jansson_version_str(), OpenSSL_version(OPENSSL_VERSION));
  return 0;
}
