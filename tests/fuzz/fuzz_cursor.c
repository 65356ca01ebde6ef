/* fuzz_cursor.c — libFuzzer target for the list cursors the API reads back (core/cursor.c, the
 * `before=` of the events, inbox and audit lists: untrusted text). The input, as a string, is
 * opened for each list: an accepted cursor must give a positive position that seals back to the
 * same text for that list, and no other list (nor a tenant's of that kind) accepts it. The first
 * 8 bytes, as a position, must seal and open back to themselves in a tenant's scope. */
#include <stdint.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/cursor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static hookd_cursor_key key;
  static int keyed;
  if (!keyed) {
    unsigned char master[32] = {7};
    check(hookd_cursor_key_derive(master, sizeof master, &key) == 0);
    keyed = 1;
  }
  char *s = dup_range(data, size > 64 ? 64 : size);
  static const char lists[] = {'e', 'i', 'a'};
  for (size_t i = 0; i < sizeof lists; i++) {
    int64_t seq = 0;
    if (hookd_cursor_open(&key, lists[i], NULL, s, &seq) != 0) continue;
    check(seq > 0);
    char back[HOOKD_CURSOR_LEN + 1];
    check(hookd_cursor_seal(&key, lists[i], NULL, seq, back) == 0 && strcmp(back, s) == 0);
    for (size_t j = 0; j < sizeof lists; j++) {
      int64_t other;
      if (j != i) check(hookd_cursor_open(&key, lists[j], NULL, s, &other) != 0);
    }
    int64_t other; /* nor by a tenant's list of the same kind */
    check(hookd_cursor_open(&key, lists[i], "tenant", s, &other) != 0);
  }
  free(s);
  if (size >= 8) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | data[i];
    int64_t seq = (int64_t)(v >> 1); /* 0 .. INT64_MAX */
    char c[HOOKD_CURSOR_LEN + 1];
    int64_t back = 0;
    if (seq > 0) {
      check(hookd_cursor_seal(&key, 'e', "tenant", seq, c) == 0);
      check(hookd_cursor_open(&key, 'e', "tenant", c, &back) == 0 && back == seq);
    } else {
      check(hookd_cursor_seal(&key, 'e', "tenant", seq, c) != 0);
    }
  }
  return 0;
}
