/* dashboard.h — the operator dashboard's static files (docs/dashboard.md), compiled into hookd
 * by cmake/embed.cmake, and the route that serves them. */
#ifndef HOOKD_DASHBOARD_H
#define HOOKD_DASHBOARD_H

#include <stddef.h>

typedef struct hookd_asset {
  const char *name; /* the file's name, e.g. "app.js" */
  const unsigned char *data;
  size_t len;
} hookd_asset;

/* Every file, ended by one whose name is NULL (generated: dashboard_assets.c). */
extern const hookd_asset hookd_dashboard_assets[];

/* The file named name, or NULL. */
const hookd_asset *hookd_dashboard_find(const char *name);

#endif
