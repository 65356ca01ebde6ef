/* sqlite_pcache.c — process-wide SQLite set-up made once, before SQLite is first used: a page
 * cache that wraps SQLite's own to keep a commit's cache truncation cheap, and no global memory
 * statistics. See docs/architecture.md, "The page cache's scan at every commit".
 *
 * Why: when a page split reorders sibling pages, balance_nonroot() moves one page for a moment
 * to the number of the lock-byte page (PENDING_BYTE / page size + 1; 262,145 at 4 KiB)
 * and two moves later off it again. SQLite's default cache (pcache1) remembers the largest key it
 * has held, and the truncation to the database's size that ends every transaction scans the whole
 * hash table whenever that key is far past the end — at every commit that split a page, as long
 * as the database is under 1 GiB.
 *
 * What: every method passes through to SQLite's default cache, except that a move to exactly
 * that temporary number is made to key 0 (page numbers start at 1, so no real page has it), and
 * the move off it (same page, from the temporary number) is made from key 0. Only the cache's
 * private key differs; the pager's page header still carries the number SQLite chose. One page at
 * a time is parked; a second one, or a move whose page is not the parked one, passes through
 * unchanged (the old behaviour: a slow truncation, nothing worse). A parked page dropped before
 * its move back is forgotten. Anything else that concerns the temporary number while a page is
 * parked — a fetch of it, a truncation at or below it, the page unpinned (evictable from then
 * on) — first moves the page back to it, so the
 * cache then behaves exactly as SQLite's own (SQLite 3.40 does neither between the moves; this
 * keeps the wrapper right if another version does). Each cache belongs to one connection, which one thread uses at a
 * time (SQLITE_OPEN_NOMUTEX, no shared cache), so the parking state needs no lock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "store/sqlite/sqlite_int.h"

/* SQLite's lock-byte page starts at this offset (PENDING_BYTE; fixed outside SQLite's tests). */
#define SQ_PENDING_BYTE 0x40000000u

typedef struct {
  sqlite3_pcache *inner;
  unsigned park_key;           /* PENDING_BYTE / page size + 1 */
  sqlite3_pcache_page *parked; /* the page kept under key 0, if any */
} sq_pcache;

static sqlite3_pcache_methods2 base; /* SQLite's default page cache */
static atomic_uint_fast64_t parks;   /* pages parked under key 0 since start (tests) */
static int installed;

static int pc_init(void *arg) {
  (void)arg;
  return base.xInit ? base.xInit(base.pArg) : SQLITE_OK;
}

static void pc_shutdown(void *arg) {
  (void)arg;
  if (base.xShutdown) base.xShutdown(base.pArg);
}

static sqlite3_pcache *pc_create(int page_size, int extra, int purgeable) {
  sq_pcache *pc = calloc(1, sizeof *pc);
  if (!pc) return NULL;
  pc->inner = base.xCreate(page_size, extra, purgeable);
  if (!pc->inner) {
    free(pc);
    return NULL;
  }
  pc->park_key = page_size > 0 ? SQ_PENDING_BYTE / (unsigned)page_size + 1 : 0;
  return (sqlite3_pcache *)pc;
}

static void pc_cachesize(sqlite3_pcache *p, int n) { base.xCachesize(((sq_pcache *)p)->inner, n); }

static int pc_pagecount(sqlite3_pcache *p) { return base.xPagecount(((sq_pcache *)p)->inner); }

/* Puts the parked page back under the number SQLite gave it. */
static void unpark(sq_pcache *pc) {
  base.xRekey(pc->inner, pc->parked, 0, pc->park_key);
  pc->parked = NULL;
}

static sqlite3_pcache_page *pc_fetch(sqlite3_pcache *p, unsigned key, int create) {
  sq_pcache *pc = (sq_pcache *)p;
  if (pc->parked && key == pc->park_key) unpark(pc);
  return base.xFetch(pc->inner, key, create);
}

static void pc_unpin(sqlite3_pcache *p, sqlite3_pcache_page *page, int discard) {
  sq_pcache *pc = (sq_pcache *)p;
  /* unpinned, a page may be evicted or reused for another number at any time: one left parked
   * goes back under its own number first (3.40 never unpins a parked page; a review) */
  if (page == pc->parked) {
    if (discard) pc->parked = NULL;
    else unpark(pc);
  }
  base.xUnpin(pc->inner, page, discard);
}

static void pc_rekey(sqlite3_pcache *p, sqlite3_pcache_page *page, unsigned from, unsigned to) {
  sq_pcache *pc = (sq_pcache *)p;
  if (to == pc->park_key && from != 0 && !pc->parked) {
    base.xRekey(pc->inner, page, from, 0);
    pc->parked = page;
    atomic_fetch_add_explicit(&parks, 1, memory_order_relaxed);
    return;
  }
  if (from == pc->park_key && page == pc->parked) {
    pc->parked = NULL;
    base.xRekey(pc->inner, page, 0, to);
    return;
  }
  base.xRekey(pc->inner, page, from, to);
}

static void pc_truncate(sqlite3_pcache *p, unsigned limit) {
  sq_pcache *pc = (sq_pcache *)p;
  if (pc->parked && pc->park_key >= limit) unpark(pc); /* it goes with the others */
  base.xTruncate(pc->inner, limit);
}

static void pc_destroy(sqlite3_pcache *p) {
  sq_pcache *pc = (sq_pcache *)p;
  base.xDestroy(pc->inner);
  free(pc);
}

static void pc_shrink(sqlite3_pcache *p) {
  if (base.xShrink) base.xShrink(((sq_pcache *)p)->inner);
}

static sqlite3_pcache_methods2 wrap;

static void setup(void) {
  /* Both fail (SQLITE_MISUSE) once SQLite is initialised: then the defaults stay. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  if (sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &base) != SQLITE_OK || !base.xCreate) return;
  wrap = (sqlite3_pcache_methods2){
      .iVersion = 1,
      .pArg = NULL,
      .xInit = pc_init,
      .xShutdown = pc_shutdown,
      .xCreate = pc_create,
      .xCachesize = pc_cachesize,
      .xPagecount = pc_pagecount,
      .xFetch = pc_fetch,
      .xUnpin = pc_unpin,
      .xRekey = pc_rekey,
      .xTruncate = pc_truncate,
      .xDestroy = pc_destroy,
      .xShrink = pc_shrink,
  };
  installed = sqlite3_config(SQLITE_CONFIG_PCACHE2, &wrap) == SQLITE_OK;
}

int sq_process_setup(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, setup);
  return installed;
}

const sqlite3_pcache_methods2 *hookd_sqlite_pcache_methods(void) {
  return sq_process_setup() ? &wrap : NULL;
}

uint64_t hookd_sqlite_pcache_parks(void) {
  return (uint64_t)atomic_load_explicit(&parks, memory_order_relaxed);
}
